"""Benchmark: a challenge phase through the local backend (`medchallenge phase run`) with Docker.

A CPU-light algorithm image (tests/job_images/broken, BEHAVIOUR=ok: reads the CT, waits 0.5 s, writes its boxes) on
small synthetic TB CTs (64 x 64 x 16): jobs per minute with --jobs 1 and --jobs 2, of the whole phase and of its
tasks alone (the backend's part: the first task's start to the last one's end), with the load average; the overhead
per job beyond a bare `docker run` of the same image on the same input (the task's time against the container's
alone, and the whole phase's time per job: conversion, planning, scheduling, output checks, evaluation and
leaderboard included); and the time of a phase of 3 submissions x 20 cases with --jobs 2. Returns {"skipped":
reason} without Docker.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from phase_helpers import build_image, synth_cohort  # noqa: E402
IMAGE = "mc-test-h30-phase-bench"
CASES = 10
BIG_CASES = 20
BARE_RUNS = 5
COMMON = ["--cpus", "1", "--memory-gb", "1.5", "--time-limit", "300", "--bootstrap", "100", "--no-progress"]


def _build(behaviour: str) -> str:
    return build_image(ROOT, behaviour, IMAGE, "mc-test-h30-phase=bench")


def _cohort(folder: Path, cases: int) -> Path:
    return synth_cohort(folder, cases, seed=3)


def _phase(submissions: Path, cohort: Path, out: Path, jobs: int) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "medchallenge.cli", "phase", "run", "--challenge", "tb-caverns",
                           "--submissions", str(submissions), "--cases", str(cohort / "input"), "--ground-truth",
                           str(cohort / "ground_truth"), "--output", str(out), "--jobs", str(jobs), *COMMON],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"phase run failed: {(done.stdout + done.stderr)[-2000:]}")
    return time.perf_counter() - started


def _task_seconds(out: Path) -> tuple[list[float], list[float]]:
    """Each job's task time (process start to state written) and its container's time."""
    states = [json.loads(p.read_text()) for p in out.glob("jobs/*/state.json")]
    return [s["task_seconds"] for s in states], [s["wall_seconds"] for s in states]


def _tasks_span(out: Path) -> float:
    """Seconds from the first task's start to the last one's end: the backend's part of the phase, without the
    planning before it and the evaluation and leaderboard after it."""
    states = [json.loads(p.read_text()) for p in out.glob("jobs/*/state.json")]
    return (max(datetime.fromisoformat(s["finished"]) for s in states)
            - min(datetime.fromisoformat(s["started"]) for s in states)).total_seconds()


def _bare_docker_run(tag: str, out: Path) -> float:
    """Median seconds of `docker run --rm` of the image on one job's input as the phase gave it."""
    job = next(out.glob("jobs/*/run"))
    seconds = []
    for index in range(BARE_RUNS):
        output = out.parent / f"bare-output-{index}"
        output.mkdir(mode=0o777)
        output.chmod(0o777)
        started = time.perf_counter()
        subprocess.run(["docker", "run", "--rm", "--network", "none", "--mount",
                        f"type=bind,source={job / 'input'},target=/input,readonly", "--mount",
                        f"type=bind,source={output},target=/output", "--mount",
                        f"type=bind,source={job / 'model'},target=/opt/ml/model", tag], check=True,
                       capture_output=True)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def run() -> dict:
    if shutil.which("docker") is None or subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return {"skipped": "no Docker engine"}
    light = _build("ok")
    tags = {b: _build(b) for b in ("model-boxes", "crash")}
    with tempfile.TemporaryDirectory(prefix="bench_phase_") as tmp:
        tmp = Path(tmp)
        cohort = _cohort(tmp / "cohort", CASES)
        one = tmp / "one.toml"
        one.write_text(f'[[submission]]\nteam = "light"\nimage = "{light}"\n')
        load_before = os.getloadavg()
        seconds = {jobs: _phase(one, cohort, tmp / f"jobs-{jobs}", jobs) for jobs in (1, 2)}
        load_after = os.getloadavg()
        spans = {jobs: _tasks_span(tmp / f"jobs-{jobs}") for jobs in (1, 2)}
        task, container = _task_seconds(tmp / "jobs-1")
        bare = _bare_docker_run(light, tmp / "jobs-1")
        big_cohort = _cohort(tmp / "big-cohort", BIG_CASES)
        three = tmp / "three.toml"
        three.write_text("".join(f'[[submission]]\nteam = "{team}"\nimage = "{tag}"\n\n' for team, tag in
                                 (("light", light), ("other", tags["crash"]), ("third", tags["model-boxes"]))))
        big = _phase(three, big_cohort, tmp / "three", 2)
    per_job = {jobs: s / CASES for jobs, s in seconds.items()}
    overhead = statistics.median(task) - bare
    return {
        "image": f"{light} (CPU-light: reads the CT, waits 0.5 s)", "cases": CASES,
        "jobs_per_minute": {f"jobs_{jobs}": round(60 / s, 2) for jobs, s in per_job.items()},
        "speedup_jobs_2_over_1": round(seconds[1] / seconds[2], 2),
        "backend_jobs_per_minute": {f"jobs_{jobs}": round(60 * CASES / s, 2) for jobs, s in spans.items()},
        "backend_speedup_jobs_2_over_1": round(spans[1] / spans[2], 2),
        "load_average_1min_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
        "bare_docker_run_seconds": round(bare, 3),
        "task_seconds_median": round(statistics.median(task), 3),
        "container_seconds_median": round(statistics.median(container), 3),
        "overhead_per_job_seconds": round(overhead, 3),
        "overhead_share_of_a_30s_job": round(overhead / 30, 3),
        "phase_seconds_per_job_jobs_1": round(per_job[1], 3),
        "phase_overhead_per_job_seconds_jobs_1": round(per_job[1] - bare, 3),
        "phase_3x20_seconds_jobs_2": round(big, 1),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
