"""A child process's own peak memory. Its `ru_maxrss` (os.wait4, RUSAGE_CHILDREN) is not that: Linux keeps, across
execve, the high-water mark of the address space the process had before, and a child forked (or vforked) from a
large parent starts with the parent's resident pages, so a small program started by a 1.5 GB process reports at least
1.5 GB. VmHWM of /proc/PID/status is the high-water mark of the process's address space since its execve (which has
happened when subprocess.Popen returns); sampled until the process exits, its last value is the child's own peak,
short of what it gained in the last interval before exiting."""

from __future__ import annotations

import threading
import time
from pathlib import Path

SAMPLE_SECONDS = 0.02
FIRST_SAMPLE_SECONDS, FIRST_PERIOD_SECONDS = 0.002, 0.5  # a short-lived child is sampled more often


def vm_hwm_bytes(pid: int) -> int | None:
    """The process's VmHWM (peak resident set since its execve), or None when it has no address space any more (it
    exited) or is not readable."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return None


class PeakMemory:
    """Samples a running child's VmHWM in a thread while the `with` block waits for the child (every
    FIRST_SAMPLE_SECONDS during its first FIRST_PERIOD_SECONDS, then every SAMPLE_SECONDS):
    `with PeakMemory(proc.pid) as peak: os.wait4(proc.pid, 0)`, then `peak.bytes` (None if never sampled)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.bytes: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        started = time.monotonic()
        while True:
            sampled = vm_hwm_bytes(self.pid)  # the high-water mark only grows while the process lives
            if sampled is not None and (self.bytes is None or sampled > self.bytes):
                self.bytes = sampled
            early = time.monotonic() - started < FIRST_PERIOD_SECONDS
            if self._stop.wait(FIRST_SAMPLE_SECONDS if early else SAMPLE_SECONDS):
                return

    @property
    def mib(self) -> float | None:
        return None if self.bytes is None else self.bytes / 2**20

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
