"""What starts a job's process and what comes back from it: the folders it sees, and the execution's facts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .conditions import JobLimits


@dataclass(frozen=True)
class JobFolders:
    """The host folders a job sees as /input (read-only), /output, /opt/ml/model and /tmp; `model_readonly`: the
    model folder is an unpacked model shared by jobs (a phase's), mounted read-only and not the job's to write;
    `input_shared`: the input folder is the caller's, laid out before the job (an evaluation's input), not the
    job's own; `ground_truth`: an evaluation's ground truth, seen read-only at /opt/ml/input/data/ground_truth."""

    input: Path
    output: Path
    model: Path
    tmp: Path
    model_readonly: bool = False
    input_shared: bool = False
    ground_truth: Path | None = None


@dataclass
class Execution:
    """What a launcher observed of one job's process."""

    exit_code: int | None
    wall_seconds: float
    timed_out: bool = False
    oom_killed: bool = False
    disk_error: str | None = None  # stopped over its disk limit (disk_quota.py): why
    peak_memory_bytes: int | None = None  # None: not measurable here
    cpu_seconds: float | None = None  # CPU time of all its processes, user and system; None: not measurable here
    gpus: int = 0  # GPUs given to it (its GPU seconds: wall seconds x gpus)
    used_gpu: bool | None = None  # None: not measurable here
    stdout_tail: list[str] = field(default_factory=list)
    stderr_tail: list[str] = field(default_factory=list)
    written_outside: list[str] = field(default_factory=list)  # files written outside /output and /tmp
    unenforced: list[str] = field(default_factory=list)  # GC conditions this launcher could not reproduce
    start_error: str | None = None  # the container was made but its command could not start (the image's fault)


class Launcher(Protocol):
    """Starts one job's process under grand-challenge's conditions (docker_run.DockerImage) or as near as a plain
    process gets (process_run.LocalProcess)."""

    description: str
    input_read_only: bool  # the job cannot write its input folder (a read-only mount): its files may be shared

    def check(self) -> list[str]:
        """Refuse (EmulationError) what grand-challenge refuses at upload; notes on what it would change."""

    def gpu_available(self) -> bool:
        """Whether a GPU can be given to the job."""

    def launch(self, folders: JobFolders, limits: JobLimits, gpu: bool, name: str) -> Execution:
        """Run the job to its end, its time limit or its memory limit."""
