"""A route to a grand-challenge algorithm image: the study's series as the interface's input socket (converted by
panimg, as grand-challenge converts an upload), one job by the project's job runner (medchallenge.jobs.run_job: no
network, memory and time limits, the GPU when configured), the output sockets as DICOM objects in the study.

Interfaces a route may name (`interface = "..."`): those of the challenges with an algorithm (tb-caverns: boxes ->
an SR with one box per finding; object-cxr: likelihood and points -> an SR with SCOORD points). Their outputs are
read as the challenge's evaluator reads them and checked against the image before anything is written: a container's
output is hostile like any input. An interface whose output socket has no DICOM mapping is refused at `--check`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..dicom.detectors import FOREIGN_OBJECT, TB_CAVERN
from ..dicom.series import DicomSeries, dicom_files, read_headers, select_study_series
from ..dicom.sr import BoxFinding, FindingKind, PointFinding, box_report, point_report
from ..errors import InputError
from ..io import write_dicom_atomic, write_json_atomic
from ..jobs import JobLimits, run_job
from ..jobs.docker_run import DockerImage
from ..jobs.runner import TIME_LIMIT
from ..jobs.uploads import convert
from ..jobs.values import SocketValue
from ..sockets import OBJECT_CXR_INTERFACE, TB_CAVERNS_INTERFACE, Interface
from .config import Route

RESULT_FOLDER = "dicom"
JOB_FOLDER = "job"
CONTAINER_PREFIX = "medchallenge-gateway-job"
MAX_FINDINGS = 100  # boxes or points one result may hold: a container cannot make the gateway write a huge SR
# the modalities of the series that become each image input socket
SOCKET_MODALITIES = {"ct-image": ("CT",), "chest-x-ray": ("CR", "DX")}
VOLUME_SOCKETS = ("ct-image",)


@dataclass(frozen=True)
class RouteInterface:
    """What an image route reads and writes: the interface, and the writer of its DICOM objects from the output
    socket values (by slug), the source series and the image's shape (x, y[, z])."""

    interface: Interface
    write: Callable[[dict[str, object], DicomSeries, tuple[int, ...], FindingKind], list]


