"""The local backend: a phase's tasks on this machine, up to `jobs` at once and no more than its CPUs, memory and
GPUs hold (by what each task asks for; a task asking more than the machine has runs alone), then the steps that
follow them; a progress bar on a terminal. Each task's and step's output goes to OUT/logs/<name>.log."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .backend import Resources
from .layout import PhaseLayout

POLL_S = 0.05  # a task's end seen within this: the next one starts (polling a few processes costs nothing)
STEP = Resources(cpus=1, memory_gb=0, gpus=0, time_limit_s=0)  # an evaluation or the leaderboard


def machine() -> Resources:
    """This machine's CPUs (those this process may use), memory and GPUs."""
    gpus = 0
    if shutil.which("nvidia-smi"):
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
        gpus = listed.stdout.count("GPU ") if listed.returncode == 0 else 0
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)
    return Resources(cpus=len(os.sched_getaffinity(0)), memory_gb=memory, gpus=gpus, time_limit_s=0)


@dataclass
class Work:
    """One command to run: a task or a step, with what it asks for and what it waits for."""

    name: str
    argv: list[str]
    resources: Resources
    after: list[int] = field(default_factory=list)
    is_task: bool = True
    process: subprocess.Popen | None = None
    returncode: int | None = None


@dataclass(frozen=True)
class LocalHandle:
    ids: tuple[int, ...]


class LocalBackend:
    def __init__(self, layout: PhaseLayout, jobs: int = 1, progress: bool = True):
        self.layout = layout
        self.jobs = max(1, jobs)
        self.progress = progress
        self.capacity = machine()
        self.work: list[Work] = []

    def _add(self, work: Work) -> int:
        self.work.append(work)
        return len(self.work) - 1

    def submit_tasks(self, team: str, specs: Sequence[Path], resources: Resources) -> LocalHandle:
        return LocalHandle(tuple(self._add(Work(spec.stem, [sys.executable, "-m", "medchallenge.phase.task",
                                                            str(spec)], resources)) for spec in specs))

    def submit_after(self, handles: Sequence[LocalHandle], argv: Sequence[str], name: str) -> LocalHandle:
        after = [i for handle in handles for i in handle.ids]
        return LocalHandle((self._add(Work(name, list(argv), STEP, after, is_task=False)),))

    def held(self) -> dict[str, LocalHandle]:
        """None: an earlier run's tasks ended with it (the run's lock: one run at a time)."""
        return {}

    def interrupted(self) -> str:
        return (f"interrupted: the running jobs were stopped and their containers removed; run the same command "
                f"again to resume (`medchallenge phase status {self.layout.out}`)")

    def _fits(self, work: Work, running: list[Work]) -> bool:
        if not running:
            return True
        if len(running) >= self.jobs:
            return False
        used = [w.resources for w in running]
        return (sum(r.cpus for r in used) + work.resources.cpus <= self.capacity.cpus
                and sum(r.memory_gb for r in used) + work.resources.memory_gb <= self.capacity.memory_gb
                and sum(r.gpus for r in used) + work.resources.gpus <= self.capacity.gpus)

    def _start(self, work: Work) -> None:
        self.layout.logs.mkdir(parents=True, exist_ok=True)
        with open(self.layout.logs / f"{work.name}.log", "ab") as log:
            work.process = subprocess.Popen(work.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait(self, handles: Sequence[LocalHandle]) -> None:
        """Run everything the handles need (and what they wait for), in submission order as room allows."""
        wanted = {i for handle in handles for i in handle.ids}
        for i in sorted(wanted, reverse=True):
            wanted.update(self.work[i].after)
        pending = [self.work[i] for i in sorted(wanted) if self.work[i].returncode is None]
        from tqdm import tqdm

        tasks = [w for w in pending if w.is_task]
        bar = tqdm(total=len(tasks), unit="job", desc="phase", disable=None if self.progress else True,
                   file=sys.stderr)
        try:
            self._run(pending, bar)
        finally:
            for work in pending:
                if work.process is not None and work.returncode is None:
                    work.process.terminate()  # the task removes its container on SIGTERM
                    work.returncode = work.process.wait()
            bar.close()

    def _run(self, pending: list[Work], bar) -> None:
        running: list[Work] = []
        waiting = list(pending)
        while waiting or running:
            for work in list(waiting):
                ready = all(self.work[i].returncode is not None for i in work.after)
                if ready and self._fits(work, running):
                    self._start(work)
                    running.append(work)
                    waiting.remove(work)
            time.sleep(POLL_S)
            for work in list(running):
                if work.process.poll() is not None:
                    work.returncode = work.process.returncode
                    running.remove(work)
                    if work.is_task:
                        bar.update(1)
            bar.set_postfix_str(f"{len(running)} running")
