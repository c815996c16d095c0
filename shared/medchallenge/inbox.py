"""The inbox the gateway's job-runner service (`medchallenge gateway --job-runner`) watches; the gateway's side is
gateway/jobs.py `run_in_inbox`. Every job folder `DIR/pending/<job>` (renamed there complete by the gateway) moves
to `DIR/running/<job>`, its `input/` is processed into `output/`, `status.json` says how that went, and the job
moves to `DIR/done/<job>`, up to `max_parallel` jobs at once; on start, jobs left in running/ (a killed watcher) go
back to pending/."""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .errors import InputError
from .io import is_disk_full, write_json_atomic
from .jobs.errors import EngineFault

log = logging.getLogger("medchallenge.inbox")

WATCH_STATES = ("pending", "running", "done")
WATCH_POLL_SECONDS = 0.05  # a look at pending/ (one directory listing): a job handed over starts within this


def watch_inbox(inbox: Path, process: Callable[[Path], None], stop: Callable[[], bool] = lambda: False,
                disk_full_retry_seconds: float = 60.0, max_parallel: int = 1) -> None:
    """Run `process(job)` on every job put into `inbox/pending/`, up to `max_parallel` at once (each in its own
    thread), until `stop()` (then the jobs running are waited for); `process` fills `job/output` or raises
    InputError, whose line goes into status.json (any other exception too, as the job runner's failure). A full
    disk, while a job runs or its status is written, leaves that job queued in pending/: it is said once, and no job
    starts for `disk_full_retry_seconds`. Nothing a job or the disk does ends the watcher."""
    for state in WATCH_STATES:
        (inbox / state).mkdir(parents=True, exist_ok=True)
    for job in _requeue(inbox):
        log.info("job %s: was running when the watcher stopped; queued again", job)
    log.info("watching %s", inbox / "pending")
    _Watcher(inbox, process, disk_full_retry_seconds, max_parallel).run(stop)


class _Watcher:
    """The watcher's state shared by its job threads: the free places, and the pause after a failure."""

    def __init__(self, inbox: Path, process: Callable[[Path], None], retry_seconds: float, max_parallel: int):
        self.inbox, self.process, self.retry_seconds = inbox, process, retry_seconds
        self.places = threading.Semaphore(max_parallel)
        self.lock = threading.Lock()
        self.paused_until = 0.0  # after a failure of the watcher's own (a full disk): no job starts before
        self.disk_full = False

    def run(self, stop: Callable[[], bool]) -> None:
        threads: list[threading.Thread] = []
        while not stop():
            if time.monotonic() < self.paused_until:
                time.sleep(WATCH_POLL_SECONDS)
                continue
            if not self.places.acquire(timeout=WATCH_POLL_SECONDS):  # as many jobs running as may
                continue
            try:
                job = _claim_next(self.inbox)
            except Exception as exc:  # e.g. the inbox unreadable: said, tried again after the pause
                self.places.release()
                self.trouble(exc, None)
                continue
            if job is None:
                self.places.release()
                time.sleep(WATCH_POLL_SECONDS)
                continue
            threads = [thread for thread in threads if thread.is_alive()]
            threads.append(threading.Thread(target=self.run_job, args=(job,), name=f"job {job.name}", daemon=True))
            threads[-1].start()
        for thread in threads:
            thread.join()

    def run_job(self, job: Path) -> None:
        try:
            _run(self.inbox, job, self.process)
            with self.lock:
                if self.disk_full:
                    self.disk_full = False
                    log.info("disk space back: running the jobs of %s again", self.inbox / "pending")
        except Exception as exc:
            self.trouble(exc, job)
        finally:
            self.places.release()

    def trouble(self, exc: Exception, job: Path | None) -> None:
        """A failure of the watcher's own (not the job's): the job back in pending/, no job started for a while."""
        try:
            if job is not None:
                _requeue_job(self.inbox, job)
        except OSError:  # tried again at the next start
            pass
        with self.lock:
            full = is_disk_full(exc)
            if not full:  # e.g. the inbox unreadable: said each time, tried again
                log.error("watcher of %s: %s: %s; trying again in %g s", self.inbox, type(exc).__name__, exc,
                          self.retry_seconds, exc_info=exc)
            elif not self.disk_full:
                log.error("disk full (%s): the job stays queued in %s; trying again every %g s", exc.strerror or exc,
                          self.inbox / "pending", self.retry_seconds)
            self.disk_full = full
            self.paused_until = time.monotonic() + self.retry_seconds


def _requeue_job(inbox: Path, job: Path) -> None:
    """An interrupted job from running/ back in pending/, without the status or output of that run."""
    shutil.rmtree(job / "output", ignore_errors=True)
    (job / "status.json").unlink(missing_ok=True)
    os.replace(job, inbox / "pending" / job.name)


def _requeue(inbox: Path) -> list[str]:
    """The jobs in running/ (interrupted) back in pending/."""
    names = []
    for job in (inbox / "running").iterdir():
        _requeue_job(inbox, job)
        names.append(job.name)
    return names


def _claim_next(inbox: Path) -> Path | None:
    """The oldest pending job moved to running/ (the gateway renames a job there complete); None when none is
    pending."""
    jobs = sorted((p for p in (inbox / "pending").iterdir() if not p.name.startswith(".")),
                  key=lambda p: p.stat().st_mtime)
    if not jobs:
        return None
    job = inbox / "running" / jobs[0].name
    os.replace(jobs[0], job)
    return job


def _run(inbox: Path, job: Path, process: Callable[[Path], None]) -> None:
    """The claimed job run, its status written and the job moved to done/. A full disk (OSError) leaves it in
    running/ (the watcher queues it again)."""
    shutil.rmtree(job / "output", ignore_errors=True)
    try:
        process(job)
        status = {"returncode": 0, "error": None}
    except InputError as exc:
        log.error("job %s: %s", job.name, exc)
        status = {"returncode": 1, "error": str(exc), **({"cause": "engine"} if isinstance(exc, EngineFault) else {})}
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
