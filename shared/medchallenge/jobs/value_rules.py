"""What a job's output values may hold, one set of rules per socket for pre-flight and the hospital gateway: the
structure, finite numbers in range, positions inside the image the job was given, at most `MAX_FINDINGS` entries.
A value that breaks a rule gives one InputError line: the gateway refuses the result with it (before it writes any
DICOM), and pre-flight says, per job, that the gateway would (grand-challenge itself accepts any valid JSON).
A container's output is hostile like any input: no rule echoes a value it refuses.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .image_grid import ImageGrid, image_position, read_image_grid
from .outputs import OutputResult
from .values import SocketValue

MAX_FINDINGS = 100  # boxes, points or detections one result may hold: a container cannot make a huge SR


@dataclass(frozen=True)
class Point:
    """A world point of a `Multiple points` value placed in the image: slice `k`, voxel (i, j), its probability."""

    k: int
    i: float
    j: float
    probability: float


def number_in(value: object, what: str, low: float, high: float) -> float:
    """A JSON number (not a bool) that is finite and in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high:
        raise InputError(f"{what}: expected a number from {low:g} to {high:g}")
    return float(value)


def limited(entries: object, what: str) -> list:
    """A JSON list of at most MAX_FINDINGS entries."""
    if not isinstance(entries, list):
        raise InputError(f"{what}: expected a list")
    if len(entries) > MAX_FINDINGS:
        raise InputError(f"{what}: {len(entries)} entries, more than the {MAX_FINDINGS} a result may hold")
    return entries


def cavern_boxes(document: object, shape: tuple[int, ...]) -> list[tuple[tuple[int, ...], float]]:
    """tb-cavern-boxes: `{"boxes": [{"voxel_bbox": [x1, y1, z1, x2, y2, z2], "probability": p}]}`, integer
    corners ordered and inside the image of `shape` (x, y, z), probability in [0, 1] (1 when absent)."""
    boxes = limited(document.get("boxes") if isinstance(document, dict) else None, "tb-cavern-boxes: boxes")
    checked = []
    for index, box in enumerate(boxes):
        where = f"tb-cavern-boxes: boxes[{index}]"
        corners = box.get("voxel_bbox") if isinstance(box, dict) else None
        if not (isinstance(corners, list) and len(corners) == 6 and all(type(v) is int for v in corners)):
            raise InputError(f"{where}: voxel_bbox must be a list of 6 integers")
        if not all(0 <= corners[a] <= corners[a + 3] < shape[a] for a in range(3)):
            raise InputError(f"{where}: voxel_bbox outside the {'x'.join(map(str, shape))} image or unordered")
        checked.append((tuple(corners), number_in(box.get("probability", 1.0), f"{where}: probability", 0, 1)))
    return checked


def world_points(value: object, slug: str, grid: ImageGrid, volume: bool,
                 default_probability: float = 1.0) -> list[Point]:
    """A `Multiple points` value (grand-challenge's: world coordinates in mm of the image the job was given): each
    point three finite numbers within half a voxel of the image's bounds, probability in [0, 1] (else
    `default_probability`). Points' names are not kept (hostile text)."""
    entries = limited(value.get("points") if isinstance(value, dict) else None, f"{slug}: points")
    points = []
    for index, point in enumerate(entries):
        where = f"{slug}: points[{index}]"
        xyz = point.get("point") if isinstance(point, dict) else None
        if not (isinstance(xyz, list) and len(xyz) == 3):
            raise InputError(f"{where}: point must be [x, y, z] in mm")
        world = tuple(number_in(v, f"{where}: {axis}", -1e6, 1e6) for v, axis in zip(xyz, "xyz"))
        position = image_position(grid, world, volume)
        if position is None:
            raise InputError(f"{where}: outside the {'x'.join(map(str, grid.shape))} image (more than half a voxel "
                             "beyond its bounds)")
        points.append(Point(*position, number_in(point.get("probability", default_probability),
                                                 f"{where}: probability", 0, 1)))
    return points


def rib_fracture_detections(document: object, present: Collection[int],
                            codes: Collection[int]) -> list[tuple[int, int, float]]:
    """rib-fracture-detections: `{"detections": [{"label_id", "label_code", "confidence"}]}`, each label one of
    the instance image's (`present`), its code one of `codes`, its confidence in [0, 1]."""
    where = "rib-fracture-detections"
    checked = []
    for index, entry in enumerate(limited(document.get("detections") if isinstance(document, dict) else None,
                                          f"{where}: detections")):
        label = entry.get("label_id") if isinstance(entry, dict) else None
        code = entry.get("label_code") if isinstance(entry, dict) else None
        if type(label) is not int or label <= 0 or label not in present or code not in codes:
            raise InputError(f"{where}: detections[{index}]: label_id must be a label of the instance image and "
                             f"label_code one of {', '.join(map(str, codes))}")
        checked.append((label, code, number_in(entry.get("confidence"), f"{where}: detections[{index}]: confidence",
                                               0, 1)))
    return checked


CHALLENGE_RULES = ("tb-caverns", "object-cxr", "ribfrac")  # the interfaces whose outputs the gateway writes


def challenge_outputs(interface: str, values: Mapping[str, object], grid: ImageGrid) -> None:
    """Every rule of a challenge interface's output sockets (`values`: JSON values by slug, label images as paths),
    on the image the job was given; InputError on the first broken one. Pre-flight's check of what the gateway
    would refuse; the gateway's writers apply the same rules as they convert."""
    if interface == "tb-caverns":
        cavern_boxes(values["tb-cavern-boxes"], grid.shape)
    elif interface == "object-cxr":
        likelihood = number_in(values["foreign-object-likelihood"], "foreign-object-likelihood", 0, 1)
        world_points(values["foreign-objects"], "foreign-objects", grid, False, likelihood)
    elif interface == "ribfrac":
        import SimpleITK as sitk

        from ..dicom.detectors import RIB_FRACTURE_TYPES

        labels = sitk.GetArrayViewFromImage(sitk.ReadImage(str(values["rib-fracture-instances"])))
        rib_fracture_detections(values["rib-fracture-detections"], set(np.unique(labels).tolist()),
                                RIB_FRACTURE_TYPES)


def gateway_refusal(interface: str, inputs: Sequence[SocketValue], outputs: Sequence[OutputResult]) -> str | None:
    """The line the hospital gateway would refuse a succeeded job's outputs with (challenge_outputs on the image the
    job was given), or None; for interfaces the gateway has no writer for, None."""
    from ..limits import load_json

    if interface not in CHALLENGE_RULES:
        return None
    image = next((value.image_file for value in inputs if value.image_file is not None), None)
    if image is None:
        return None
    values: dict[str, object] = {}
    for output in outputs:
        value = output.value
        if value is None:
            return None  # a failed output: the job failed, which says more
        if value.image_file is not None:
            values[output.socket.slug] = value.image_file
        elif value.content is not None:  # a File socket's bytes (size-checked when the job's output was read)
            values[output.socket.slug] = load_json(value.content.decode("utf-8", "replace"),
                                                   output.socket.relative_path)
        else:  # a Value socket: parsed when the job's output was read
            values[output.socket.slug] = value.value
    try:
        challenge_outputs(interface, values, read_image_grid(image))
    except InputError as exc:
        return str(exc)
    return None
