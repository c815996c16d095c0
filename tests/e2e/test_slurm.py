"""`medchallenge phase run --backend slurm` against a real Slurm (.ci/provision-slurm.sh: one node with this machine's
CPUs and memory): the same phase gives exactly the metrics and leaderboard of the local backend; a task cancelled
while it runs is noted as such and the next run finishes the phase without running finished jobs again; tasks queued
on a node set DOWN complete once it is RESUMED, and tasks running on it are requeued, run again and counted; a job
over its memory limit, through Podman, is reported as such."""

from __future__ import annotations

import gzip
import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from e2e.test_phase import ground_truth_boxes, model_tarball
from gateway_helpers import wait_for

IMAGE = "mc-test-h30s"
MEMORY_KILLED = r"The container was killed as it exceeded its memory limit \(1\.5 GB\)"
CRASH = "The algorithm exited with status 1: RuntimeError: the model file weights.onnx is missing"
SLURM_WAIT = 300  # seconds for Slurm to queue, start or requeue a task


def submission(team: str, image: str, model: str | None = None) -> str:
    return f'[[submission]]\nteam = "{team}"\nimage = "{image}"\n' + (f'model = "{model}"\n' if model else "") + "\n"


@pytest.fixture(scope="module")
def phase(docker_compose, slurm, repo, tmp_path_factory) -> SimpleNamespace:
    """Four CTs; two working images (a tag; an archive with its model tarball: the ground truth's boxes) and a broken
    one; the slow and memory-hungry images of the later tests."""
    root = tmp_path_factory.mktemp("slurm-phase")
    for behaviour in ("ok", "model-boxes", "crash", "slow", "memory-kill"):
        subprocess.run(["docker", "build", "--quiet", "--build-arg", f"BEHAVIOUR={behaviour}", "--tag",
                        f"{IMAGE}:{behaviour}", str(repo / "tests" / "job_images" / "broken")], check=True,
                       capture_output=True)
    subprocess.run([sys.executable, "-m", "medchallenge.synth", "tb-caverns", "--out", str(root / "cohort"),
                    "--cases", "4", "--shape", "64", "64", "16", "--spacing", "5", "5", "16", "--seed", "1"],
                   check=True, capture_output=True)
    files = root / "submissions"
    files.mkdir()
    for behaviour in ("model-boxes", "memory-kill"):  # gzipped as uploaded; plain for Podman 4.3, which reads no gzip
        saved = subprocess.run(["docker", "save", f"{IMAGE}:{behaviour}"], check=True, capture_output=True).stdout
        (files / f"{behaviour}.tar.gz").write_bytes(gzip.compress(saved, compresslevel=1))
        (files / f"{behaviour}.tar").write_bytes(saved)
    model_tarball(files / "oracle.tar.gz", ground_truth_boxes(root / "cohort" / "ground_truth"))
    (files / "phase.toml").write_text(submission("alpha", f"{IMAGE}:ok")
                                      + submission("beta", "model-boxes.tar.gz", "oracle.tar.gz")
                                      + submission("gamma", f"{IMAGE}:crash"))
    (files / "alpha.toml").write_text(submission("alpha", f"{IMAGE}:ok"))
    (files / "sloth.toml").write_text(submission("sloth", f"{IMAGE}:slow"))
    (files / "slow.toml").write_text(submission("alpha", f"{IMAGE}:ok") + submission("sloth", f"{IMAGE}:slow"))
    (files / "podman.toml").write_text(submission("beta", "model-boxes.tar", "oracle.tar.gz")
                                       + submission("greedy", "memory-kill.tar"))
    return SimpleNamespace(root=root, cohort=root / "cohort", files=files)


def phase_command(phase: SimpleNamespace, out: Path, toml: str = "phase.toml", *extra: str) -> list[str]:
    return [sys.executable, "-m", "medchallenge.phase.cli", "run", "--challenge", "tb-caverns", "--submissions",
            str(phase.files / toml), "--cases", str(phase.cohort / "input"), "--ground-truth",
            str(phase.cohort / "ground_truth"), "--output", str(out), "--cpus", "1", "--memory-gb", "1.5",
            "--bootstrap", "50", "--no-progress", *extra]


def run_phase(phase: SimpleNamespace, out: Path, *extra: str, toml: str = "phase.toml",
              time_limit: str = "120") -> subprocess.CompletedProcess:
    return subprocess.run(phase_command(phase, out, toml, "--time-limit", time_limit, *extra),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)


def states(out: Path) -> dict[str, tuple[int, dict]]:
    return {p.parent.name: (p.stat().st_mtime_ns, json.loads(p.read_text())) for p in out.glob("jobs/*/state.json")}


def team_jobs(out: Path, team: str) -> list[str]:
    return [job["job_id"] for job in json.loads((out / "submissions" / team / "submission.json").read_text())["jobs"]]


def squeue(*options: str) -> list[str]:
    return subprocess.run(["squeue", "--noheader", *options], capture_output=True, text=True,
                          check=True).stdout.splitlines()


