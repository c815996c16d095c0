"""Where a phase's tasks run: a backend takes each submission's tasks, then the steps that follow them (its
evaluation, then the leaderboard), and waits. `local.py` runs them on this machine; `slurm.py` (when present) as
Slurm job arrays; `run.open_backend` opens one by name. Results are read from OUT afterwards, never from the backend."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

BACKENDS = ("local", "slurm")


@dataclass(frozen=True)
class Resources:
    """What one task asks for: CPUs, memory (the job's limit), GPUs and its time limit."""

    cpus: float
    memory_gb: float
    gpus: int
    time_limit_s: float

    def to_json(self) -> dict:
        return asdict(self)


Handle = Any  # what a backend gives back for submitted work, only ever passed back to it


class Backend(Protocol):
    def submit_tasks(self, team: str, specs: Sequence[Path], resources: Resources) -> Handle:
        """Run `python -m medchallenge.phase.task SPEC` for every spec (one submission's jobs)."""

    def submit_after(self, handles: Sequence[Handle], argv: Sequence[str], name: str) -> Handle:
        """Run the command `argv` once all the work of `handles` is over, whatever its outcome."""

    def wait(self, handles: Sequence[Handle]) -> None:
        """Return when all the work of `handles` is over."""

    def held(self) -> dict[str, Handle]:
        """The jobs that work of an earlier run still holds (job id -> that work, which the steps wait for): they
        are not submitted again."""

    def interrupted(self) -> str:
        """What Ctrl-C did to the submitted work, in one line."""
