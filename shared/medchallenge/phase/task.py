"""One task of a phase: `python -m medchallenge.phase.task OUT/tasks/<job_id>.json` runs that job with the one job
runner (medchallenge.jobs.run_job: grand-challenge's conditions, limits, output checks and error wording, as
pre-flight) and writes OUT/jobs/<job_id>/result.json, then state.json.

Exit status 0: the job is over, succeeded or failed on its own (the team's result, final). Exit status 3: it could
not run for a cause outside the job (the engine could not start or lost the container, the node has no GPU or lacks
the image): its state says "interrupted", cause "engine", and the error; the next `medchallenge phase run` runs it
again. A task stopped by a signal (SIGTERM: Slurm's scancel or time limit, Ctrl-C) removes its container and writes
no state. Exit status 4: another task holds the job (its lease, phase.leases: an earlier array's task still running
it); nothing is run or written."""

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..io import write_json_atomic
from ..jobs import DockerImage, EmulationError, Execution, JobFolders, JobLimits, JobResult, SocketValue, run_job
from ..jobs.docker_run import ENGINES
from ..jobs.runner import MEMORY_KILLED, TIME_LIMIT
from ..logs import setup_logging
from ..sockets import Socket
from .archive import VerifiedImage
from .images import EngineError, ensure_loaded, local_digest
from .layout import OWNER_ONLY_UMASK, PhaseLayout
from .leases import job_lease
from .local import SLOT_FD
from .records import failed_before_running, write_result, write_state

log = logging.getLogger("medchallenge.phase")
OUTSIDE = 3  # exit status of a task that could not run for a cause outside the job
HELD = 4  # exit status of a task whose job another task holds (phase.leases): not run, nothing written
NAME_PREFIX = "medchallenge-phase"  # the job's container is named NAME_PREFIX-<job_id>
# what state.json keeps of the job's result (JobResult.to_json), beside the task's own time, host and times
STATE_FIELDS = ("status", "error", "exit_code", "wall_seconds", "cpu_seconds", "gpu_seconds", "peak_memory_bytes",
                "gpu_passed", "used_gpu")


class GuardedLauncher:
    """A launcher whose failures to start or follow the container are the engine's (EngineError), not the job's;
    a GPU asked for but absent on this node is the node's; and an image's upload checks, once passed, are not done
    again by the phase's other tasks (`checked`: where their notes are kept; None for a tag without a digest, a
    gateway route's image, which may change between jobs: checked each time)."""

    def __init__(self, launcher: DockerImage, gpu: bool, checked: Path | None):
        self.launcher = launcher
        self.description = launcher.description
        self.input_read_only = getattr(launcher, "input_read_only", False)
        self.gpu = gpu
        self.checked = checked

    def check(self) -> list[str]:
        if self.checked is None:
            return self.launcher.check()
        try:
            notes = json.loads(self.checked.read_text())["notes"]
            if isinstance(notes, list) and all(isinstance(note, str) for note in notes):
                return notes
        except (OSError, ValueError, KeyError, TypeError):
            pass
        notes = self.launcher.check()  # a refusal is not kept: it may be the engine's failure, not the image's
        self.checked.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.checked, {"notes": notes})
        return notes

    def gpu_available(self) -> bool:
        available = self.launcher.gpu_available()
        if self.gpu and not available:
            raise EngineError(f"no GPU that {self.description} can give a container on {socket.gethostname()}")
        return available

    def launch(self, folders: JobFolders, limits: JobLimits, gpu: bool, name: str) -> Execution:
        try:
            return self.launcher.launch(folders, limits, gpu, name)
        except EmulationError as exc:
            raise EngineError(str(exc)) from None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def slot_fds() -> tuple[int, ...]:
    """The local backend's slot lock given to this task (local.SLOT_FD), to be held by its container's watchdog."""
    given = os.environ.get(SLOT_FD, "")
    if not given.isdigit():
        return ()
    try:
        os.fstat(int(given))
    except OSError:
        return ()
    return (int(given),)


def launcher(engine: str, image: str) -> DockerImage:
    """The job's container, run by the phase's engine."""
    return DockerImage(image, name_prefix=NAME_PREFIX, engine=engine, hold_fds=slot_fds())


def _cause(error: str | None) -> str | None:
    if error is None:
        return None
    return "oom" if error.startswith(MEMORY_KILLED) else "time_limit" if error.startswith(TIME_LIMIT) else None


def image_to_run(spec: dict[str, Any]) -> str:
    """The job's image in this node's engine: its tag while the tag is still the planned image (the team's name for
    it in every message), else its digest; an archive loaded first; a tag without a digest (a gateway route's image)
    as the node's engine has it. EngineError where the node lacks it."""
    image, engine = spec["image"], spec["engine"]
    if image["archive"]:
        if not image.get("verified"):
            raise EngineError(f"image archive {Path(image['archive']).name}: not verified by this version's plan "
                              "(`medchallenge phase run` plans it again)")
        ensure_loaded(engine, Path(image["archive"]), VerifiedImage.from_json(image["verified"]))
        return spec["run_image"]
    if image["digest"] is None:
        if local_digest(engine, image["ref"]) is None:
            raise EngineError(f"image {image['ref']} is not in {engine} on {socket.gethostname()}")
        return image["ref"]
    if local_digest(engine, image["ref"]) == image["digest"]:
        return image["ref"]
    if local_digest(engine, image["digest"]) is None:
        raise EngineError(f"image {image['ref']} ({image['digest'][:19]}) is not in {engine} on "
                          f"{socket.gethostname()}")
    return spec["run_image"]


