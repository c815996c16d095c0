"""The output sockets of a route's job as DICOM objects in the study, per interface: the challenges' (the
writers of the project's detectors: tb-caverns boxes -> an SR, object-cxr likelihood and points -> an SR with SCOORD
points, ribfrac instance image and detections -> a SEG) and "generic" ones declared in the route (`input` socket,
`outputs` with their kinds: a label image (`Segmentation`) -> a SEG, `Float` -> an SR measurement, `String` -> an SR
text item, `Multiple points` -> SR SCOORD points, each on the image of the series nearest to it: image_grid.py).
Every value is checked against the image before anything is written: a container's output is hostile like any input.
Each output carrying probabilities is reported at the route's operating point for it (`route_points`; a challenge
interface's default: the project's algorithm's model card, registry.Algorithm.operating_points): findings under it are
not findings (kept, with the route's keep_below_threshold, marked below threshold), and the study's result says
present or absent at it with its probability and the threshold applied (dicom.sr, dicom.seg).
`check_image_route` refuses, at `--check`, an interface or output kind without a mapping, and an operating point
for an output without probabilities.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Protocol

from ..dicom.detectors import (FOREIGN_OBJECT, PRIVATE_SCHEME, RIB_FRACTURE, RIB_FRACTURE_TYPES, TB_CAVERN,
                               rib_fracture_results)
from ..dicom.seg import SegmentFinding, label_segmentation
from ..dicom.series import DicomSeries
from ..dicom.sr import BoxFinding, FindingKind, OperatingPoint, PointFinding, box_report, point_report, value_report
from ..errors import InputError
from ..sockets import (CHEST_X_RAY, CT_IMAGE, OBJECT_CXR_INTERFACE, RIB_FRACTURE_DETECTIONS, RIB_FRACTURE_INSTANCES,
                       RIBFRAC_INTERFACE, TB_CAVERNS_INTERFACE, Interface, Socket)
from ..jobs import value_rules
from ..jobs.image_grid import ImageGrid
from .image_grid import check_slice_order

# the modalities of the series that become each image input socket
SOCKET_MODALITIES = {"ct-image": ("CT",), "chest-x-ray": ("CR", "DX")}
VOLUME_SOCKETS = ("ct-image",)


class MappedRoute(Protocol):
    """What the mapping reads of a route (config.Route is one; declared here so that config, which checks every route
    with check_image_route, is not imported back)."""

    @property
    def interface(self) -> str: ...

    @property
    def input_socket(self) -> str | None: ...

    @property
    def outputs(self) -> tuple[tuple[str, str], ...]: ...

    @property
    def model(self) -> Path | None: ...

    @property
    def operating_points(self) -> tuple[tuple[str, float], ...]: ...

    @property
    def keep_below_threshold(self) -> bool: ...


Points = dict[str, OperatingPoint]  # an output's operating point, by the output socket's slug


def route_points(route: MappedRoute) -> Points:
    """The route's operating point of each output it names one for."""
    return {slug: OperatingPoint(threshold, route.keep_below_threshold) for slug, threshold in route.operating_points}


@dataclass(frozen=True)
class RouteInterface:
    """What a route reads and writes: the interface, and the writer of its DICOM objects from the output socket
    values (by slug), the source series and the grid of the image the job was given."""

    interface: Interface
    # (output values by slug, the series, the job's image grid, the finding kind, the operating points: None, the
    # interface's writer's own defaults)
    write: Callable[[dict[str, object], DicomSeries, ImageGrid, FindingKind, Points | None], list]
    probability_outputs: tuple[str, ...]  # the output sockets whose findings carry probabilities


def cavern_results(values: dict[str, object], series: DicomSeries, grid: ImageGrid, kind: FindingKind,
                   points: Points | None = None) -> list:
    """tb-cavern-boxes -> one SR (TID 1500) with the study's call and a box per cavern at the operating point."""
    findings = [BoxFinding(corners, probability)
                for corners, probability in value_rules.cavern_boxes(values["tb-cavern-boxes"], grid.shape)]
    return [box_report(series, findings, kind, (points or {}).get("tb-cavern-boxes"))]


