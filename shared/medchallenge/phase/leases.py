"""A job folder is held by one task at a time: the task holds OUT/jobs/<job_id>.lease, a file beside the folder with
a POSIX lock (fcntl: shared between the hosts of NFS and of the other shared filesystems that pass locks on) for its
whole life, and writes its holder in it (host, pid, the Slurm task's id). A second task (a second array's, another
`phase run`'s on another submit host) that finds the lock taken does not run the job. A filesystem whose locks stay
on one host would let it take the lock: so a lease naming a Slurm task is broken only once Slurm says that task is
no longer pending or running. The lock goes with its process (and with its node: the filesystem's lock recovery), so
a lease is never left behind; the file stays (empty), as unlinking a locked file would let two tasks hold two files
of one name."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import socket
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from .layout import PhaseLayout

log = logging.getLogger("medchallenge.phase")


def slurm_task_id() -> str | None:
    """This process's Slurm task (ARRAY_INDEX for an array's task, else the job id); None outside Slurm."""
    array, index = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{array}_{index}" if array and index else os.environ.get("SLURM_JOB_ID")


def _holder(fd: int) -> dict[str, Any]:
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        holder = json.loads(os.read(fd, 4096) or b"{}")
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def _slurm_holds(holder: dict[str, Any], mine: str | None) -> bool:
    """Whether the holder a lease names is a Slurm task other than this one that Slurm still has pending or
    running (a Slurm that does not answer: taken as still holding; no Slurm here at all: not held)."""
    task = holder.get("slurm_job_id")
    if not isinstance(task, str) or not task or task == mine or shutil.which("squeue") is None:
        return False
    from .slurm import SlurmError, active_jobs

    try:
        return bool(active_jobs([task]))
    except SlurmError:
        return True


@contextlib.contextmanager
def job_lease(layout: PhaseLayout, job_id: str) -> Iterator[dict[str, Any] | None]:
    """Hold the job's lease while the block runs: yields None when this process holds it, else the holder's record
    (the job is another task's: it must not run here)."""
    path = layout.lease(job_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield _holder(fd) or {"host": "?"}
            return
        mine = slurm_task_id()
        holder = _holder(fd)
        if _slurm_holds(holder, mine):
            log.warning("job %s: its lease names Slurm task %s, which Slurm still runs; not taken over", job_id,
                        holder["slurm_job_id"])
            yield holder
            return
        record = {"host": socket.gethostname(), "pid": os.getpid(), "slurm_job_id": mine,
                  "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        os.fsync(fd)
        try:
            yield None
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def lease_held(layout: PhaseLayout, job_id: str) -> bool:
    """Whether a task holds the job's lease now (its lock is taken)."""
    try:
        fd = os.open(layout.lease(job_id), os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases a lock this process took
    return False
