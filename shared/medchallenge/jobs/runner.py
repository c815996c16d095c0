"""run_job: one grand-challenge algorithm job, from socket values in to validated output sockets out.

The one way the project runs a job: the emulator and pre-flight per case, the hospital gateway per study. A job's
folder holds what the container saw (`input/` with inputs.json, `model/`, `output/`, `tmp/`) and what GC stores
(`stored/`: output images re-imported by panimg). A container's input images are its stored images shared, not
copied (a hard link, else a reflink: values.share_file), as it sees /input read-only; inputs.json is the job's own."""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..io import write_text_atomic
from ..sockets import Socket
from .conditions import JobLimits
from .disk_quota import size_text
from .docker_run import DockerImage
from .errors import EmulationError
from .launch import Execution, JobFolders, Launcher
from .model_tarball import extract_model
from .outputs import OutputResult, read_outputs, undeclared_files
from .values import GC_URL, SocketValue, serialize_values

log = logging.getLogger("medchallenge.jobs")

GpuRequest = Literal["auto", "on", "off"]
TAIL_LINES = 20  # log lines kept in a result per stream
MAX_LINE = 300  # characters of a container's line quoted in an error
MEMORY_KILLED = "The container was killed as it exceeded its memory limit"
TIME_LIMIT = "Time limit exceeded"
FILE_TOO_LARGE = "no file the job writes may be larger than its disk limit of {disk} (RLIMIT_FSIZE)"
SIGXFSZ_STATUS = 128 + signal.SIGXFSZ  # killed for writing past RLIMIT_FSIZE (a program that does not ignore it)
# What a failed job's last stderr line says about its cause, as hints after GC's error.
HINTS = (
    (("Temporary failure in name resolution", "Name or service not known", "Network is unreachable",
      "[Errno -3]", "[Errno -2]", "[Errno 101]", "Failed to establish a new connection", "NewConnectionError",
      "Could not resolve host"),
     "the job tried to reach the network; grand-challenge jobs have none: bake every file into the image or the "
     "model tarball"),
    # before the container's memory: a GPU's memory is not under the container's limit or RLIMIT_DATA
    (("CUDA out of memory", "CUDA error: out of memory", "cudaErrorMemoryAllocation", "CUBLAS_STATUS_ALLOC_FAILED",
      "CUDNN_STATUS_ALLOC_FAILED", "OutOfMemoryError: CUDA"),
     "the job ran out of GPU memory, which the container's memory limit does not cover: use less of it (smaller "
     "batches or tiles, half precision)"),
    (("MemoryError", "Cannot allocate memory", "std::bad_alloc", "Failed to allocate memory", "out of memory"),
     "the job ran out of memory: it may use {data_gib:g} GiB of data (RLIMIT_DATA = memory limit less 1 GiB)"),
    (("Read-only file system", "PermissionError", "Permission denied"),
     "the job wrote where it may not: only /output, /tmp and /opt/ml/model are writable (and what the image's user "
     "owns; in a phase /opt/ml/model is read-only, shared by the model's jobs)"),
    (("File too large", "[Errno 27]"), FILE_TOO_LARGE),
)


def printable(text: str, limit: int = MAX_LINE, indent: bool = False) -> str:
    """A container's text made safe to quote in one line of a report: control characters replaced, cut to `limit`
    (leading spaces kept with `indent`, for log lines)."""
    cleaned = "".join(c if c.isprintable() else "?" for c in (text.rstrip() if indent else text.strip()))
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def _duration(seconds: float) -> str:
    """Django's duration_string, as DRF's DurationField writes exec_duration: `[D ]HH:MM:SS[.ffffff]`."""
    micro = round(seconds * 1e6)
    days, rest = divmod(micro, 86_400 * 10**6)
    whole, micro = divmod(rest, 10**6)
    text = f"{whole // 3600:02d}:{whole // 60 % 60:02d}:{whole % 60:02d}"
    return (f"{days} " if days else "") + text + (f".{micro:06d}" if micro else "")