def foreign_object_results(values: dict[str, object], series: DicomSeries, grid: ImageGrid,
                           kind: FindingKind, points: Points | None = None) -> list:
    """foreign-object-likelihood and foreign-objects -> one SR with the likelihood (the image called at its operating
    point) and a SCOORD point per object at the points' (the points in world mm of the radiograph the job was given,
    as every Multiple points output: `world_points`)."""
    likelihood = value_rules.number_in(values["foreign-object-likelihood"], "foreign-object-likelihood", 0, 1)
    found = world_points(values["foreign-objects"], "foreign-objects", series, grid, False, likelihood)
    points = points or {}
    return [point_report(series, likelihood, found, kind, points.get("foreign-object-likelihood"),
                         points.get("foreign-objects"))]


GENERIC = "generic"
# generic output kinds with a DICOM mapping -> (super kind, relative path of slug)
GENERIC_KINDS = {"Float": ("Value", "{}.json"), "String": ("Value", "{}.json"),
                 "Multiple points": ("File", "{}.json"), "Segmentation": ("Image", "images/{}")}
INPUT_SOCKETS = {CT_IMAGE.slug: CT_IMAGE, CHEST_X_RAY.slug: CHEST_X_RAY}
SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
MAX_TEXT = 1024  # characters of a String output kept in the SR
MAX_LABELS = 255
MAX_LABEL_VALUE = 65535  # label values index a lookup table when the SEG is written
GENERIC_FINDING = FindingKind(finding_type=("ai-result", PRIVATE_SCHEME, "AI result"),
                              finding_site=("38266002", "SCT", "Entire body"), algorithm_name="",
                              algorithm_version="", series_description="AI results")


def generic_interface(route: MappedRoute) -> Interface:
    """The interface a generic route declares: its input socket and its output sockets by kind."""
    outputs = tuple(Socket(slug, kind, GENERIC_KINDS[kind][0], GENERIC_KINDS[kind][1].format(slug))
                    for slug, kind in route.outputs)
    return Interface((INPUT_SOCKETS[route.input_socket],), outputs, ())


def _concept(slug: str) -> tuple[str, str, str]:
    return slug[:16], PRIVATE_SCHEME, slug


def label_map(path: Path, series: DicomSeries, slug: str):
    """An output label image as an int32 array (z, y, x) on the series' grid, at most MAX_LABELS labels; InputError
    otherwise."""
    import numpy as np
    import SimpleITK as sitk

    labels = sitk.GetArrayFromImage(sitk.ReadImage(str(path)))
    expected = (len(series.headers), int(series.first.Rows), int(series.first.Columns))
    if labels.size != int(np.prod(expected)) or not np.issubdtype(labels.dtype, np.integer) or labels.min() < 0:
        raise InputError(f"{slug}: expected non-negative integer labels on the input's "
                         f"{'x'.join(map(str, expected[::-1]))} grid")
    if len(np.unique(labels)) > MAX_LABELS + 1 or labels.max() > MAX_LABEL_VALUE:
        raise InputError(f"{slug}: more than {MAX_LABELS} labels, or a label above {MAX_LABEL_VALUE}")
    return labels.reshape(expected).astype(np.int32)


def rib_fracture_route_results(values: dict[str, object], series: DicomSeries, grid: ImageGrid,
                               kind: FindingKind, points: Points | None = None) -> list:
    """rib-fracture-instances and rib-fracture-detections -> the SEG of the fractures at the operating point (each
    its RibFrac type and confidence), or an SR saying there is none, as the RibFrac detector writes them."""
    import SimpleITK as sitk

    import numpy as np

    labels = label_map(values[RIB_FRACTURE_INSTANCES.slug], series, RIB_FRACTURE_INSTANCES.slug)
    present = set(np.unique(labels).tolist())
    detections = [SimpleNamespace(label_id=label, label_code=code, confidence=confidence)
                  for label, code, confidence in value_rules.rib_fracture_detections(
                      values[RIB_FRACTURE_DETECTIONS.slug], present, RIB_FRACTURE_TYPES)]
    return rib_fracture_results(series, SimpleNamespace(instances=sitk.GetImageFromArray(labels),
                                                        detections=detections), kind,
                                (points or {}).get(RIB_FRACTURE_DETECTIONS.slug))


def world_points(value: object, slug: str, series: DicomSeries, grid: ImageGrid, volume: bool,
                 default_probability: float = 1.0) -> list[PointFinding]:
    """A `Multiple points` output checked by value_rules.world_points, each point on the series' image nearest to it
    (a volume's slices checked to be the series' own first)."""
    if volume and isinstance(value, dict) and value.get("points"):
        check_slice_order(series, grid, slug)
    return [PointFinding(point.i, point.j, point.probability, point.k)
            for point in value_rules.world_points(value, slug, grid, volume, default_probability)]


