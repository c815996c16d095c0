"""`medchallenge phase run` with real Docker through the local backend: three submissions (a working image given as a
tag, a working image given as a `docker save` archive with its model tarball, a broken image) × four synthetic CTs,
then rerun as an organiser reruns it. The tests run in order on one phase folder, each after the previous one's
state: first run, rerun, lost jobs, a new submission."""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
import signal
import subprocess
import sys
import tarfile
import time
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from medchallenge.cli import main as medchallenge
from medchallenge.phase import cases as phase_cases
from medchallenge.preflight import main as preflight

IMAGE = "mc-test-h30-phase"
BEHAVIOURS = ("ok", "model-boxes", "crash", "slow")
CRASH = "The algorithm exited with status 1: RuntimeError: the model file weights.onnx is missing"
SUBMISSIONS = """
[[submission]]
team = "alpha"
image = "mc-test-h30-phase:ok"

[[submission]]
team = "beta"
image = "beta.tar.gz"
model = "oracle.tar.gz"

[[submission]]
team = "gamma"
image = "mc-test-h30-phase:crash"
"""


def model_tarball(path: Path, boxes: dict) -> None:
    """A model for the `model-boxes` image: the boxes it outputs per case image."""
    data = json.dumps(boxes).encode()
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("boxes.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def ground_truth_boxes(ground_truth: Path) -> dict[str, list[dict]]:
    boxes: dict[str, list[dict]] = {}
    with open(ground_truth / "gt_boxes.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            corners = [int(row[k]) for k in ("bbox_X1", "bbox_Y1", "bbox_Z1", "bbox_X2", "bbox_Y2", "bbox_Z2")]
            boxes.setdefault(f"{row['id']}.nii.gz", []).append({"voxel_bbox": corners, "probability": 0.9})
    return boxes


@pytest.fixture(scope="module")
def phase(docker_compose, repo, tmp_path_factory) -> SimpleNamespace:
    root = tmp_path_factory.mktemp("phase")
    for behaviour in BEHAVIOURS:  # labelled: images of their own, not those of the pre-flight tests
        subprocess.run(["docker", "build", "--quiet", "--build-arg", f"BEHAVIOUR={behaviour}", "--label",
                        "mc-test-h30-phase=phase", "--tag", f"{IMAGE}:{behaviour}",
                        str(repo / "tests" / "job_images" / "broken")], check=True, capture_output=True)
    # four CTs with caverns big enough for this size: a 320 mm chest in 64 x 64 x 16 voxels
    subprocess.run([sys.executable, "-m", "medchallenge.synth", "tb-caverns", "--out", str(root / "cohort"),
                    "--cases", "4", "--shape", "64", "64", "16", "--spacing", "5", "5", "16", "--seed", "1"],
                   check=True, capture_output=True)
    submissions = root / "submissions"
    submissions.mkdir()
    # beta's upload: an image of its own (a label makes its digest unique), saved, then removed from the engine,
    # so that the phase loads it from the archive
    subprocess.run(["docker", "build", "--quiet", "--build-arg", "BEHAVIOUR=model-boxes", "--label",
                    f"mc-test-h30-phase={root.name}", "--tag", f"{IMAGE}:beta-upload",
                    str(repo / "tests" / "job_images" / "broken")], check=True, capture_output=True)
    saved = subprocess.run(["docker", "save", f"{IMAGE}:beta-upload"], check=True, capture_output=True).stdout
    (submissions / "beta.tar.gz").write_bytes(gzip.compress(saved, compresslevel=1))
    subprocess.run(["docker", "rmi", f"{IMAGE}:beta-upload"], check=True, capture_output=True)
    oracle = ground_truth_boxes(root / "cohort" / "ground_truth")
    model_tarball(submissions / "oracle.tar.gz", oracle)
    (submissions / "phase.toml").write_text(SUBMISSIONS)
    return SimpleNamespace(root=root, out=root / "out", cohort=root / "cohort", submissions=submissions,
                           oracle=oracle, conversions=[])


def run_phase(phase: SimpleNamespace, monkeypatch, *extra: str) -> int:
    """`medchallenge phase run` in this process, counting the cases it converts."""
    converted = []

    def counting(case_file: Path, store: Path):
        converted.append(case_file.name)
        return upload_case(case_file, store)

    upload_case = phase_cases.upload_case
    monkeypatch.setattr(phase_cases, "upload_case", counting)
    status = medchallenge(["phase", "run", "--challenge", "tb-caverns", "--submissions",
                           str(phase.submissions / "phase.toml"), "--cases", str(phase.cohort / "input"),
                           "--ground-truth", str(phase.cohort / "ground_truth"), "--output", str(phase.out),
                           "--jobs", "2", "--cpus", "1", "--memory-gb", "1.5", "--time-limit", "120",
                           "--bootstrap", "50", "--no-progress", *extra])
    phase.conversions = converted
    return status


def states(out: Path) -> dict[str, tuple[int, dict]]:
    """Every job's state.json: (modification time, content)."""
    return {p.parent.name: (p.stat().st_mtime_ns, json.loads(p.read_text())) for p in out.glob("jobs/*/state.json")}


def submission_jobs(out: Path, team: str) -> list[str]:
    return [job["job_id"] for job in json.loads((out / "submissions" / team / "submission.json").read_text())["jobs"]]


def mtime(path: Path) -> int:
    return path.stat().st_mtime_ns


def test_a_phase_runs_every_submission_on_every_case_and_ranks_them(phase, monkeypatch, capsys):
    assert run_phase(phase, monkeypatch) == 0
    assert sorted(phase.conversions) == ["TST_001.nii.gz", "TST_002.nii.gz", "TST_003.nii.gz", "TST_004.nii.gz"]
    assert len(list(phase.out.glob("cases/*/case.json"))) == 4 and len(list(phase.out.glob("tasks/*.json"))) == 12
    board = json.loads((phase.out / "leaderboard.json").read_text())
    assert board["metric"] == "map" and [row["team"] for row in board["teams"]][0] == "beta"
    assert board["failed"] == {} and [row["team"] for row in board["teams"]] == ["beta", "alpha"]
    assert board["not_ranked"] == [{"team": "gamma", "reason": "every job failed (4 of 4)", "jobs": 4, "jobs_failed": 4,
                                    "warnings": [], "report": "submissions/gamma/report.html"}]
    assert board["teams"][0]["value"] == 1.0 and board["teams"][0]["rank"] == 1  # the oracle model's boxes
    for row in board["teams"]:  # each submission's evaluation, and its report, say what the leaderboard says
        metrics = json.loads((phase.out / "submissions" / row["team"] / "evaluation" / "metrics.json").read_text())
        assert metrics["aggregates"] == row["aggregates"] and metrics["meta"]["bootstrap"]["map"]["n"] == 50
        report = json.loads((phase.out / "submissions" / row["team"] / "report.json").read_text())
        assert report["team"] == row["team"] and report["evaluation"]["aggregates"] == row["aggregates"]
        assert [job["case"] for job in report["jobs"]] == sorted(phase.oracle | {"TST_002.nii.gz": 0,
                                                                                 "TST_004.nii.gz": 0})
        assert (phase.out / "submissions" / row["team"] / "report.html").read_text().count("<tr class=") == 4
    loads = [job for job in submission_jobs(phase.out, "beta")
             if "loading image archive beta.tar.gz" in (phase.out / "logs" / f"{job}.log").read_text()]
    assert len(loads) == 1  # four tasks, two at once: the archive is loaded once
    gamma = json.loads((phase.out / "submissions" / "gamma" / "report.json").read_text())
    assert [job["error"] for job in gamma["jobs"]] == [CRASH] * 4 and gamma["summary"]["num_failed"] == 4
    alpha = json.loads((phase.out / "submissions" / "alpha" / "report.json").read_text())
    assert all(job["status"] == "succeeded" and job["peak_memory_bytes"] > 1 << 20 for job in alpha["jobs"])
    assert "gamma                        4     0      4" in capsys.readouterr().out


def test_a_submissions_metrics_are_those_pre_flight_gives_for_the_same_image_and_cases(phase, tmp_path):
    assert preflight(["--challenge", "tb-caverns", "--image", f"{IMAGE}:ok", "--cases", str(phase.cohort / "input"),
                      "--ground-truth", str(phase.cohort / "ground_truth"), "--output", str(tmp_path / "pre"),
                      "--bootstrap", "50", "--memory-gb", "1.5", "--time-limit", "120"]) == 0
    expected = json.loads((tmp_path / "pre" / "evaluation" / "metrics.json").read_text())
    got = json.loads((phase.out / "submissions" / "alpha" / "evaluation" / "metrics.json").read_text())
    assert got["aggregates"] == expected["aggregates"] and got["case"] == expected["case"]
    assert got["meta"]["bootstrap"] == expected["meta"]["bootstrap"]


def test_two_jobs_ran_at_once_with_jobs_2(phase):
    intervals = sorted((datetime.fromisoformat(s["started"]), datetime.fromisoformat(s["finished"]))
                       for _, s in states(phase.out).values())
    overlapping = [a for a, b in zip(intervals, intervals[1:]) if b[0] < a[1]]
    assert len(overlapping) >= 3, intervals


def test_a_rerun_does_nothing(phase, monkeypatch, caplog):
    caplog.set_level(logging.INFO, "medchallenge.phase")
    before = states(phase.out)
    outputs = [phase.out / "leaderboard.json", phase.out / "leaderboard.html",
               *phase.out.glob("submissions/*/evaluation/metrics.json")]
    stamps = [mtime(p) for p in outputs]
    assert run_phase(phase, monkeypatch) == 0
    assert phase.conversions == [] and states(phase.out) == before and [mtime(p) for p in outputs] == stamps
    assert "0 job(s) to run" in caplog.text


def test_only_jobs_lost_outside_the_job_run_again_and_only_their_submissions_are_evaluated_again(phase,
                                                                                                 monkeypatch):
    before = states(phase.out)
    deleted = submission_jobs(phase.out, "beta")[0]
    interrupted = submission_jobs(phase.out, "alpha")[1]
    (phase.out / "jobs" / deleted / "state.json").unlink()
    (phase.out / "jobs" / interrupted / "state.json").write_text(json.dumps({"status": "interrupted",
                                                                             "cause": "node_fail", "requeued": 1}))
    evaluations = {team: mtime(phase.out / "submissions" / team / "evaluation-state.json")
                   for team in ("alpha", "beta", "gamma")}
    board = mtime(phase.out / "leaderboard.json")
    assert run_phase(phase, monkeypatch) == 0
    after = states(phase.out)
    changed = sorted(job for job in before if after[job] != before[job])
    assert changed == sorted([deleted, interrupted]) and after[deleted][1]["status"] == "succeeded"
    assert phase.conversions == []
    now = {team: mtime(phase.out / "submissions" / team / "evaluation-state.json") for team in evaluations}
    assert now["gamma"] == evaluations["gamma"] and now["alpha"] > evaluations["alpha"]
    assert now["beta"] > evaluations["beta"] and mtime(phase.out / "leaderboard.json") > board
    ranked = json.loads((phase.out / "leaderboard.json").read_text())
    assert [row["team"] for row in ranked["teams"]] == ["beta", "alpha"]
    assert [row["team"] for row in ranked["not_ranked"]] == ["gamma"]
    assert ranked["failed"] == {}


def test_a_new_submission_runs_only_its_own_jobs_and_a_refused_one_stops_nothing(phase, monkeypatch, capsys,
                                                                                 caplog):
    caplog.set_level(logging.INFO, "medchallenge.phase")
    half = {name: boxes for name, boxes in sorted(phase.oracle.items())[:1]}
    model_tarball(phase.submissions / "half.tar.gz", half)
    (phase.submissions / "corrupt.tar.gz").write_bytes(b"\x1f\x8b not really gzip")
    with open(phase.submissions / "phase.toml", "a") as toml:
        toml.write('\n[[submission]]\nteam = "delta"\nimage = "mc-test-h30-phase:model-boxes"\nmodel = "half.tar.gz"\n'
                   '\n[[submission]]\nteam = "epsilon"\nimage = "corrupt.tar.gz"\n'
                   '\n[[submission]]\nteam = "zeta"\nimage = "python:3.11-slim"\n')
    before = states(phase.out)
    capsys.readouterr()
    assert run_phase(phase, monkeypatch) == 0
    after = states(phase.out)
    assert {job: after[job] for job in before} == before
    assert sorted(set(after) - set(before)) == sorted(submission_jobs(phase.out, "delta")
                                                      + submission_jobs(phase.out, "zeta"))
    assert phase.conversions == []
    board = json.loads((phase.out / "leaderboard.json").read_text())
    assert [row["team"] for row in board["teams"]] == ["beta", "delta", "alpha"]
    assert {row["team"]: row["reason"].split(":")[0] for row in board["not_ranked"]} == {
        "gamma": "every job failed (4 of 4)", "zeta": "every job failed (4 of 4)", "epsilon": "refused before any job"}
    assert board["failed"] == {} and board["teams"][1]["value"] < 1.0
    # a root image: refused before its container runs, as grand-challenge refuses it; the team's result, final
    zeta = json.loads((phase.out / "submissions" / "zeta" / "report.json").read_text())
    assert all(job["status"] == "failed" and job["error"].startswith("image python:3.11-slim: The container runs "
                                                                     "as root.") for job in zeta["jobs"])
    printed = capsys.readouterr()
    assert "8 job(s) to run" in caplog.text
    assert "epsilon                  refused: image archive corrupt.tar.gz: not a readable `docker save` archive" \
        in printed.out
    assert medchallenge(["phase", "status", str(phase.out)]) == 0
    status = capsys.readouterr().out
    assert f"leaderboard: {phase.out / 'leaderboard.html'}" in status
    assert f"4 failed (the team's result): {CRASH}" in status


def test_retry_failed_runs_the_failed_jobs_of_the_named_submission_again_and_nothing_else(phase, monkeypatch,
                                                                                         caplog):
    caplog.set_level(logging.INFO, "medchallenge.phase")
    before = states(phase.out)
    assert run_phase(phase, monkeypatch, "--retry-failed", "gamma") == 0
    after = states(phase.out)
    gamma = submission_jobs(phase.out, "gamma")
    assert sorted(job for job in before if after[job][0] != before[job][0]) == sorted(gamma)
    assert all(after[job][1]["status"] == "failed" and after[job][1]["error"] == CRASH for job in gamma)
    assert "4 failed job(s) to run again (--retry-failed)" in caplog.text and "4 job(s) to run" in caplog.text


def phase_containers(out: Path, all_states: bool = False) -> list[str]:
    """The containers of this phase's jobs that the engine has (running, or any with `all_states`)."""
    jobs = {f"medchallenge-phase-{p.name}" for p in out.glob("jobs/*")}
    listed = subprocess.run(["docker", "ps", *(["--all"] if all_states else []), "--format", "{{.Names}}"],
                            capture_output=True, text=True, check=True).stdout.split()
    return sorted(set(listed) & jobs)


def test_ctrl_c_stops_the_running_jobs_removes_their_containers_and_status_says_to_run_them_again(phase, tmp_path):
    (tmp_path / "slow.toml").write_text('[[submission]]\nteam = "slow"\nimage = "mc-test-h30-phase:slow"\n')
    out = tmp_path / "out"
    command = [sys.executable, "-m", "medchallenge.cli", "phase", "run", "--challenge", "tb-caverns", "--submissions",
               str(tmp_path / "slow.toml"), "--cases", str(phase.cohort / "input"), "--ground-truth",
               str(phase.cohort / "ground_truth"), "--output", str(out), "--jobs", "2", "--cpus", "1",
               "--memory-gb", "1.5", "--time-limit", "600", "--bootstrap", "10", "--no-progress"]
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while len(phase_containers(out)) < 2 and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.5)
    assert len(phase_containers(out)) == 2  # two slow jobs running
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=180)
    assert run.returncode == 130 and "interrupted: the running jobs were stopped" in err and "Traceback" not in err
    assert phase_containers(out, all_states=True) == []
    assert not list(out.glob("jobs/*/state.json")) and not list(out.glob("jobs/*/running.json"))
    status = subprocess.run([sys.executable, "-m", "medchallenge.cli", "phase", "status", str(out)],
                            capture_output=True, text=True, check=True).stdout
    assert "to do: slow: 4 job(s) not run: `medchallenge phase run` again" in status
