"""The local backend: a phase's tasks on this machine, up to `jobs` at once and no more than its CPUs, memory and
GPUs hold (by what each task asks for; a task asking more than the machine has runs alone), then the steps that
follow them; a progress bar on a terminal. Each task's and step's output goes to OUT/logs/<name>.log.

A task holds one of the phase's `jobs` slots (OUT/slots/<i>.lock, locked with flock) from its start until its
container is gone: the lock is passed to the task and kept by its container's watchdog, so no runner that dies can
free a slot early, and a `phase run` started after a killed one waits for the slots its tasks still hold. A task
is stopped (SIGTERM: it removes its container) when the `phase run` that started it dies."""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..jobs.process_run import die_with_parent
from .backend import Resources
from .layout import PhaseLayout

POLL_S = 0.05  # a task's end seen within this: the next one starts (polling a few processes costs nothing)
STEP = Resources(cpus=1, memory_gb=0, gpus=0, time_limit_s=0)  # an evaluation or the leaderboard
SLOT_FD = "MEDCHALLENGE_PHASE_SLOT_FD"  # a task's environment: the open file of its slot's lock


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

    def _take_slot(self) -> int | None:
        """The open, locked file of a free slot of this phase, None while all `jobs` are held (by this run's tasks,
        or a killed run's that still run or whose containers are not yet removed)."""
        self.layout.slots.mkdir(parents=True, exist_ok=True)
        for index in range(self.jobs):
            fd = os.open(self.layout.slot(index), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                os.close(fd)
        return None

    def _start(self, work: Work) -> bool:
        """Start the work; a task only with a slot (False while none is free)."""
        slot = self._take_slot() if work.is_task else None
        if work.is_task and slot is None:
            return False
        self.layout.logs.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, SLOT_FD: str(slot)} if slot is not None else None
        try:
            with open(self.layout.logs / f"{work.name}.log", "ab") as log:
                work.process = subprocess.Popen(work.argv, stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, env=env,
                                                pass_fds=() if slot is None else (slot,),
                                                preexec_fn=functools.partial(die_with_parent, signal.SIGTERM,
                                                                             os.getpid()))
        finally:  # the task holds the lock now
            if slot is not None:
                os.close(slot)
        return True

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
                if ready and self._fits(work, running) and self._start(work):
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
