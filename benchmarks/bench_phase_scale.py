"""Benchmark: a phase's bookkeeping at full size (issue 42, section 3), without running a container.

An object-CXR phase of TEAMS submissions x CASES radiographs (128 px synthetic JPEGs, converted once by panimg)
plus one submission refused at planning (an archive that is not one). Each submission is a small `docker save`
archive made here (tests/phase_records.py: its digest is proven from its bytes, no engine needed). Every job is then
recorded as run: the result.json and state.json a finished task leaves, written with the phase's own record writers
(medchallenge.phase.records), the outputs made from the ground truth with noise that grows with the team's number,
one team with every job failed and one with a tenth failed. Measured, each step in its own process (time, and its
peak resident memory from the kernel's rusage):

- planning: the case hashes, the archives' digests, TEAMS x CASES task specs and submission.json, phase.json (the
  conversion of the cases apart: `convert_cases_seconds`), then planning again with everything in place;
- the evaluations: `python -m medchallenge.phase.evaluate OUT TEAM` per submission, from their records;
- the leaderboard: `python -m medchallenge.phase.leaderboard OUT` (bootstrap RESAMPLES, every pairwise test);
- `medchallenge phase run` again, with nothing left to do, and `medchallenge phase status OUT` (text and --json);
- what one file read of OUT costs here (open, read, parse a state.json, the page cache warm).

The load average is reported beside the times: the machine's cores may be shared. `TEAMS`, `CASES` and
`RESAMPLES` come from MEDCHALLENGE_SCALE_TEAMS, _CASES, _RESAMPLES (default 50, 500, 1000);
MEDCHALLENGE_SCALE_KEEP=DIR keeps the phase there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from phase_records import object_centres, record_jobs, submissions_file  # noqa: E402

TEAMS = int(os.environ.get("MEDCHALLENGE_SCALE_TEAMS", "50"))
CASES = int(os.environ.get("MEDCHALLENGE_SCALE_CASES", "500"))
RESAMPLES = int(os.environ.get("MEDCHALLENGE_SCALE_RESAMPLES", "1000"))
IMAGE_PX = 128
GOALS_S = {"rerun_nothing_to_do": 10, "status_text": 10, "status_json": 10, "leaderboard": 120, "plan": 120}
GOAL_LEADERBOARD_BYTES = 2 << 30
# the planning step: the phase's own `plan` of `phase run`, with its arguments, in a process of its own
PLAN = ("import sys; from medchallenge.phase.run import build_parser, plan; from medchallenge.phase.layout import "
        "PhaseLayout; a = build_parser().parse_args(sys.argv[1:]); plan(a, PhaseLayout.of(a.output))")


def _env() -> dict[str, str]:
    shared = str(ROOT / "shared")
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{shared}{os.pathsep}{path}" if path else shared}


def run_measured(command: list[str]) -> dict:
    """Seconds and peak resident memory of a command (its own, from wait4 in a small Python that starts it);
    RuntimeError when it fails."""
    probe = ("import json, os, subprocess, sys, time; t = time.perf_counter(); p = subprocess.Popen(sys.argv[1:], "
             "stdout=subprocess.PIPE, stderr=subprocess.STDOUT); out = p.stdout.read(); _, s, u = os.wait4(p.pid, 0); "
             "sys.stdout.write(out.decode(errors='replace')); print(json.dumps({'seconds': time.perf_counter() - t, "
             "'rss': u.ru_maxrss * 1024, 'status': os.waitstatus_to_exitcode(s)}))")
    done = subprocess.run([sys.executable, "-c", probe, *command], capture_output=True, text=True, env=_env())
    *output, last = done.stdout.rstrip("\n").split("\n")
    facts = json.loads(last)
    if facts["status"] != 0:
        raise RuntimeError(f"{' '.join(command[:6])}... failed ({facts['status']}): {''.join(output)[-2000:]}")
    return {"seconds": round(facts["seconds"], 2), "peak_rss_mib": round(facts["rss"] / (1 << 20), 1),
            "stdout": "\n".join(output)}


def file_read_cost(out: Path) -> dict:
    """What reading one record of OUT costs here: open, read and parse every state.json once (warm page cache)."""
    paths = sorted(out.glob("jobs/*/state.json"))
    started = time.perf_counter()
    for path in paths:
        json.loads(path.read_text())
    seconds = time.perf_counter() - started
    return {"files": len(paths), "microseconds_per_file": round(1e6 * seconds / len(paths), 1)}


def cohort(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "medchallenge.synth", "object-cxr-images", "--out", str(folder), "--images",
                    str(CASES), "--size", str(IMAGE_PX), "--seed", "42"], check=True, capture_output=True, env=_env())
    return folder


def record_all(out: Path, ground_truth: Path) -> int:
    """Every team's jobs recorded as run: team k finds each object with probability 1 - k / (2 TEAMS); the last
    team's jobs all failed, the one before's every tenth."""
    centres = object_centres(ground_truth)
    return sum(record_jobs(out, f"team-{k:03d}", centres, 1 - k / (2 * TEAMS), k, IMAGE_PX,
                           failed_every=1 if k == TEAMS - 1 else 10 if k == TEAMS - 2 else 0) for k in range(TEAMS))


def run() -> dict:
    keep = os.environ.get("MEDCHALLENGE_SCALE_KEEP")
    tmp = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="bench_phase_scale_"))
    shutil.rmtree(tmp / "out", ignore_errors=True)
    try:
        data = cohort(tmp / "cohort") if not (tmp / "cohort" / "input").is_dir() else tmp / "cohort"
        shutil.rmtree(tmp / "submissions", ignore_errors=True)
        toml = submissions_file(tmp / "submissions", [f"team-{k:03d}" for k in range(TEAMS)], ["refused"])
        out = tmp / "out"
        common = ["--challenge", "object-cxr", "--submissions", str(toml), "--cases", str(data / "input"),
                  "--ground-truth", str(data / "ground_truth"), "--output", str(out), "--bootstrap", str(RESAMPLES),
                  "--no-progress"]
        py = sys.executable
        load = [os.getloadavg()[0]]
        one = tmp / "one.toml"
        one.write_text('[[submission]]\nteam = "team-000"\nimage = "submissions/team-000.tar"\n')
        convert = run_measured([py, "-c", PLAN, *common[:2], "--submissions", str(one), *common[4:]])
        shutil.rmtree(out / "tasks")
        shutil.rmtree(out / "submissions")
        plan = run_measured([py, "-c", PLAN, *common])
        replan = run_measured([py, "-c", PLAN, *common])
        started = time.perf_counter()
        jobs = record_all(out, data / "ground_truth")
        record_seconds = time.perf_counter() - started
        load.append(os.getloadavg()[0])
        evaluations = [run_measured([py, "-m", "medchallenge.phase.evaluate", str(out), f"team-{team:03d}"])
                       for team in range(TEAMS)]
        load.append(os.getloadavg()[0])
        leaderboard = run_measured([py, "-m", "medchallenge.phase.leaderboard", str(out)])
        load.append(os.getloadavg()[0])
        rerun = run_measured([py, "-m", "medchallenge.cli", "phase", "run", *common])
        if "0 job(s) to run" not in rerun["stdout"]:
            raise RuntimeError(f"the rerun did something: {rerun['stdout'][-2000:]}")
        status_text = run_measured([py, "-m", "medchallenge.cli", "phase", "status", str(out)])
        status_json = run_measured([py, "-m", "medchallenge.cli", "phase", "status", str(out), "--json"])
        load.append(os.getloadavg()[0])
        reads = file_read_cost(out)
        board = json.loads((out / "leaderboard.json").read_text())
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    seconds = [e["seconds"] for e in evaluations]
    steps = {"convert_cases": convert, "plan": plan, "plan_again": replan, "leaderboard": leaderboard,
             "rerun_nothing_to_do": rerun, "status_text": status_text, "status_json": status_json}
    result = {
        "teams": TEAMS, "cases": CASES, "jobs": jobs, "resamples": RESAMPLES, "challenge": "object-cxr",
        "image_px": IMAGE_PX, "load_average_1min": [round(x, 2) for x in load],
        "cpus": len(os.sched_getaffinity(0)),
        **{f"{name}_seconds": step["seconds"] for name, step in steps.items()},
        **{f"{name}_peak_rss_mib": step["peak_rss_mib"] for name, step in steps.items()},
        "record_jobs_seconds": round(record_seconds, 1),
        "evaluations_seconds_total": round(sum(seconds), 1),
        "evaluation_seconds_median": round(float(np.median(seconds)), 2),
        "evaluation_seconds_max": round(max(seconds), 2),
        "evaluation_peak_rss_mib_max": max(e["peak_rss_mib"] for e in evaluations),
        "leaderboard_teams_ranked": len(board["teams"]),
        "state_file_read": reads,
    }
    result["goals_met"] = {name: steps[name]["seconds"] < goal for name, goal in GOALS_S.items()}
    result["goals_met"]["leaderboard_memory"] = leaderboard["peak_rss_mib"] * (1 << 20) < GOAL_LEADERBOARD_BYTES
    return result


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
