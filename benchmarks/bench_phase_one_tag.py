"""Benchmark: many teams on one tag (issue 37, item 11): TEAMS submissions naming the same image archive, so the
same jobs, in an object-CXR phase of CASES radiographs (128 px), every job recorded as run (tests/phase_records.py,
no container). Measured as `phase run` does it, each step in its own process: planning, the one evaluation step
`phase run` submits for the teams with the same jobs (`python -m medchallenge.phase.evaluate OUT TEAM...`: the
first scored, the others given a copy), and the leaderboard (bootstrap RESAMPLES, every pairwise test). For
comparison, one team's evaluation alone. TEAMS, CASES and RESAMPLES from MEDCHALLENGE_ONE_TAG_TEAMS, _CASES,
_RESAMPLES (default 100, 20, 1000: the configuration the issue measured, 295 s before); MEDCHALLENGE_ONE_TAG_KEEP=DIR
keeps the phase there."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from bench_phase_scale import IMAGE_PX, PLAN, run_measured

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from phase_records import image_archive, object_centres, record_jobs  # noqa: E402

TEAMS = int(os.environ.get("MEDCHALLENGE_ONE_TAG_TEAMS", "100"))
CASES = int(os.environ.get("MEDCHALLENGE_ONE_TAG_CASES", "20"))
RESAMPLES = int(os.environ.get("MEDCHALLENGE_ONE_TAG_RESAMPLES", "1000"))


def run() -> dict:
    keep = os.environ.get("MEDCHALLENGE_ONE_TAG_KEEP")
    tmp = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="bench_phase_one_tag_"))
    if keep:
        shutil.rmtree(tmp, ignore_errors=True)
    py = sys.executable
    try:
        run_measured([py, "-m", "medchallenge.synth", "object-cxr-images", "--out", str(tmp / "cohort"), "--images",
                      str(CASES), "--size", str(IMAGE_PX), "--seed", "42"])
        (tmp / "submissions").mkdir()
        image_archive(tmp / "submissions" / "shared.tar", "shared")
        teams = [f"team-{k:03d}" for k in range(TEAMS)]
        toml = tmp / "submissions" / "submissions.toml"
        toml.write_text("\n".join(f'[[submission]]\nteam = "{t}"\nimage = "shared.tar"\n' for t in teams))
        out = tmp / "out"
        common = ["--challenge", "object-cxr", "--submissions", str(toml), "--cases", str(tmp / "cohort" / "input"),
                  "--ground-truth", str(tmp / "cohort" / "ground_truth"), "--output", str(out), "--bootstrap",
                  str(RESAMPLES), "--no-progress"]
        load = [os.getloadavg()[0]]
        plan = run_measured([py, "-c", PLAN, *common])
        jobs = record_jobs(out, teams[0], object_centres(tmp / "cohort" / "ground_truth"), 0.8, 1, IMAGE_PX)
        evaluations = run_measured([py, "-m", "medchallenge.phase.evaluate", str(out), *teams])
        load.append(os.getloadavg()[0])
        leaderboard = run_measured([py, "-m", "medchallenge.phase.leaderboard", str(out)])
        board = json.loads((out / "leaderboard.json").read_text())
        shutil.rmtree(out / "records" / teams[0])
        (out / "submissions" / teams[0] / "evaluation-state.json").unlink()
        one = run_measured([py, "-m", "medchallenge.phase.evaluate", str(out), teams[0]])
        load.append(os.getloadavg()[0])
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    total = plan["seconds"] + evaluations["seconds"] + leaderboard["seconds"]
    return {
        "teams": TEAMS, "cases": CASES, "jobs_shared": jobs, "resamples": RESAMPLES,
        "load_average_1min": [round(x, 2) for x in load], "cpus": len(os.sched_getaffinity(0)),
        "plan_seconds": plan["seconds"], "evaluations_seconds": evaluations["seconds"],
        "evaluations_peak_rss_mib": evaluations["peak_rss_mib"],
        "evaluation_seconds_per_team": round(evaluations["seconds"] / TEAMS, 3),
        "one_team_evaluation_seconds": one["seconds"],
        "leaderboard_seconds": leaderboard["seconds"], "leaderboard_peak_rss_mib": leaderboard["peak_rss_mib"],
        "leaderboard_teams_ranked": len(board["teams"]),
        "plan_evaluations_leaderboard_seconds": round(total, 1),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