def run_task(spec: dict[str, Any]) -> JobResult:
    """The job of a task spec; EngineError for a cause outside the job."""
    layout = PhaseLayout(Path(spec["out"]))
    job_id = spec["job_id"]
    sockets = {socket["slug"]: Socket(**socket) for socket in spec["sockets"]}  # not the registry: a task starts fast
    inputs = [SocketValue(v["pk"], sockets[v["socket"]], image_pk=v["image_pk"], image_name=v["image_name"],
                          image_file=Path(v["image_file"])) for v in spec["inputs"]]
    limits = JobLimits(**spec["limits"])
    try:
        guarded = GuardedLauncher(launcher(spec["engine"], image_to_run(spec)), spec["gpu"],
                                  layout.image_check(spec["image"]["digest"]) if spec["image"]["digest"] else None)
        return run_job(guarded, inputs, [sockets[s] for s in spec["outputs"]], layout.job(job_id) / "run",
                       model=Path(spec["model"]) if spec["model"] else None, limits=limits,
                       gpu="on" if spec["gpu"] else "off", pks=itertools.count(spec["pk_base"] + 1), pk=job_id,
                       model_dir=Path(spec["model_dir"]) if spec.get("model_dir") else None)
    except InputError as exc:  # refused before the container ran (root image, bad model or archive): the team's
        return failed_before_running(layout, job_id, str(exc), inputs, limits)


def _stop(signum: int, _frame) -> None:
    """The first SIGTERM or SIGINT unwinds through the job runner, which removes the container; later ones are
    ignored so that they do not cut that short."""
    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, signal.SIG_IGN)
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m medchallenge.phase.task OUT/tasks/<job_id>.json", file=sys.stderr)
        return 2
    setup_logging()
    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, _stop)
    os.umask(OWNER_ONLY_UMASK)
    try:
        spec = json.loads(Path(argv[0]).read_text())
    except (OSError, ValueError) as exc:
        print(f"error: {argv[0]}: not a readable task spec ({exc})", file=sys.stderr)
        return 2
    # the engine: a name resolved on this node's PATH, never a program the spec names
    if not isinstance(spec, dict) or spec.get("engine") not in ENGINES:
        print(f"error: {argv[0]}: its engine is not one of {', '.join(ENGINES)}", file=sys.stderr)
        return 2
    layout = PhaseLayout(Path(spec["out"]))
    with job_lease(layout, spec["job_id"]) as holder:
        if holder is not None:  # another task runs this job (an earlier array's, another `phase run`'s)
            log.warning("job %s: held by another task (%s); not run twice", spec["job_id"],
                        holder.get("slurm_job_id") or f"{holder.get('host')} pid {holder.get('pid')}")
            return HELD
        return run_held_task(layout, spec)


def run_held_task(layout: PhaseLayout, spec: dict[str, Any]) -> int:
    """The task's job, its lease held: its folder cleared, the job run, its state written."""
    job_id = spec["job_id"]
    folder = layout.job(job_id)
    shutil.rmtree(folder, ignore_errors=True)  # a previous attempt's leftovers
    folder.mkdir(parents=True)
    started = _now()
    write_json_atomic(layout.running(job_id), {"host": socket.gethostname(), "pid": os.getpid(), "started": started})
    clock = time.perf_counter()
    try:
        result = run_task(spec)
    except EngineError as exc:
        write_state(layout, job_id, {"status": "interrupted", "cause": "engine", "error": str(exc),
                                     "host": socket.gethostname(), "started": started, "finished": _now()})
        layout.running(job_id).unlink(missing_ok=True)
        print(f"error: job {job_id}: not run, for a cause outside the job (run again): {exc}", file=sys.stderr)
        return OUTSIDE
    except BaseException:  # stopped by a signal: a container the engine was still creating is removed too
        subprocess.run([spec["engine"], "rm", "--force", f"{NAME_PREFIX}-{job_id}"], capture_output=True,
                       timeout=60, check=False)
        layout.running(job_id).unlink(missing_ok=True)
        raise
    write_result(folder, result)
    job = result.to_json()
    write_state(layout, job_id, {
        **{key: job[key] for key in STATE_FIELDS}, "cause": _cause(result.error),
        "task_seconds": round(time.perf_counter() - clock, 3), "host": socket.gethostname(), "started": started,
        "finished": _now()})
    layout.running(job_id).unlink(missing_ok=True)
    log.info("job %s: %s%s", job_id, result.status, f": {result.error}" if result.error else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
