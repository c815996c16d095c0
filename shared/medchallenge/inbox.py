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
from .io import write_json_atomic

log = logging.getLogger("medchallenge.inbox")

WATCH_STATES = ("pending", "running", "done")
WATCH_POLL_SECONDS = 1.0


def watch_inbox(inbox: Path, process: Callable[[Path], None], stop: Callable[[], bool] = lambda: False) -> None:
    """Run `process(job)` on every job put into `inbox/pending/` until `stop()`; `process` fills `job/output` or
    raises InputError, whose line goes into status.json."""
    for state in WATCH_STATES:
        (inbox / state).mkdir(parents=True, exist_ok=True)
    for job in (inbox / "running").iterdir():
        os.replace(job, inbox / "pending" / job.name)
        log.info("job %s: was running when the watcher stopped; queued again", job.name)
    log.info("watching %s", inbox / "pending")
    while not stop():
        jobs = sorted((p for p in (inbox / "pending").iterdir() if not p.name.startswith(".")),
                      key=lambda p: p.stat().st_mtime)
        if not jobs:
            time.sleep(WATCH_POLL_SECONDS)
            continue
        job = inbox / "running" / jobs[0].name
        os.replace(jobs[0], job)
        shutil.rmtree(job / "output", ignore_errors=True)
        try:
            process(job)
            status = {"returncode": 0, "error": None}
        except InputError as exc:
            log.error("job %s: %s", job.name, exc)
            status = {"returncode": 1, "error": str(exc)}
        write_json_atomic(job / "status.json", status)
        done = inbox / "done" / job.name
        if done.exists():
            shutil.rmtree(done)
        os.replace(job, done)