def set_node(state: str) -> None:
    """The one node of this cluster DOWN (as an administrator takes a failing node out) or RESUMEd."""
    node = socket.gethostname().split(".")[0]
    subprocess.run(["scontrol", "update", f"NodeName={node}", f"State={state}",
                    *(["Reason=medchallenge-test"] if state == "DOWN" else [])], check=True)


def cancel_jobs_of(out: Path) -> None:
    """Cancel what a phase run stopped by a test left in Slurm (its jobs run in OUT)."""
    for line in squeue("--format=%i %Z"):
        job, _, folder = line.partition(" ")
        if Path(folder.strip()) == out:
            subprocess.run(["scancel", job.split("_")[0]], check=False)


def comparable(board: dict) -> dict:
    """A leaderboard.json without the time its bootstrap took."""
    return {**board, "bootstrap": {k: v for k, v in board["bootstrap"].items() if k != "seconds"}}


def test_a_phase_through_slurm_gives_exactly_the_metrics_and_leaderboard_of_the_local_backend(phase):
    local = run_phase(phase, phase.root / "local", "--jobs", "2")
    assert local.returncode == 0, local.stdout[-2000:]
    through_slurm = run_phase(phase, phase.root / "slurm", "--backend", "slurm", "--max-parallel", "2")
    assert through_slurm.returncode == 0, through_slurm.stdout[-2000:]
    assert "12 job(s) to run (slurm backend)" in through_slurm.stdout
    assert "as Slurm array" in through_slurm.stdout
    for team in ("alpha", "beta", "gamma"):
        expected = json.loads((phase.root / "local" / "submissions" / team / "evaluation" / "metrics.json")
                              .read_text())
        got = json.loads((phase.root / "slurm" / "submissions" / team / "evaluation" / "metrics.json").read_text())
        assert got["aggregates"] == expected["aggregates"] and got["case"] == expected["case"]
        assert got["meta"]["bootstrap"] == expected["meta"]["bootstrap"]
    expected = json.loads((phase.root / "local" / "leaderboard.json").read_text())
    got = json.loads((phase.root / "slurm" / "leaderboard.json").read_text())
    assert comparable(got) == comparable(expected) and got["teams"][0]["team"] == "beta"
    slurm_states = states(phase.root / "slurm")
    assert set(slurm_states) == set(states(phase.root / "local")) and len(slurm_states) == 12
    for _, state in slurm_states.values():  # each task ran as a task of its submission's array, once
        assert state["slurm_job_id"].split("_")[1].isdigit() and state["requeued"] == 0
    gamma = [slurm_states[job][1] for job in team_jobs(phase.root / "slurm", "gamma")]
    assert [(s["status"], s["error"]) for s in gamma] == [("failed", CRASH)] * 4  # the team's own result
    logs = sorted(p.name for p in (phase.root / "slurm" / "logs").glob("slurm-mc-*.out"))
    assert len([name for name in logs if name.startswith("slurm-mc-evaluate-")]) == 3
    assert any(name.startswith("slurm-mc-leaderboard-") for name in logs)


