"""The inbox the gateway's job-runner service (`medchallenge gateway --job-runner`) watches; the gateway's side is
gateway/jobs.py `run_in_inbox`. Every job folder `DIR/pending/<job>` (renamed there complete by the gateway) moves
to `DIR/running/<job>`, its `input/` is processed into `output/`, `status.json` says how that went, and the job
moves to `DIR/done/<job>`; on start, jobs left in running/ (a killed watcher) go back to pending/."""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from .errors import InputError
from .io import is_disk_full, write_json_atomic

log = logging.getLogger("medchallenge.inbox")

WATCH_STATES = ("pending", "running", "done")
WATCH_POLL_SECONDS = 1.0


def watch_inbox(inbox: Path, process: Callable[[Path], None], stop: Callable[[], bool] = lambda: False,
                disk_full_retry_seconds: float = 60.0) -> None:
    """Run `process(job)` on every job put into `inbox/pending/` until `stop()`; `process` fills `job/output` or
    raises InputError, whose line goes into status.json (any other exception too, as the job runner's failure).
    A full disk, while the job runs or its status is written, leaves the job queued in pending/: it is said once, and
    the job is tried again every `disk_full_retry_seconds`. Nothing a job or the disk does ends the watcher."""
    for state in WATCH_STATES:
        (inbox / state).mkdir(parents=True, exist_ok=True)
    for job in _requeue(inbox):
        log.info("job %s: was running when the watcher stopped; queued again", job)
    log.info("watching %s", inbox / "pending")
    disk_full = False
    while not stop():
        try:
            busy = _run_next(inbox, process)
        except Exception as exc:
            try:
                _requeue(inbox)
            except OSError:  # tried again after the pause
                pass
            if not is_disk_full(exc):  # e.g. the inbox unreadable: said each time, tried again
                log.exception("watcher of %s: %s: %s; trying again in %g s", inbox, type(exc).__name__, exc,
                              disk_full_retry_seconds)
            elif not disk_full:
                log.error("disk full (%s): the job stays queued in %s; trying again every %g s", exc.strerror or exc,
                          inbox / "pending", disk_full_retry_seconds)
            disk_full = is_disk_full(exc)
            _sleep(disk_full_retry_seconds, stop)
            continue
        if disk_full:
            disk_full = False
            log.info("disk space back: running the jobs of %s again", inbox / "pending")
        if not busy:
            time.sleep(WATCH_POLL_SECONDS)


def _sleep(seconds: float, stop: Callable[[], bool]) -> None:
    """Wait `seconds`, or less once `stop()`."""
    until = time.monotonic() + seconds
    while not stop() and time.monotonic() < until:
        time.sleep(min(WATCH_POLL_SECONDS, max(0.0, until - time.monotonic())))


def _requeue(inbox: Path) -> list[str]:
    """The jobs in running/ (interrupted) back in pending/, without the status or output of that run."""
    names = []
    for job in (inbox / "running").iterdir():
        shutil.rmtree(job / "output", ignore_errors=True)
        (job / "status.json").unlink(missing_ok=True)
        os.replace(job, inbox / "pending" / job.name)
        names.append(job.name)
    return names


def _run_next(inbox: Path, process: Callable[[Path], None]) -> bool:
    """The oldest pending job run, its status written and the job moved to done/; False when none is pending. A
    full disk (OSError) leaves it in running/ (the watcher queues it again)."""
    jobs = sorted((p for p in (inbox / "pending").iterdir() if not p.name.startswith(".")),
                  key=lambda p: p.stat().st_mtime)
    if not jobs:
        return False
    job = inbox / "running" / jobs[0].name
    os.replace(jobs[0], job)
    shutil.rmtree(job / "output", ignore_errors=True)
    try:
        process(job)
        status = {"returncode": 0, "error": None}
    except InputError as exc:
        log.error("job %s: %s", job.name, exc)
        status = {"returncode": 1, "error": str(exc)}
    except Exception as exc:
        if is_disk_full(exc):
            raise
        log.exception("job %s: the job runner failed on it", job.name)
        status = {"returncode": 1, "error": f"the job runner failed on this job: {type(exc).__name__}: {exc}"}
    write_json_atomic(job / "status.json", status)
    done = inbox / "done" / job.name
    if done.exists():
        shutil.rmtree(done)
    os.replace(job, done)
    return True
