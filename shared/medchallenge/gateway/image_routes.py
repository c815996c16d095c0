"""How the gateway runs a route's algorithm, the one way: the study's series as the interface's input socket
(converted by panimg, as grand-challenge converts an upload), one job by the project's job runner
(medchallenge.jobs.run_job: the route's image with no network, memory and time limits, the GPU when configured; or
its command as a local process), the output sockets as DICOM objects in the study (output_dicom.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import queue
import shutil
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ..dicom.detectors import FOREIGN_OBJECT
from ..dicom.series import DicomSeries, dicom_files, read_headers, select_study_series
from ..dicom.sr import FindingKind
from ..errors import InputError
from ..io import write_dicom_atomic, write_json_atomic
from ..jobs import JobLimits, JobResult, run_job
from ..jobs.conditions import DEFAULT_DISK_GB
from ..jobs.docker_run import DockerImage, host_mounts, host_path
from ..jobs.launch import Launcher
from ..jobs.process_run import LocalProcess
from ..jobs.runner import TIME_LIMIT
from ..jobs.uploads import convert
from ..jobs.values import SocketValue
from ..limits import load_json
from ..sockets import Interface
from .config import Route
from ..jobs.image_grid import ImageGrid, read_image_grid
from .image_grid import check_slice_order
from .output_dicom import (CHALLENGE_INTERFACES, GENERIC, GENERIC_FINDING, SOCKET_MODALITIES, VOLUME_SOCKETS,
                           generic_interface, generic_results, route_points)

RESULT_FOLDER = "dicom"
JOB_FOLDER = "job"
CONTAINER_PREFIX = "medchallenge-gateway-job"


def _socket_value(value: SocketValue) -> object:
    """The JSON of an output socket value (a Value socket's value, a File socket's bytes), or an image socket's
    stored file."""
    if value.image_file is not None:
        return value.image_file
    if value.content is None:
        return value.value
    try:
        return load_json(value.content.decode("utf-8"), value.socket.slug)
    except (ValueError, UnicodeDecodeError):
        raise InputError(f"{value.socket.slug}: not valid JSON") from None


def note_line(error: str, exit_code: int | None) -> str:
    """A failed job's error line for the gateway's error.txt and log, without the container's own words (its stderr
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


def route_launcher(route: Route, gpu_devices: Sequence[str] | None = None) -> Launcher:
    """What starts the route's job: its Docker image (without `docker diff`: which files a job wrote outside its
    folders is pre-flight's note, not the gateway's; on `gpu_devices` where given), or its command as a local
    process."""
    if route.image is not None:
        return DockerImage(route.image, name_prefix=CONTAINER_PREFIX, list_writes=False, gpu_devices=gpu_devices)
    return LocalProcess(route.command)


_gpu_pools: dict[tuple[str, tuple[str, ...]], queue.SimpleQueue] = {}
_gpu_pools_lock = threading.Lock()


@contextlib.contextmanager
def job_gpu(route: Route) -> Iterator[tuple[str, ...] | None]:
    """The GPU a job of the route takes, for as long as it runs: one of its `gpu_devices` that no other job of the
    route in this process holds (the route runs at most one job per GPU, so one is free), or None where the route
    names none (the engine's choice) or runs on the CPU."""
    if route.gpu == "off" or not route.gpu_devices:
        yield None
        return
    with _gpu_pools_lock:
        pool = _gpu_pools.get((route.name, route.gpu_devices))
        if pool is None:
            pool = _gpu_pools[(route.name, route.gpu_devices)] = queue.SimpleQueue()
            for device in route.gpu_devices:
                pool.put(device)
    device = pool.get()
    try:
        yield (device,)
    finally:
        pool.put(device)


def job_pk(route: Route, study: Path) -> str:
    """The job's pk, the same for a study at every run: derived from where the engine sees the study's folder (for
    an image, its host path), it names the job's container, so that a container left by a runner killed during the
    job is removed when the study runs again."""
    where = host_path(study, host_mounts()) if route.image is not None else study.resolve()
    return str(uuid.uuid5(uuid.NAMESPACE_URL, str(where)))