def test_a_task_cancelled_while_it_runs_is_noted_and_the_next_run_finishes_without_running_finished_jobs(phase):
    out = phase.root / "cancel"
    running = subprocess.Popen(phase_command(phase, out, "slow.toml", "--time-limit", "8", "--backend", "slurm"),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        task = wait_for(lambda: squeue("--name=mc-sloth", "--states=RUNNING", "--format=%i"), SLURM_WAIT,
                        "a running task")[0]
        job_id = wait_for(lambda: [p.parent.name for p in out.glob("jobs/*/running.json")
                                   if p.parent.name in team_jobs(out, "sloth")], SLURM_WAIT,
                           "the task's job to start")[0]
        time.sleep(2)  # the container runs
        subprocess.run(["scancel", task], check=True)
        output, _ = running.communicate(timeout=600)
    finally:
        running.kill()
        cancel_jobs_of(out)
    assert running.returncode == 1, output[-2000:]
    cancelled = [job for job, (_, state) in states(out).items() if state["status"] == "interrupted"]
    assert len(cancelled) == 1 and states(out)[cancelled[0]][1]["cause"] == "cancelled"
    assert states(out)[cancelled[0]][1]["slurm_job_id"] == task
    status = subprocess.run([sys.executable, "-m", "medchallenge.phase.cli", "status", str(out)],
                            capture_output=True, text=True)
    assert "cancelled" in status.stdout, status.stdout
    containers = subprocess.run(["docker", "ps", "--all", "--quiet", "--filter", "name=medchallenge-phase-"
                                 + cancelled[0]], capture_output=True, text=True, check=True).stdout
    assert containers == ""  # the cancelled task removed its container
    before = states(out)
    again = run_phase(phase, out, "--backend", "slurm", toml="slow.toml", time_limit="8")
    assert again.returncode == 0, again.stdout[-2000:]
    assert "1 job(s) to run (slurm backend)" in again.stdout
    after = states(out)
    assert {job: after[job] for job in before if job not in cancelled} == \
        {job: state for job, state in before.items() if job not in cancelled}
    assert after[cancelled[0]][1]["status"] == "failed" and after[cancelled[0]][1]["error"].startswith(
        "Time limit exceeded")
    assert job_id in team_jobs(out, "sloth")
    board = json.loads((out / "leaderboard.json").read_text())
    assert sorted(row["team"] for row in board["teams"]) == ["alpha", "sloth"]


def test_tasks_queued_on_a_node_set_down_complete_once_it_is_resumed(phase):
    out = phase.root / "down"
    set_node("DOWN")
    try:
        running = subprocess.Popen(phase_command(phase, out, "alpha.toml", "--time-limit", "120", "--backend",
                                                 "slurm"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            wait_for(lambda: squeue("--name=mc-alpha", "--states=PENDING", "--format=%i"), SLURM_WAIT,
                     "alpha's array queued")
            time.sleep(5)
            assert squeue("--name=mc-alpha", "--states=RUNNING", "--format=%i") == [] and states(out) == {}
            reasons = squeue("--name=mc-alpha", "--format=%r")
            assert reasons and all("DOWN" in r or r.startswith("ReqNodeNotAvail") for r in reasons), reasons
        finally:
            set_node("RESUME")
        output, _ = running.communicate(timeout=600)
    finally:
        running.kill()
        cancel_jobs_of(out)
    assert running.returncode == 0, output[-2000:]
    assert sorted(job for job, (_, s) in states(out).items() if s["status"] == "succeeded") == \
        sorted(team_jobs(out, "alpha"))
    assert json.loads((out / "leaderboard.json").read_text())["teams"][0]["team"] == "alpha"


def test_tasks_running_on_a_node_set_down_are_requeued_run_again_and_counted(phase):
    out = phase.root / "requeue"
    running = subprocess.Popen(phase_command(phase, out, "sloth.toml", "--time-limit", "8", "--backend", "slurm"),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: len(list(out.glob("jobs/*/running.json"))) == 2, SLURM_WAIT, "two tasks' jobs to start")
        time.sleep(2)  # their containers run
        tasks = squeue("--name=mc-sloth", "--states=RUNNING", "--format=%i")
        set_node("DOWN")
        try:
            for task in tasks:
                wait_for(lambda: re.search(r"JobState=PENDING .*Restarts=1", subprocess.run(
                    ["scontrol", "show", "job", "--oneliner", task], capture_output=True, text=True).stdout),
                    SLURM_WAIT, f"task {task} requeued")
        finally:
            set_node("RESUME")
        for task in tasks:  # Slurm holds a requeued task back two minutes (BeginTime); an administrator's release
            subprocess.run(["scontrol", "update", f"JobId={task}", "StartTime=now"], check=True)
        output, _ = running.communicate(timeout=600)
    finally:
        running.kill()
        cancel_jobs_of(out)
    assert running.returncode == 0, output[-2000:]
    final = {s["slurm_job_id"]: s for _, s in states(out).values()}
    assert len(final) == 4 and all(s["status"] == "failed" and s["error"].startswith("Time limit exceeded")
                                   for s in final.values())  # each ran to its own end once requeued
    assert sorted(t for t, s in final.items() if s["requeued"] == 1) == sorted(tasks) and len(tasks) == 2
    report = json.loads((out / "submissions" / "sloth" / "report.json").read_text())
    assert sum("requeued 1 time(s) by the scheduler" in job["notes"] for job in report["jobs"]) == 2


def test_through_podman_a_job_over_its_memory_limit_is_reported_as_such_and_the_rest_scores_as_with_docker(
        phase, podman):
    for image in ("model-boxes", "memory-kill"):  # loaded by the tasks from the archives, as on a fresh node
        subprocess.run(["podman", "rmi", "--force", f"{IMAGE}:{image}"], capture_output=True)
    out = phase.root / "podman"
    result = run_phase(phase, out, "--backend", "slurm", "--engine", "podman", toml="podman.toml")
    assert result.returncode == 0, result.stdout[-2000:]
    greedy = [states(out)[job][1] for job in team_jobs(out, "greedy")]
    assert all(s["status"] == "failed" and re.match(MEMORY_KILLED, s["error"]) and s["cause"] == "oom"
               for s in greedy), greedy
    report = json.loads((out / "submissions" / "greedy" / "report.json").read_text())
    assert all(re.match(MEMORY_KILLED, job["error"]) for job in report["jobs"])
    expected = json.loads((phase.root / "slurm" / "submissions" / "beta" / "evaluation" / "metrics.json").read_text())
    got = json.loads((out / "submissions" / "beta" / "evaluation" / "metrics.json").read_text())
    assert got["aggregates"] == expected["aggregates"] and got["case"] == expected["case"]