def _number(value: object, what: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high:
        raise InputError(f"{what}: expected a number from {low:g} to {high:g}")
    return float(value)


def _limited(entries: object, what: str) -> list:
    if not isinstance(entries, list):
        raise InputError(f"{what}: expected a list")
    if len(entries) > MAX_FINDINGS:
        raise InputError(f"{what}: {len(entries)} entries, more than the {MAX_FINDINGS} a result may hold")
    return entries


def cavern_results(values: dict[str, object], series: DicomSeries, shape: tuple[int, ...], kind: FindingKind) -> list:
    """tb-cavern-boxes -> one SR (TID 1500) with a box per cavern (none: the SR says so)."""
    document = values["tb-cavern-boxes"]
    boxes = _limited(document.get("boxes") if isinstance(document, dict) else None, "tb-cavern-boxes: boxes")
    findings = []
    for index, box in enumerate(boxes):
        where = f"tb-cavern-boxes: boxes[{index}]"
        corners = box.get("voxel_bbox") if isinstance(box, dict) else None
        if not (isinstance(corners, list) and len(corners) == 6 and all(type(v) is int for v in corners)):
            raise InputError(f"{where}: voxel_bbox must be a list of 6 integers")
        if not all(0 <= corners[a] <= corners[a + 3] < shape[a] for a in range(3)):
            raise InputError(f"{where}: voxel_bbox outside the {'x'.join(map(str, shape))} image or unordered")
        findings.append(BoxFinding(tuple(corners), _number(box.get("probability", 1.0), f"{where}: probability", 0, 1)))
    return [box_report(series, findings, kind)]


def foreign_object_results(values: dict[str, object], series: DicomSeries, shape: tuple[int, ...],
                           kind: FindingKind) -> list:
    """foreign-object-likelihood and foreign-objects -> one SR with the likelihood and a SCOORD point per object."""
    likelihood = _number(values["foreign-object-likelihood"], "foreign-object-likelihood", 0, 1)
    document = values["foreign-objects"]
    points = []
    for index, point in enumerate(_limited(document.get("points") if isinstance(document, dict) else None,
                                           "foreign-objects: points")):
        where = f"foreign-objects: points[{index}]"
        xyz = point.get("point") if isinstance(point, dict) else None
        if not (isinstance(xyz, list) and len(xyz) in (2, 3)):
            raise InputError(f"{where}: point must be [x, y] or [x, y, z]")
        x = _number(xyz[0], f"{where}: x", 0, shape[0] - 1)
        y = _number(xyz[1], f"{where}: y", 0, shape[1] - 1)
        points.append(PointFinding(x, y, _number(point.get("probability", likelihood), f"{where}: probability", 0, 1)))
    return [point_report(series, likelihood, points, kind)]


CHALLENGE_INTERFACES = {
    "tb-caverns": (RouteInterface(TB_CAVERNS_INTERFACE, cavern_results), TB_CAVERN),
    "object-cxr": (RouteInterface(OBJECT_CXR_INTERFACE, foreign_object_results), FOREIGN_OBJECT),
}


def check_image_route(route: Route, where: str) -> None:
    """`--check`: the route's interface is known, its input socket has a series conversion and every output socket
    a DICOM mapping; one InputError line otherwise."""
    if route.interface not in CHALLENGE_INTERFACES:
        raise InputError(f"{where}: interface = {route.interface!r}: no DICOM mapping for its output sockets "
                         f"(mapped: {', '.join(CHALLENGE_INTERFACES)})")
    if route.model is not None and not route.model.exists():
        raise InputError(f"{where}: model = '{route.model}': no such file or folder")


def _socket_value(value: SocketValue) -> object:
    """The JSON of an output socket value (a Value socket's value, a File socket's bytes)."""
    if value.content is None:
        return value.value
    try:
        return json.loads(value.content)
    except (ValueError, UnicodeDecodeError):
        raise InputError(f"{value.socket.slug}: not valid JSON") from None


def note_line(error: str, exit_code: int | None) -> str:
    """A failed job's error line for the PACS note and error.txt, without the container's own words (its stderr
    is hostile text; it stays in the job's result.json)."""
    if error.startswith("The algorithm exited with status"):
        return f"The algorithm exited with status {exit_code} (its last log lines: {JOB_FOLDER}/result.json)"
    return error


def study_upload(study: Path, socket_slug: str, upload: Path) -> DicomSeries:
    """The study's series for the input socket, its files copied to `upload` for panimg; the series is what the
    results refer to. A volume socket takes the volume series of its modality with the most slices (checked: evenly
    spaced, no gaps), a radiograph socket the first image of its modality (SR points refer to that one image)."""
    series = read_headers(dicom_files(study / "input"))
    modalities = SOCKET_MODALITIES[socket_slug]
    if socket_slug in VOLUME_SOCKETS:
        chosen, _ = select_study_series(series, modalities)[0]
    else:
        images = [s for s in series if s.modality in modalities]
        if not images:
            found = ", ".join(sorted({s.modality or "no modality" for s in series}))
            raise InputError(f"study {study.name}: no {'/'.join(modalities)} image (found {found})")
        first = images[0]
        chosen = DicomSeries(first.study_uid, first.series_uid, first.modality, first.body_part, first.files[:1],
                             first.headers[:1])
    upload.mkdir(parents=True)
    for index, path in enumerate(chosen.files):
        shutil.copyfile(path, upload / f"{index:05d}.dcm")
    return chosen


def run_image_route(route: Route, study: Path) -> None:
    """The route's image on the study's input/ into output/dicom/: InputError with the job's error line when the job
    fails or runs out of memory, subprocess.TimeoutExpired when it runs over the route's time limit."""
    route_interface, kind = CHALLENGE_INTERFACES[route.interface]
    interface = route_interface.interface
    socket = interface.inputs[0]
    work = study / JOB_FOLDER
    shutil.rmtree(work, ignore_errors=True)
    series = study_upload(study, socket.slug, work / "upload")
    images = convert(work / "upload", work / "converted", None, f"study {study.name}")
    if len(images) != 1:
        raise InputError(f"detector {route.name}: panimg made {len(images)} images of the chosen series")
    image = images[0]
    result = run_job(DockerImage(route.image, name_prefix=CONTAINER_PREFIX),
                     [image.value(1, socket)], list(interface.outputs), work / "run", model=route.model,
                     limits=JobLimits(memory_gb=route.memory_gb, time_limit_s=route.timeout_seconds),
                     gpu=route.gpu)
    write_json_atomic(work / "result.json", result.to_json())
    if result.status != "succeeded":
        if result.error.startswith(TIME_LIMIT):  # the gateway's time-out note, as for its other detectors
            raise subprocess.TimeoutExpired(route.image, route.timeout_seconds)
        raise InputError(f"detector {route.name} failed: {note_line(result.error, result.exit_code)}")
    values = {value.socket.slug: _socket_value(value) for value in result.output_values}
    shape = tuple(int(image.metadata[key]) for key in ("width", "height", "depth") if image.metadata.get(key))
    named = dataclasses.replace(kind, algorithm_name=route.name[:64], algorithm_version=route.image[-64:])
    try:
        datasets = route_interface.write(values, series, shape, named)
    except InputError as exc:
        raise InputError(f"detector {route.name}: output {exc}") from None
    for dataset in datasets:
        write_dicom_atomic(study / "output" / RESULT_FOLDER / f"{dataset.SOPInstanceUID}.dcm", dataset)
    shutil.rmtree(work / "upload")
