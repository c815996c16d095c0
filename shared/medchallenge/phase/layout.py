"""Where a phase keeps everything under its output folder OUT (one place that names the paths)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# What a phase creates under OUT is its owner's alone, whatever the umask: task specs name what a node runs, results
# decide the leaderboard. Only a job's own folders are opened to its container's user while it runs (jobs.runner).
OWNER_ONLY_UMASK = 0o077


@contextlib.contextmanager
def owner_only() -> Iterator[None]:
    """Files and folders created meanwhile are the owner's only (the umask restored after)."""
    previous = os.umask(OWNER_ONLY_UMASK)
    try:
        yield
    finally:
        os.umask(previous)


@dataclass(frozen=True)
class PhaseLayout:
    """The folders and files of a phase under `out` (absolute: task specs name them for other machines)."""

    out: Path

    @classmethod
    def of(cls, out: Path) -> PhaseLayout:
        return cls(out.absolute())

    @property
    def phase_file(self) -> Path:
        return self.out / "phase.json"

    @property
    def cases(self) -> Path:
        return self.out / "cases"

    def case(self, case_hash: str) -> Path:
        return self.cases / case_hash

    @property
    def tasks(self) -> Path:
        return self.out / "tasks"

    def task(self, job_id: str) -> Path:
        return self.tasks / f"{job_id}.json"

    def job(self, job_id: str) -> Path:
        return self.out / "jobs" / job_id

    def state(self, job_id: str) -> Path:
        return self.job(job_id) / "state.json"

    def result(self, job_id: str) -> Path:
        return self.job(job_id) / "result.json"

    def running(self, job_id: str) -> Path:
        return self.job(job_id) / "running.json"

    def lease(self, job_id: str) -> Path:
        """Beside the job's folder (a task clears the folder once it holds the lease: phase.leases)."""
        return self.out / "jobs" / f"{job_id}.lease"

    def image_check(self, digest: str) -> Path:
        """The notes of an image's upload checks, kept by its digest once one task passed them (the outcome is the
        image's: the other tasks do not check it again)."""
        return self.out / "images" / f"{digest.removeprefix('sha256:')}.json"

    def model(self, model_hash: str) -> Path:
        """A model tarball unpacked once for the phase's jobs, by its hash (mounted read-only into each job)."""
        return self.out / "models" / model_hash

    @property
    def slots(self) -> Path:
        """The local backend's locks, one per task that may run at once (`--jobs`)."""
        return self.out / "slots"

    def slot(self, index: int) -> Path:
        return self.slots / f"{index}.lock"

    @property
    def logs(self) -> Path:
        return self.out / "logs"

    def submission(self, team: str) -> Path:
        return self.out / "submissions" / team

    def submission_file(self, team: str) -> Path:
        return self.submission(team) / "submission.json"

    def evaluation_state(self, team: str) -> Path:
        return self.submission(team) / "evaluation-state.json"

    @property
    def evaluation_inputs(self) -> Path:
        """One folder per complete submission: the evaluator's input, and `medchallenge leaderboard`'s submissions."""
        return self.out / "evaluation-inputs"

    def evaluation_input(self, team: str) -> Path:
        return self.evaluation_inputs / team

    def scoring_records(self, team: str) -> Path:
        """The evaluator's records of a submission and its bootstrap replicates: written by its evaluation, reused
        by the leaderboard (`medchallenge leaderboard --records`)."""
        return self.out / "records" / team

    @property
    def leaderboard_state(self) -> Path:
        return self.out / "leaderboard-state.json"

    @property
    def file_hashes(self) -> Path:
        """Hashes of the submissions' files by (path, size, mtime), so a rerun does not read gigabytes again."""
        return self.out / "file-hashes.json"
