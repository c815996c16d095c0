"""`medchallenge phase status OUT`: per submission how many jobs are done, running, queued and failed, its
evaluation, and what a person has to do: the refused submissions and why, the jobs' errors (the team's, as
grand-challenge reports them) and the jobs lost outside the job, which the next `phase run` runs again; and what the
finished jobs used (wall, CPU and GPU seconds, peak memory), per submission and for the phase."""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from ..errors import report_errors
from ..io import user_path
from ..jobs.usage import usage_totals
from .layout import PhaseLayout
from .leaderboard import leaderboard_current
from .records import PhaseRecords, is_final

MAX_ERRORS_SHOWN = 3


def _alive(marker: dict[str, Any]) -> bool:
    """Whether the process a marker names still runs (on another host: taken as running)."""
    if marker.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(marker["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return True


def _marker(path: Path) -> dict[str, Any] | None:
    try:
        marker = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def jobs_in_slurm(layout: PhaseLayout) -> dict[str, str]:
    """The jobs tasks of recorded Slurm arrays hold (phase.slurm.phase_in_slurm); none without the Slurm backend."""
    try:
        from .slurm import phase_in_slurm
    except ImportError:
        return {}
    return phase_in_slurm(layout)


def job_status(records: PhaseRecords, job_id: str, run_active: bool,
               in_slurm: dict[str, str]) -> tuple[str, dict[str, Any] | None]:
    """succeeded, failed, running, queued (a run is active, or a task of a Slurm array holds it: `in_slurm`) or
    not-run, and the job's state."""
    state = records.state(job_id)
    if is_final(state):
        return state["status"], state
    if job_id in in_slurm:
        return in_slurm[job_id], state
    running = _marker(records.layout.running(job_id))
    if running is not None and _alive(running):
        return "running", state
    return ("queued" if run_active else "not-run"), state


def submission_status(records: PhaseRecords, team: str, run_active: bool, finished: dict[str, dict[str, Any]],
                      in_slurm: dict[str, str]) -> dict[str, Any]:
    """The submission's counts, errors, lost jobs, evaluation and what its finished jobs used; their states are
    added to `finished` (by job id: a job two submissions share is one job of the phase)."""
    submission = records.submission(team)
    counts: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    lost: Counter[str] = Counter()
    own: dict[str, dict[str, Any]] = {}
    for job in submission["jobs"]:
        status, state = job_status(records, job["job_id"], run_active, in_slurm)
        counts[status] += 1
        if is_final(state):
            own[job["job_id"]] = state
        if status == "failed":
            errors[state.get("error") or "failed"] += 1
        elif state is not None and status in ("not-run", "queued"):
            cause = state.get("cause") or state.get("status") or "unknown"
            lost[f"{cause}: {state['error']}" if state.get("error") else cause] += 1
    evaluation = _marker(records.layout.evaluation_state(team)) or {"status": "not evaluated"}
    finished.update(own)
    return {"team": team, "refused": submission["refused"], "jobs": len(submission["jobs"]),
            **{k: counts[k] for k in ("succeeded", "failed", "running", "queued", "not-run")},
            "errors": errors.most_common(), "lost": dict(lost), "evaluation": evaluation.get("status"),
            "evaluation_error": evaluation.get("error"), "usage": usage_totals(own.values())}


def phase_status(layout: PhaseLayout) -> dict[str, Any]:
    """Each submission's status, and what the phase's finished jobs used in all (`usage`); the jobs that tasks of
    Slurm arrays still hold (after a Ctrl-C of `phase run --backend slurm`) are running or queued. Every record is
    read once."""
    records = PhaseRecords(layout)
    phase = records.phase
    run = _marker(layout.out / "run.json")
    run_active = run is not None and run.get("finished") is None and _alive(run)
    in_slurm = jobs_in_slurm(layout)
    finished: dict[str, dict[str, Any]] = {}
    submissions = [submission_status(records, team, run_active, finished, in_slurm) for team in phase["submissions"]]
    complete = all(s["refused"] or s["succeeded"] + s["failed"] == s["jobs"] for s in submissions)
    return {"challenge": phase["challenge"], "run_active": run_active, "in_slurm": len(in_slurm),
            "submissions": submissions,
            "usage": usage_totals(finished.values()), "complete": complete,
            "leaderboard": str(layout.out / "leaderboard.html") if complete and leaderboard_current(records) else None}


def usage_line(usage: dict[str, Any]) -> str:
    """What finished jobs used, in one line."""
    def seconds(value: float | None) -> str:
        return "–" if value is None else f"{value:.1f} s"

    peak = usage["max_peak_memory_bytes"]
    return (f"{usage['jobs']} finished job(s) used: wall {seconds(usage['wall_seconds'])}, CPU "
            f"{seconds(usage['cpu_seconds'])}, GPU {seconds(usage['gpu_seconds'])}, peak memory "
            + ("–" if peak is None else f"{peak / (1 << 20):.0f} MiB"))


def render(status: dict[str, Any], out: Path) -> str:
    lines = [f"{'submission':<24} {'jobs':>5} {'done':>5} {'failed':>6} {'running':>7} {'queued':>6} "
             f"{'not run':>7}  evaluation"]
    actions = []
    for s in status["submissions"]:
        if s["refused"]:
            lines.append(f"{s['team']:<24} refused: {s['refused']}")
            actions.append(f"{s['team']}: fix its image or model and run again (refused before any job)")
            continue
        lines.append(f"{s['team']:<24} {s['jobs']:>5} {s['succeeded']:>5} {s['failed']:>6} {s['running']:>7} "
                     f"{s['queued']:>6} {s['not-run']:>7}  {s['evaluation']}"
                     + (f": {s['evaluation_error']}" if s["evaluation_error"] else ""))
        for error, count in s["errors"][:MAX_ERRORS_SHOWN]:
            lines.append(f"    {count} failed (the team's result): {error[:200]}")
        if len(s["errors"]) > MAX_ERRORS_SHOWN:
            lines.append(f"    ... and {len(s['errors']) - MAX_ERRORS_SHOWN} other error(s): "
                         f"{out / 'submissions' / s['team'] / 'report.html'}")
        for cause, count in s["lost"].items():
            lines.append(f"    {count} lost outside the job ({cause}); the next `phase run` runs them again")
        if s["usage"]["jobs"]:
            lines.append(f"    {usage_line(s['usage'])}")
        if s["not-run"]:
            actions.append(f"{s['team']}: {s['not-run']} job(s) not run: `medchallenge phase run` again")
    if status["usage"]["jobs"]:
        lines.append(f"phase: {usage_line(status['usage'])} (a job two submissions share counted once)")
    if status["leaderboard"]:
        lines.append(f"leaderboard: {status['leaderboard']}")
    elif status["complete"]:
        actions.append("every job is over but the leaderboard is not current: `medchallenge phase run` again")
    elif status["run_active"]:
        lines.append("a `phase run` is in progress")
    elif status["in_slurm"]:
        lines.append(f"{status['in_slurm']} job(s) still in Slurm from an earlier run (running or queued above): "
                     "`medchallenge phase run` again waits for them and submits only the rest")
    return "\n".join([*lines, *(f"to do: {a}" for a in actions)])


@report_errors
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="medchallenge phase status", description=__doc__)
    parser.add_argument("output", type=user_path, help="the phase's output folder")
    parser.add_argument("--json", action="store_true", help="print the status as JSON")
    args = parser.parse_args(argv)
    layout = PhaseLayout.of(args.output)
    status = phase_status(layout)
    print(json.dumps(status, indent=1) if args.json else render(status, layout.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