def generic_results(route: MappedRoute, values: dict[str, object], series: DicomSeries, grid: ImageGrid,
                    kind: FindingKind, operating: Points | None = None) -> list:
    """A generic route's outputs: one SEG per label image with labels, one SR with the numbers, texts and points (a
    Multiple points output with an operating point: those at or above it, then those kept below it, marked)."""
    import numpy as np

    numbers, texts, points, results = [], [], [], []
    for slug, output_kind in route.outputs:
        value = values[slug]
        if output_kind == "Float":
            numbers.append((_concept(slug), value_rules.number_in(value, slug, -1e12, 1e12)))
        elif output_kind == "String":
            texts.append((_concept(slug), "".join(c if c.isprintable() else "?" for c in value)[:MAX_TEXT]))
        elif output_kind == "Multiple points":
            found = world_points(value, slug, series, grid, route.input_socket in VOLUME_SOCKETS)
            points += [(_concept(slug), point) for point in
                       (operating[slug].reported(found) if operating and slug in operating else found)]
        else:  # Segmentation: a label image on the input's grid
            labels = label_map(value, series, slug)
            present = [int(v) for v in np.unique(labels) if v > 0]
            if present:
                segments = [SegmentFinding(v, _concept(slug), 1.0) for v in present]
                results.append(label_segmentation(series, labels, segments, kind))
    if numbers or texts or points or not results:
        results.append(value_report(series, numbers, texts, points, kind))
    return results


CHALLENGE_INTERFACES = {
    "tb-caverns": (RouteInterface(TB_CAVERNS_INTERFACE, cavern_results, ("tb-cavern-boxes",)), TB_CAVERN),
    "object-cxr": (RouteInterface(OBJECT_CXR_INTERFACE, foreign_object_results,
                                  ("foreign-object-likelihood", "foreign-objects")), FOREIGN_OBJECT),
    "ribfrac": (RouteInterface(RIBFRAC_INTERFACE, rib_fracture_route_results, (RIB_FRACTURE_DETECTIONS.slug,)),
                RIB_FRACTURE),
}


def probability_outputs(route: MappedRoute) -> tuple[str, ...]:
    """The route's output sockets whose findings carry probabilities (those an operating point applies to)."""
    if route.interface == GENERIC:
        return tuple(slug for slug, kind in route.outputs if kind == "Multiple points")
    return CHALLENGE_INTERFACES[route.interface][0].probability_outputs


def check_image_route(route: MappedRoute, where: str) -> None:
    """`--check`: the route's interface is known, its input socket has a series conversion and every output socket
    a DICOM mapping; one InputError line otherwise."""
    if route.interface == GENERIC:
        if route.input_socket not in INPUT_SOCKETS:
            raise InputError(f"{where}: input = {route.input_socket!r}: expected one of {', '.join(INPUT_SOCKETS)}")
        for slug, kind in route.outputs:
            if not SLUG.fullmatch(slug):
                raise InputError(f"{where}: output slug {slug!r}: expected lower-case words joined by '-'")
            if kind not in GENERIC_KINDS:
                raise InputError(f"{where}: output {slug!r} of kind {kind!r}: no DICOM mapping for it on a "
                                 f"{route.input_socket} (mapped: {', '.join(GENERIC_KINDS)})")
        if len({slug for slug, _ in route.outputs}) != len(route.outputs):
            raise InputError(f"{where}: output slugs must differ")
    elif route.interface not in CHALLENGE_INTERFACES:
        raise InputError(f"{where}: interface = {route.interface!r}: no DICOM mapping for its output sockets "
                         f"(mapped: {', '.join(CHALLENGE_INTERFACES)}, or generic)")
    outputs = probability_outputs(route)
    for slug, threshold in route.operating_points:
        if slug not in outputs:
            raise InputError(f"{where}: operating_points: {slug!r} is no output with probabilities of this route "
                             f"(those: {', '.join(outputs) or 'none'})")
        if not 0 <= threshold <= 1:
            raise InputError(f"{where}: operating_points: {slug} = {threshold}: expected a probability, 0 to 1")
    if route.model is not None and not route.model.exists():
        raise InputError(f"{where}: model = '{route.model}': no such file or folder")
