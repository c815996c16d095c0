"""Benchmark: a phase's bookkeeping at full size (issue 42, section 3), without running a container.

An object-CXR phase of TEAMS submissions x CASES radiographs (128 px synthetic JPEGs, converted once by panimg)
plus one submission refused at planning (an archive that is not one). Each submission is a small `docker save`
archive made here (a valid configuration and one empty layer: its digest is proven from its bytes, no engine needed).
Every job is then recorded as run: the result.json and state.json a finished task leaves, written with the phase's
own record writers (medchallenge.phase.records), the outputs made from the ground truth with noise that grows with
the team's number, one team with every job failed and one with a tenth failed. Measured, each step in its own
process (time, and its peak resident memory from the kernel's rusage):

- planning: the case hashes, the archives' digests, TEAMS x CASES task specs and submission.json, phase.json (the
  conversion of the cases apart: `convert_seconds`), then planning again with everything in place;
- the evaluations: `python -m medchallenge.phase.evaluate OUT TEAM` per submission, from their records;
- the leaderboard: `python -m medchallenge.phase.leaderboard OUT` (bootstrap RESAMPLES, every pairwise test);
- `medchallenge phase run` again, with nothing left to do, and `medchallenge phase status OUT` (text and --json);
- what one file read of OUT costs here (open, read, parse a state.json, the page cache warm), and how many files
  each command reads.

The load average is reported beside the times: the machine's cores may be shared. `TEAMS`, `CASES` and
`RESAMPLES` come from MEDCHALLENGE_SCALE_TEAMS, _CASES, _RESAMPLES (default 50, 500, 1000);
MEDCHALLENGE_SCALE_KEEP=DIR keeps the phase there.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
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


def image_archive(path: Path, salt: str) -> None:
    """A `docker save` archive (Docker's legacy layout) of a one-layer image whose configuration names `salt`:
    its ID is the sha256 of its configuration, its layer's diff ID the sha256 of the layer's tar."""
    layer_buffer = io.BytesIO()
    with tarfile.open(fileobj=layer_buffer, mode="w") as layer_tar:
        data = f"{salt}\n".encode()
        info = tarfile.TarInfo("team.txt")
        info.size = len(data)
        layer_tar.addfile(info, io.BytesIO(data))
    layer = layer_buffer.getvalue()
    layer_hex = hashlib.sha256(layer).hexdigest()
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"User": "1000", "Labels": {"team": salt}},
                         "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_hex}"]}, "history": []},
                        separators=(",", ":")).encode()
    config_hex = hashlib.sha256(config).hexdigest()
    manifest = json.dumps([{"Config": f"{config_hex}.json", "RepoTags": None,
                            "Layers": [f"{layer_hex}/layer.tar"]}]).encode()
    with tarfile.open(path, "w") as tar:
        for name, content in ((f"{layer_hex}/layer.tar", layer), (f"{config_hex}.json", config),
                              ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))


def cohort(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "medchallenge.synth", "object-cxr-images", "--out", str(folder), "--images",
                    str(CASES), "--size", str(IMAGE_PX), "--seed", "42"], check=True, capture_output=True, env=_env())
    return folder


def objects(ground_truth: Path) -> dict[str, list[tuple[float, float]]]:
    """The centre of each foreign object per image (the annotation's coordinates averaged)."""
    centres = {}
    with open(ground_truth / "annotations.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            shapes = [list(map(float, s.split()[1:])) for s in row["annotation"].split(";") if s.strip()]
            centres[row["image_name"]] = [(float(np.mean(s[0::2])), float(np.mean(s[1::2]))) for s in shapes]
    return centres


def submissions(folder: Path) -> Path:
    """TEAMS archives and a refused one, and the submissions file naming them."""
    folder.mkdir(parents=True)
    lines = []
    for team in range(TEAMS):
        image_archive(folder / f"team-{team:03d}.tar", f"team-{team:03d}")
        lines.append(f'[[submission]]\nteam = "team-{team:03d}"\nimage = "team-{team:03d}.tar"\n')
    (folder / "refused.tar").write_bytes(b"not an archive")
    lines.append('[[submission]]\nteam = "refused"\nimage = "refused.tar"\n')
    (folder / "submissions.toml").write_text("\n".join(lines))
    return folder / "submissions.toml"


def record_jobs(out: Path, centres: dict[str, list[tuple[float, float]]]) -> int:
    """The records every planned job leaves when it is over, written with the phase's record writers: team k's
    points are the objects' centres found with probability 1 - k / (2 TEAMS) and jittered, plus a false one; the
    last team's jobs all failed, the one before's every tenth."""
    from medchallenge.jobs import JobLimits, JobResult, OutputResult, SocketValue
    from medchallenge.phase.layout import PhaseLayout
    from medchallenge.phase.records import failed_before_running, write_result, write_state
    from medchallenge.phase.task import STATE_FIELDS
    from medchallenge.sockets import Socket

    layout = PhaseLayout.of(out)
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    written = 0
    for team in range(TEAMS):
        submission = json.loads(layout.submission_file(f"team-{team:03d}").read_text())
        rng = np.random.default_rng(team)
        found = 1 - team / (2 * TEAMS)
        for index, job in enumerate(submission["jobs"]):
            spec = json.loads(layout.task(job["job_id"]).read_text())
            sockets = {s["slug"]: Socket(**s) for s in spec["sockets"]}
            value = spec["inputs"][0]
            inputs = [SocketValue(value["pk"], sockets[value["socket"]], image_pk=value["image_pk"],
                                  image_name=value["image_name"], image_file=Path(value["image_file"]))]
            limits = JobLimits(**spec["limits"])
            folder = layout.job(job["job_id"])
            folder.mkdir(parents=True, exist_ok=True)
            if team == TEAMS - 1 or (team == TEAMS - 2 and index % 10 == 0):
                result = failed_before_running(layout, job["job_id"], "Time limit exceeded", inputs, limits)
            else:
                shown = [(x + rng.normal(0, 2), y + rng.normal(0, 2)) for x, y in centres[job["case"]]
                         if rng.random() < found]
                points = [{"name": f"foreign object {k}", "point": [x, y, 0.0],
                           "probability": round(0.5 + rng.random() / 2, 4)}
                          for k, (x, y) in enumerate(shown)]
                points.append({"name": "false", "point": [float(rng.uniform(0, IMAGE_PX)),
                                                          float(rng.uniform(0, IMAGE_PX)), 0.0],
                               "probability": round(rng.random() / 2, 4)})
                likelihood = float(np.clip((0.6 if centres[job["case"]] else 0.4) + rng.normal(0, 0.1 + team / TEAMS),
                                           0, 1))
                pk = spec["pk_base"]
                outputs = [
                    OutputResult(sockets["foreign-object-likelihood"],
                                 SocketValue(pk + 1, sockets["foreign-object-likelihood"], value=round(likelihood, 4)),
                                 None),
                    OutputResult(sockets["foreign-objects"],
                                 SocketValue(pk + 2, sockets["foreign-objects"], content=json.dumps(
                                     {"name": "Foreign objects", "type": "Multiple points", "points": points,
                                      "version": {"major": 1, "minor": 0}}).encode()), None)]
                result = JobResult(pk=job["job_id"], status="succeeded", error=None, exit_code=0,
                                   wall_seconds=float(rng.uniform(20, 40)), peak_memory_bytes=int(3e8),
                                   gpu_passed=False, used_gpu=None, inputs=inputs, outputs=outputs, limits=limits,
                                   cpu_seconds=float(rng.uniform(15, 30)), folder=folder)
            write_result(folder, result)
            data = result.to_json()
            write_state(layout, job["job_id"], {**{k: data[k] for k in STATE_FIELDS}, "cause": None,
                                                "task_seconds": data["wall_seconds"] + 2, "host": "bench",
                                                "started": now, "finished": now})
            written += 1
    return written


def file_read_cost(out: Path) -> dict:
    """What reading one record of OUT costs here: open, read and parse every state.json once (warm page cache)."""
    paths = sorted(out.glob("jobs/*/state.json"))
    started = time.perf_counter()
    for path in paths:
        json.loads(path.read_text())
    seconds = time.perf_counter() - started
    return {"files": len(paths), "microseconds_per_file": round(1e6 * seconds / len(paths), 1)}


def run() -> dict:
    keep = os.environ.get("MEDCHALLENGE_SCALE_KEEP")
    tmp = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="bench_phase_scale_"))
    shutil.rmtree(tmp / "out", ignore_errors=True)
    try:
        data = cohort(tmp / "cohort") if not (tmp / "cohort" / "input").is_dir() else tmp / "cohort"
        shutil.rmtree(tmp / "submissions", ignore_errors=True)
        toml = submissions(tmp / "submissions")
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
        jobs = record_jobs(out, objects(data / "ground_truth"))
        record_seconds = time.perf_counter() - started
        load.append(os.getloadavg()[0])
        evaluations = [run_measured([py, "-m", "medchallenge.phase.evaluate", str(out), f"team-{team:03d}"])
                       for team in range(TEAMS)]
        load.append(os.getloadavg()[0])
        leaderboard = run_measured([py, "-m", "medchallenge.phase.leaderboard", str(out)])
        load.append(os.getloadavg()[0])
        rerun = run_measured([py, "-m", "medchallenge.cli", "phase", "run", *common])
        if "0 job(s) to run" not in rerun["stdout"] and "leaderboard:" not in rerun["stdout"]:
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