@dataclass
class JobResult:
    """One job: its status, GC's error line when it failed, what it cost, and every declared output socket. Its GPU
    seconds are the seconds it held a GPU: wall seconds x the GPUs given to it (as a cluster bills an allocated GPU,
    used or idle); its CPU seconds the CPU time of all its processes (user and system)."""

    pk: str
    status: Literal["succeeded", "failed"]
    error: str | None
    exit_code: int | None
    wall_seconds: float
    peak_memory_bytes: int | None
    gpu_passed: bool
    used_gpu: bool | None
    inputs: list[SocketValue]
    outputs: list[OutputResult]
    limits: JobLimits
    cpu_seconds: float | None = None  # None: not measurable here
    gpu_seconds: float = 0.0
    stdout_tail: list[str] = field(default_factory=list)
    stderr_tail: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    folder: Path | None = None

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    @property
    def output_values(self) -> list[SocketValue]:
        return [o.value for o in self.outputs if o.value is not None]

    def serialize(self) -> dict:
        """GC's JobSerializer (an entry of the evaluation's predictions.json)."""
        return {"pk": self.pk, "url": f"{GC_URL}/algorithms/emulated/jobs/{self.pk}/",
                "api_url": f"{GC_URL}/api/v1/algorithms/jobs/{self.pk}/", "algorithm_image": "emulated",
                "inputs": serialize_values(self.inputs), "outputs": serialize_values(self.output_values),
                "status": "Succeeded" if self.succeeded else "Failed", "hanging_protocol": None,
                "optional_hanging_protocols": [], "view_content": {}, "exec_duration": _duration(self.wall_seconds),
                "invoke_duration": None}

    def to_json(self) -> dict:
        """The job as pre-flight reports it (no container text beyond the cleaned log tails and error)."""
        return {"pk": self.pk, "status": self.status, "error": self.error, "exit_code": self.exit_code,
                "wall_seconds": round(self.wall_seconds, 3), "peak_memory_bytes": self.peak_memory_bytes,
                "cpu_seconds": None if self.cpu_seconds is None else round(self.cpu_seconds, 3),
                "gpu_seconds": round(self.gpu_seconds, 3),
                "gpu_passed": self.gpu_passed, "used_gpu": self.used_gpu,
                "inputs": [{"socket": v.socket.slug, "image_name": v.image_name} for v in self.inputs],
                "outputs": [o.to_json() for o in self.outputs], "notes": self.notes,
                "stdout_tail": self.stdout_tail, "stderr_tail": self.stderr_tail}


def resolve_gpu(request: GpuRequest | bool, launcher: Launcher) -> bool:
    """Whether the job gets a GPU: `on` needs one, `auto` takes one when there is one, `off` never."""
    if isinstance(request, bool):
        request = "on" if request else "off"
    if request == "off":
        return False
    available = launcher.gpu_available()
    if request == "on" and not available:
        raise EmulationError("--gpu on: no GPU that Docker can give a container here (nvidia-smi and the NVIDIA "
                             "container runtime are needed)")
    return available


