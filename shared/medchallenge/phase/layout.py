"""Where a phase keeps everything under its output folder OUT (one place that names the paths)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


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

    def image_check(self, digest: str) -> Path:
        """The notes of an image's upload checks, kept by its digest once one task passed them (the outcome is the
        image's: the other tasks do not check it again)."""
        return self.out / "images" / f"{digest.removeprefix('sha256:')}.json"

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
