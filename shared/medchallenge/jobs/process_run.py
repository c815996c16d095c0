"""A job as a process on this host, without Docker: the project's inference scripts while developing, a gateway
installed without Docker, and the tests of the job runner that need no engine. The folders come as the project's
INPUT_DIR, OUTPUT_DIR, MODEL_DIR and an evaluation's GROUND_TRUTH_DIR (and TMPDIR and HOME: the job's /tmp, so that
nothing is written outside the job folder); the time limit and RLIMIT_DATA are enforced as in a container, the
process dies with its runner, its peak memory is its own (VmHWM sampled while it runs: process_memory.py), its CPU
time its rusage (with the children it waited for), and the conditions a process cannot have (no network, its own
user and file system, CPUs, GPU) are listed in every result as not enforced."""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import time
from collections.abc import Sequence

from ..process_memory import PeakMemory
from .conditions import GC_ENVIRONMENT, STRIPPED_PREFIX, JobLimits
from .disk_quota import DiskQuota
from .launch import Execution, JobFolders
from .log_tail import read_tails

PR_SET_PDEATHSIG = 1
UNENFORCED = ("no network", "the image's user and file system", "the CPU count", "the GPU choice",
              "the environment (this process's is inherited)")


def die_with_parent(signum: int = signal.SIGKILL, parent: int | None = None) -> None:
    """In a child before it runs (preexec_fn): be sent `signum` when its parent dies (a job's process: killed, so
    that no orphan goes on writing into a job folder that the runner, restarted, runs again; a phase's task:
    SIGTERM, so that it removes its container), at once when `parent` (its pid) died already."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signum)
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), signum)


class LocalProcess:
    """`argv` run as one job with this host's programs."""

    def __init__(self, argv: Sequence[str]):
        self.argv = list(argv)
        self.description = f"local process {' '.join(self.argv)}"
        self.input_read_only = False  # its input files are its own copies

    def check(self) -> list[str]:
        return [f"run as a local process, not a container: not enforced: {', '.join(UNENFORCED)}"]

    def gpu_available(self) -> bool:
        return False

    def launch(self, folders: JobFolders, limits: JobLimits, gpu: bool, name: str) -> Execution:
        env = {k: v for k, v in os.environ.items() if not k.lower().startswith(STRIPPED_PREFIX)}
        env.update(GC_ENVIRONMENT, INPUT_DIR=str(folders.input), OUTPUT_DIR=str(folders.output),
                   MODEL_DIR=str(folders.model), TMPDIR=str(folders.tmp), HOME=str(folders.tmp),
                   **({"GROUND_TRUTH_DIR": str(folders.ground_truth)} if folders.ground_truth else {}))
        data, disk = limits.data_limit_bytes, limits.disk_bytes

        def limit_data() -> None:
            resource.setrlimit(resource.RLIMIT_DATA, (data, data))
            resource.setrlimit(resource.RLIMIT_FSIZE, (disk, disk))
            die_with_parent()

        quota = DiskQuota(folders, disk)
        started = time.perf_counter()
        process = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                   preexec_fn=limit_data, start_new_session=True)
        with process:
            tails = read_tails(process)
            timed_out, status, usage = False, None, None
            with PeakMemory(process.pid) as peak:
                while status is None:
                    pid, status_raw, usage = os.wait4(process.pid, os.WNOHANG)
                    if pid:
                        status = os.waitstatus_to_exitcode(status_raw)
                        break
                    disk_error = quota.exceeded()
                    if disk_error or time.perf_counter() - started > limits.time_limit_s:
                        timed_out = not disk_error
                        os.killpg(process.pid, signal.SIGKILL)
                        _, status_raw, usage = os.wait4(process.pid, 0)
                        status = os.waitstatus_to_exitcode(status_raw)
                        break
                    time.sleep(0.05)
            process.returncode = status
            wall = time.perf_counter() - started
            quota.exceeded(final=True)
            stdout_tail, stderr_tail = (tail.lines() for tail in tails)
        exit_code = 128 - status if status < 0 else status  # killed by signal N: 128 + N, as a shell shows it
        return Execution(exit_code=exit_code, wall_seconds=wall, timed_out=timed_out, disk_error=quota.error,
                         peak_memory_bytes=peak.bytes, cpu_seconds=usage.ru_utime + usage.ru_stime, used_gpu=None,
                         stdout_tail=stdout_tail, stderr_tail=stderr_tail, unenforced=list(UNENFORCED))
