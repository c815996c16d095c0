"""What a finished task leaves in OUT/jobs/<job_id>/: `state.json` (the job's outcome, written last: its presence
means the job is over) and `result.json` (the job runner's JobResult with its socket values, which the evaluation
reads back). A status other than "succeeded" or "failed" (a backend's note of a task lost outside the job) means the
job is to be run again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..io import write_json_atomic
from ..jobs import JobLimits, JobResult, OutputResult, SocketValue
from ..sockets import Socket
from .layout import PhaseLayout

FINAL = ("succeeded", "failed")
# fields a backend may add to state.json (Slurm: why a task ended outside the job, how often it was requeued)
BACKEND_FIELDS = ("cause", "requeued", "slurm_job_id")


def read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        raise InputError(f"{path}: no {what} (run `medchallenge phase run` first)") from None


def folder_stamp(folder: Path) -> list:
    """What changes when a file of `folder` changes (names, sizes, modification times), without reading them."""
    return sorted([str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns]
                  for p in folder.rglob("*") if p.is_file())


class PhaseRecords:
    """One reading of a phase's records by one command: phase.json, each submission.json, each job's state and the
    ground truth's stamp read at most once, however many of the command's steps (a submission's status, the
    fingerprints of its evaluation and of the leaderboard) look at them. A phase of 50 x 500 jobs is 25,000 state
    files: each read costs a file open (docs/scale.md), so a command reads each once; a new PhaseRecords sees what
    changed since."""

    def __init__(self, layout: PhaseLayout):
        self.layout = layout
        self._phase: dict[str, Any] | None = None
        self._submissions: dict[str, dict[str, Any]] = {}
        self._states: dict[str, dict[str, Any] | None] = {}
        self._ground_truth: list | None = None

    @property
    def phase(self) -> dict[str, Any]:
        if self._phase is None:
            self._phase = read_json(self.layout.phase_file, "phase.json")
        return self._phase

    def submission(self, team: str) -> dict[str, Any]:
        if team not in self._submissions:
            self._submissions[team] = read_json(self.layout.submission_file(team), "submission.json")
        return self._submissions[team]

    def state(self, job_id: str) -> dict[str, Any] | None:
        if job_id not in self._states:
            self._states[job_id] = read_state(self.layout, job_id)
        return self._states[job_id]

    @property
    def ground_truth_stamp(self) -> list:
        if self._ground_truth is None:
            self._ground_truth = folder_stamp(Path(self.phase["ground_truth"]))
        return self._ground_truth


def read_state(layout: PhaseLayout, job_id: str) -> dict[str, Any] | None:
    try:
        state = json.loads(layout.state(job_id).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def is_final(state: dict[str, Any] | None) -> bool:
    return state is not None and state.get("status") in FINAL


def backend_notes(state: dict[str, Any]) -> list[str]:
    """The backend's fields of a job's state, as lines for the reports."""
    notes = []
    if state.get("cause"):
        notes.append(f"ended by {state['cause']}")
    if state.get("requeued"):
        notes.append(f"requeued {state['requeued']} time(s) by the scheduler")
    if state.get("slurm_cpu_seconds") is not None or state.get("slurm_max_rss_bytes") is not None:
        cpu, rss = state.get("slurm_cpu_seconds"), state.get("slurm_max_rss_bytes")
        notes.append("Slurm's accounting of the task (its runner: the container is not in the Slurm step): CPU "
                     + ("–" if cpu is None else f"{cpu:.1f} s") + ", MaxRSS "
                     + ("–" if rss is None else f"{rss / (1 << 20):.0f} MiB"))
    return notes


def _value_json(value: SocketValue, folder: Path) -> dict[str, Any]:
    content_file = None
    if value.content is not None:
        content_file = folder / "values" / str(value.pk)
        content_file.parent.mkdir(parents=True, exist_ok=True)
        content_file.write_bytes(value.content)
    return {"pk": value.pk, "socket": value.socket.slug, "value": value.value,
            "content_file": str(content_file) if content_file else None, "image_pk": value.image_pk,
            "image_name": value.image_name, "image_file": str(value.image_file) if value.image_file else None}


def _value(data: dict[str, Any], sockets: dict[str, Socket]) -> SocketValue:
    return SocketValue(data["pk"], sockets[data["socket"]], value=data["value"],
                       content=Path(data["content_file"]).read_bytes() if data["content_file"] else None,
                       image_pk=data["image_pk"], image_name=data["image_name"],
                       image_file=Path(data["image_file"]) if data["image_file"] else None)


def write_result(folder: Path, result: JobResult) -> None:
    write_json_atomic(folder / "result.json", {
        "job": result.to_json(), "limits": result.limits.to_json(),
        "inputs": [_value_json(v, folder) for v in result.inputs],
        "outputs": [{"socket": o.socket.slug, "error": o.error,
                     "value": _value_json(o.value, folder) if o.value is not None else None}
                    for o in result.outputs]})


def read_result(layout: PhaseLayout, job_id: str, sockets: dict[str, Socket]) -> JobResult:
    """The JobResult a task wrote, with its socket values (their files in OUT)."""
    data = json.loads(layout.result(job_id).read_text())
    job = data["job"]
    return JobResult(
        pk=job["pk"], status=job["status"], error=job["error"], exit_code=job["exit_code"],
        wall_seconds=job["wall_seconds"], peak_memory_bytes=job["peak_memory_bytes"], gpu_passed=job["gpu_passed"],
        used_gpu=job["used_gpu"], cpu_seconds=job.get("cpu_seconds"), gpu_seconds=job.get("gpu_seconds") or 0.0,
        inputs=[_value(v, sockets) for v in data["inputs"]],
        outputs=[OutputResult(sockets[o["socket"]], _value(o["value"], sockets) if o["value"] else None, o["error"])
                 for o in data["outputs"]],
        limits=JobLimits(**data["limits"]), stdout_tail=job["stdout_tail"], stderr_tail=job["stderr_tail"],
        notes=job["notes"], folder=layout.job(job_id))


def failed_before_running(layout: PhaseLayout, job_id: str, error: str, inputs: list[SocketValue],
                          limits: JobLimits) -> JobResult:
    """The JobResult of a job refused before its container ran (a root image, a bad model tarball): failed, as
    grand-challenge fails it."""
    return JobResult(pk=job_id, status="failed", error=error, exit_code=None, wall_seconds=0.0,
                     peak_memory_bytes=None, gpu_passed=False, used_gpu=None, inputs=inputs, outputs=[],
                     limits=limits, folder=layout.job(job_id))


def write_state(layout: PhaseLayout, job_id: str, state: dict[str, Any]) -> None:
    write_json_atomic(layout.state(job_id), state)