def _open_dir(path: Path, mode: int = 0o777) -> Path:
    """Create `path` writable by the container user (any uid) whatever uid runs the runner."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, mode)
    return path


def _close_dirs(folders: JobFolders) -> None:
    """After the job: its folders no longer writable by any uid but their owner (what the container made inside
    them is its own; they are reached only through these)."""
    for path in (*(() if folders.input_shared else (folders.input,)), folders.output,
                 *(() if folders.model_readonly else (folders.model,)), folders.tmp):
        try:
            os.chmod(path, 0o755)
        except OSError:  # gone
            pass


def _readable(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)


def _failure(execution: Execution, limits: JobLimits, component: str = "algorithm") -> str | None:
    """GC's error for a job whose process failed, with a hint where its last stderr line shows the cause;
    `component` names what ran (an algorithm, or an evaluation)."""
    if execution.start_error is not None:
        return (f"The container could not start: {printable(execution.start_error)} (grand-challenge runs the image's "
                "ENTRYPOINT and CMD as they are: the program they name must be in the image)")
    if execution.disk_error:
        return execution.disk_error
    if execution.timed_out:
        return f"{TIME_LIMIT} (the job ran longer than {limits.time_limit_s:g} s)"
    if execution.oom_killed or (execution.exit_code == 137 and not execution.stderr_tail):
        return f"{MEMORY_KILLED} ({limits.memory_gb:g} GB)"
    if execution.exit_code == 0:
        return None
    last = next((printable(line) for line in reversed(execution.stderr_tail) if line.strip()), "")
    error = (f"The {component} exited with status {execution.exit_code}: {last}" if last else
             f"The {component} exited with status {execution.exit_code} and wrote nothing to stderr")
    hints = [hint for patterns, hint in HINTS
             if any(p in line for line in execution.stderr_tail[-TAIL_LINES:] for p in patterns)]
    if execution.exit_code == SIGXFSZ_STATUS:
        hints.insert(0, FILE_TOO_LARGE)
    if not hints:
        return error
    return f"{error} ({hints[0].format(data_gib=limits.memory_gb - 1, disk=size_text(limits.disk_bytes))})"


def _outside_note(paths: list[str]) -> str:
    shown = ", ".join(printable(p, 120) for p in paths[:5])
    more = f" and {len(paths) - 5} more" if len(paths) > 5 else ""
    return f"the job wrote {len(paths)} file(s) outside /output and /tmp, which grand-challenge discards: {shown}{more}"


def run_job(container: str | Launcher, inputs: Sequence[SocketValue], outputs: Sequence[Socket], work_dir: Path,
            model: Path | None = None, limits: JobLimits | None = None, gpu: GpuRequest | bool = "auto",
            pks: Iterator[int] | None = None, pk: str | None = None, model_dir: Path | None = None,
            input_dir: Path | None = None, ground_truth: Path | None = None,
            component: str = "algorithm") -> JobResult:
    """Run one job: `container` (a Docker image name, or a Launcher) on `inputs` under grand-challenge's conditions,
    then read and validate the declared `outputs`. A failed job is a result (status "failed", GC's error line), not
    an exception; an EmulationError is raised only for what GC refuses before any job runs (a root image, a bad
    model tarball, --gpu on without a GPU). `work_dir` must be new or empty. `model_dir`: a model already unpacked
    (unpack_model_once), mounted read-only as /opt/ml/model instead of extracting `model` into the job's folder.
    An evaluation: `input_dir` is its input already laid out (emulator.write_evaluation_input), mounted read-only
    as /input as it is (nothing provisioned; `inputs` then only describe it), `ground_truth` a folder mounted
    read-only at /opt/ml/input/data/ground_truth, and `component` "evaluation" names it in its errors."""
    launcher = DockerImage(container) if isinstance(container, str) else container
    work_dir = work_dir.expanduser().absolute()  # the engine runs from the job's folder: no path relative to ours
    limits = limits or JobLimits()
    pks = pks or itertools.count(2_000_001)
    pk = pk or str(uuid.uuid4())
    launcher.check()  # its notes are the image's, for the caller to report once (DockerImage checks once)
    notes = limits.differences_from_gc()
    passed_gpu = resolve_gpu(gpu, launcher)
    if work_dir.exists() and any(work_dir.iterdir()):
        raise EmulationError(f"{work_dir}: the job folder is not empty")
    folders = JobFolders(input_dir.absolute() if input_dir else _open_dir(work_dir / "input", 0o755),
                         _open_dir(work_dir / "output"), model_dir or _open_dir(work_dir / "model"),
                         _open_dir(work_dir / "tmp", 0o1777), model_readonly=model_dir is not None,
                         input_shared=input_dir is not None,
                         ground_truth=ground_truth.absolute() if ground_truth else None)
    shared = getattr(launcher, "input_read_only", False)  # its input files shared with their store, not copied
    try:
        if input_dir is None:
            for value in inputs:
                value.provision(folders.input, share=shared)
            write_text_atomic(folders.input / "inputs.json", json.dumps(serialize_values(inputs)))
            _readable(folders.input)
        if model is not None:
            extract_model(model, folders.model)
        execution = launcher.launch(folders, limits, passed_gpu, pk)
    finally:
        _close_dirs(folders)
    error = _failure(execution, limits, component)
    results: list[OutputResult] = []
    if error is None:
        results = read_outputs(folders.output, tuple(outputs), pks, work_dir / "stored")
        error = next((r.error for r in results if r.error), None)
        dropped = undeclared_files(folders.output, outputs)
        if error and dropped and error.endswith(("was not produced", "is empty")):
            error = f"{error} (/output held instead: {', '.join(printable(p, 120) for p in dropped[:5])})"
        if error and execution.written_outside:
            error = f"{error} ({_outside_note(execution.written_outside)})"
        if dropped:
            notes.append(f"{len(dropped)} undeclared file(s) in /output, dropped as grand-challenge drops them: "
                         + ", ".join(printable(p, 120) for p in dropped[:5]))
    if execution.unenforced:
        notes.append(f"not enforced: {', '.join(execution.unenforced)}")
    if execution.written_outside and (error is None or "outside /output" not in error):
        notes.append(_outside_note(execution.written_outside))
    result = JobResult(pk=pk, status="failed" if error else "succeeded", error=error,
                       exit_code=execution.exit_code, wall_seconds=execution.wall_seconds,
                       peak_memory_bytes=execution.peak_memory_bytes, gpu_passed=passed_gpu,
                       used_gpu=execution.used_gpu, inputs=list(inputs), outputs=results, limits=limits,
                       cpu_seconds=execution.cpu_seconds, gpu_seconds=execution.wall_seconds * execution.gpus,
                       stdout_tail=[printable(x, indent=True) for x in execution.stdout_tail[-TAIL_LINES:]],
                       stderr_tail=[printable(x, indent=True) for x in execution.stderr_tail[-TAIL_LINES:]],
                       notes=notes, folder=work_dir)
    log.info("job %s: %s in %.1f s%s", pk, result.status, result.wall_seconds, f": {error}" if error else "")
    return result