@dataclasses.dataclass(frozen=True)
class PreparedJob:
    """A study made ready for its route's job: the job's input (the converted series) and what turns the job's
    outputs into the study's DICOM objects (the chosen series, its image grid, the interface's writer)."""

    route: Route
    interface: Interface
    kind: FindingKind
    write: Callable
    series: DicomSeries
    grid: ImageGrid
    input_value: SocketValue


def prepare_job(route: Route, study: Path, work: Path) -> PreparedJob:
    """The study's series for the route's input socket, converted by panimg under `work` (upload/, converted/)."""
    if route.interface == GENERIC:
        interface, kind = generic_interface(route), GENERIC_FINDING
        if route.input_socket not in VOLUME_SOCKETS:
            kind = dataclasses.replace(kind, procedure=FOREIGN_OBJECT.procedure)  # a radiograph
        write = functools.partial(generic_results, route)
    else:
        route_interface, kind = CHALLENGE_INTERFACES[route.interface]
        interface, write = route_interface.interface, route_interface.write
    input_socket = interface.inputs[0]
    series = study_upload(study, input_socket.slug, work / "upload")
    images = convert(work / "upload", work / "converted", None, f"study {study.name}")
    if len(images) != 1:
        raise InputError(f"detector {route.name}: panimg made {len(images)} images of the chosen series")
    image = images[0]
    shape = tuple(int(image.metadata[key]) for key in ("width", "height", "depth") if image.metadata.get(key))
    grid = read_image_grid(image.file, shape)
    if input_socket.slug in VOLUME_SOCKETS:  # results on slice k must land on the series' slice k
        check_slice_order(series, grid, f"detector {route.name}: study {study.name}")
    return PreparedJob(route, interface, kind, write, series, grid, image.value(1, input_socket))


def job_datasets(prepared: PreparedJob, result: JobResult, record: Path) -> list:
    """The DICOM objects of a job's outputs, its record (`record`: result.json) written first; InputError with the
    job's error line for a failed job, subprocess.TimeoutExpired for one over the route's time limit."""
    route = prepared.route
    write_json_atomic(record, result.to_json())
    if result.status != "succeeded":
        if result.error.startswith(TIME_LIMIT):  # the gateway's time-out note, as for its other detectors
            raise subprocess.TimeoutExpired(route.algorithm, route.timeout_seconds)
        raise InputError(f"detector {route.name} failed: {note_line(result.error, result.exit_code)}")
    values = {value.socket.slug: _socket_value(value) for value in result.output_values}
    named = dataclasses.replace(prepared.kind, algorithm_name=route.name[:64], algorithm_version=route.algorithm[-64:])
    try:
        return prepared.write(values, prepared.series, prepared.grid, named, route_points(route))
    except InputError as exc:
        raise InputError(f"detector {route.name}: output {exc}") from None


def write_results(study: Path, datasets: list) -> None:
    """The job's DICOM objects into the study's output/dicom/."""
    for dataset in datasets:
        write_dicom_atomic(study / "output" / RESULT_FOLDER / f"{dataset.SOPInstanceUID}.dcm", dataset)


def run_image_route(route: Route, study: Path, disk_gb: float = DEFAULT_DISK_GB) -> None:
    """The route's algorithm on the study's input/ into output/dicom/: InputError with the job's error line when the
    job fails, runs out of memory or writes more than `disk_gb` (the gateway's `work_quota_mib`),
    subprocess.TimeoutExpired when it runs over the route's time limit."""
    work = study / JOB_FOLDER
    shutil.rmtree(work, ignore_errors=True)
    try:
        prepared = prepare_job(route, study, work)
        with job_gpu(route) as devices:
            result = run_job(route_launcher(route, devices), [prepared.input_value], list(prepared.interface.outputs),
                             work / "run", model=route.model,
                             limits=JobLimits(memory_gb=route.memory_gb, time_limit_s=route.timeout_seconds,
                                              disk_gb=disk_gb),
                             gpu=route.gpu, pk=job_pk(route, study))
        datasets = job_datasets(prepared, result, work / "result.json")
    finally:  # the job's copies of the images, the model and the outputs go; its record (result.json) stays
        for name in ("upload", "converted", "run"):
            shutil.rmtree(work / name, ignore_errors=True)
    write_results(study, datasets)
