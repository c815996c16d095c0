"""A job's writable space, bounded (grand-challenge gives a job a volume of at least 30 GB): what it writes to
/output, /tmp and /opt/ml/model together is measured while it runs and at its end, and the job is stopped over its
disk limit or when it has taken half the disk space that was free at its start; no single file it writes can pass
the limit (RLIMIT_FSIZE, set by the launchers). A folder the job makes unreadable to the runner is not measured:
the free-space check and RLIMIT_FSIZE still bound it. The folders stay on disk, as on grand-challenge (a tmpfs
would count against the job's memory)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from .conditions import GIB
from .launch import JobFolders

MIB = 1 << 20
POLL_S = 0.5  # between two measurements, at least (more for a job of many files: see DiskQuota.exceeded)
ENTRY_BYTES = 4096  # what a file or folder costs at least (its inode and entry): a million empty files count


def written_bytes(folders: tuple[Path, ...]) -> int:
    """The disk space the files and folders under `folders` take (allocated blocks, so a sparse file counts what it
    holds; each entry at least ENTRY_BYTES), links not followed; what cannot be read is left to the free-space
    check."""
    total, stack = 0, list(folders)
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:  # removed by the job meanwhile
                        continue
                    total += max(info.st_blocks * 512, ENTRY_BYTES)
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
        except OSError:
            continue
    return total


def size_text(count: int) -> str:
    """`count` bytes as a report says it: GB (GiB, as the memory limit) from 1 GiB, else MiB."""
    return f"{count / GIB:.3g} GB" if count >= GIB else f"{count / MIB:.3g} MiB"


def free_bytes(path: Path) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


class DiskQuota:
    """The disk limit of one job's writable folders, checked at most every POLL_S while it runs."""

    def __init__(self, folders: JobFolders, limit_bytes: int):
        self.folders = (folders.output, folders.tmp, *(() if folders.model_readonly else (folders.model,)))
        self.limit_bytes = limit_bytes
        self.start_bytes = written_bytes(self.folders)  # the model extracted before the job: not the job's
        self.start_free = free_bytes(folders.output)
        self.next_check = 0.0
        self.error: str | None = None

    def exceeded(self, final: bool = False) -> str | None:
        """Why the job must be stopped now (its error line), or None; `final`: measured now (the job ended)."""
        now = time.monotonic()
        if self.error is None and (final or now >= self.next_check):
            written = written_bytes(self.folders) - self.start_bytes
            stopped = "" if final else ", and was stopped"
            if written > self.limit_bytes:
                self.error = (f"The job wrote more than its disk limit of {size_text(self.limit_bytes)} to /output, "
                              f"/tmp and /opt/ml/model{stopped}")
            elif not final and (free := free_bytes(self.folders[0])) < self.start_free / 2:
                self.error = (f"The job took more than half the free disk space where /output and /tmp are (from "
                              f"{size_text(self.start_free)} to {size_text(free)} free){stopped}")
            self.next_check = time.monotonic() + max(POLL_S, 4 * (time.monotonic() - now))
        return self.error
