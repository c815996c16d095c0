"""`medchallenge phase run --backend slurm` against a real Slurm (.ci/provision-slurm.sh: one node with this machine's
CPUs and memory): the same phase gives exactly the metrics and leaderboard of the local backend; a task cancelled
while it runs is noted as such and the next run finishes the phase without running finished jobs again; so is one
preempted that may not be requeued, and one preempted under the cluster's PreemptMode=REQUEUE runs again, counted, in
the same run; a task whose runner Slurm kills for its step's memory (task/cgroup) is noted node_oom and runs again;
tasks queued on a node set DOWN complete once it is RESUMED, and tasks running on it are requeued, run again and
counted; a job over its memory limit, through Podman, is reported as such."""

from __future__ import annotations

import gzip
import json
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import slurm_config
from e2e.test_phase import ground_truth_boxes, model_tarball
from gateway_helpers import wait_for

from medchallenge.phase.slurm_limits import cluster_limits

IMAGE = "mc-test-h30s"
MEMORY_KILLED = r"The container was killed as it exceeded its memory limit \(1\.5 GB\)"
CRASH = "The algorithm exited with status 1: RuntimeError: the model file weights.onnx is missing"
SLURM_WAIT = 300  # seconds for Slurm to queue, start or requeue a task
# a step's memory below what a task's runner needs: its Python's imports alone take ~18 MB besides the interpreter's
# 5 MB (cgroup.conf's MinRAMSpace=10 lets Slurm give a step that little; its default is 30 MB)
RUNNER_STARVED_MB = 12


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


def interrupt_a_running_task(phase: SimpleNamespace, out: Path, toml: str, interrupt, *extra: str) -> str:
    """Run the phase of `toml` through Slurm, `interrupt(task)` one of sloth's tasks once its container runs, and let
    the run end (it fails: a job is left without a result); returns the task's Slurm id."""
    running = subprocess.Popen(phase_command(phase, out, toml, "--time-limit", "8", "--backend", "slurm", *extra),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        task = wait_for(lambda: squeue("--name=mc-sloth", "--states=RUNNING", "--format=%i"), SLURM_WAIT,
                        "a running task")[0]
        wait_for(lambda: [p.parent.name for p in out.glob("jobs/*/running.json")
                          if p.parent.name in team_jobs(out, "sloth")], SLURM_WAIT, "the task's job to start")
        time.sleep(2)  # the container runs
        interrupt(task)
        output, _ = running.communicate(timeout=600)
    finally:
        running.kill()
        cancel_jobs_of(out)
    assert running.returncode == 1, output[-2000:]
    return task


def assert_noted_and_finished_by_the_next_run(phase: SimpleNamespace, out: Path, toml: str, task: str,
                                              cause: str, slurm_state: str) -> None:
    """The interrupted task's job is noted with Slurm's cause (state.json, `phase status`), its container is gone,
    and the next `phase run` runs that job only and finishes the phase."""
    interrupted = [job for job, (_, state) in states(out).items() if state["status"] == "interrupted"]
    assert len(interrupted) == 1 and interrupted[0] in team_jobs(out, "sloth")
    noted = states(out)[interrupted[0]][1]
    assert (noted["cause"], noted["slurm_state"], noted["slurm_job_id"]) == (cause, slurm_state, task)
    status = subprocess.run([sys.executable, "-m", "medchallenge.phase.cli", "status", str(out)],
                            capture_output=True, text=True)
    assert f"1 lost outside the job ({cause})" in status.stdout, status.stdout
    containers = subprocess.run(["docker", "ps", "--all", "--quiet", "--filter", "name=medchallenge-phase-"
                                 + interrupted[0]], capture_output=True, text=True, check=True).stdout
    assert containers == ""  # the interrupted task removed its container
    before = states(out)
    again = run_phase(phase, out, "--backend", "slurm", toml=toml, time_limit="8")
    assert again.returncode == 0, again.stdout[-2000:]
    assert "1 job(s) to run (slurm backend)" in again.stdout
    after = states(out)
    assert {job: after[job] for job in before if job not in interrupted} == \
        {job: state for job, state in before.items() if job not in interrupted}
    assert after[interrupted[0]][1]["status"] == "failed" and after[interrupted[0]][1]["error"].startswith(
        "Time limit exceeded")
    board = json.loads((out / "leaderboard.json").read_text())
    assert {row["team"]: row["reason"] for row in board["not_ranked"]}["sloth"].startswith("every job failed")


def test_a_task_cancelled_while_it_runs_is_noted_and_the_next_run_finishes_without_running_finished_jobs(phase):
    out = phase.root / "cancel"
    task = interrupt_a_running_task(phase, out, "slow.toml", lambda task: subprocess.run(["scancel", task],
                                                                                        check=True))
    assert_noted_and_finished_by_the_next_run(phase, out, "slow.toml", task, "cancelled", "CANCELLED")


def preempt(task: str) -> None:
    """A job of the partition `urgent` (a higher PriorityTier on the same node) asking for all the node's CPUs: Slurm
    preempts the default partition's running jobs, `task` among them."""
    cpus = subprocess.run(["sinfo", "--noheader", "--partition=urgent", "--format=%c"], capture_output=True,
                          text=True, check=True).stdout.split()[0]
    subprocess.run(["sbatch", "--partition=urgent", f"--cpus-per-task={cpus}", "--mem=100M",
                    "--job-name=mc-test-urgent", "--output=/dev/null", "--wrap", "sleep 3"], capture_output=True,
                   check=True)
    wait_for(lambda: not squeue(f"--jobs={task}", "--states=RUNNING", "--format=%i"), SLURM_WAIT,
             f"task {task} preempted")


def test_a_task_preempted_that_may_not_be_requeued_is_noted_preempted_and_the_next_run_finishes_it(
        phase, slurm_preemption):
    """Preemption cancels a task submitted --no-requeue (Slurm's state PREEMPTED): a cause outside the job."""
    out = phase.root / "preempted"
    task = interrupt_a_running_task(phase, out, "sloth.toml", preempt, "--max-parallel", "1",
                                    "--sbatch-option=--no-requeue")
    assert_noted_and_finished_by_the_next_run(phase, out, "sloth.toml", task, "preempted", "PREEMPTED")


def wait_requeued(tasks: list[str]) -> None:
    for task in tasks:
        wait_for(lambda: re.search(r"JobState=PENDING .*Restarts=1", subprocess.run(
            ["scontrol", "show", "job", "--oneliner", task], capture_output=True, text=True).stdout),
            SLURM_WAIT, f"task {task} requeued")


def release(tasks: list[str]) -> None:
    """Slurm holds a requeued task back two minutes (BeginTime); an administrator's release."""
    for task in tasks:
        subprocess.run(["scontrol", "update", f"JobId={task}", "StartTime=now"], check=True)


def assert_ran_to_their_end_and_counted(out: Path, requeued: list[str]) -> None:
    """Each of sloth's four jobs ran to its own end (its time limit) once; those of the `requeued` tasks were run
    again and counted."""
    final = {s["slurm_job_id"]: s for _, s in states(out).values()}
    assert len(final) == 4 and all(s["status"] == "failed" and s["error"].startswith("Time limit exceeded")
                                   for s in final.values())
    assert sorted(t for t, s in final.items() if s["requeued"] == 1) == sorted(requeued)
    report = json.loads((out / "submissions" / "sloth" / "report.json").read_text())
    assert sum("requeued 1 time(s) by the scheduler" in job["notes"] for job in report["jobs"]) == len(requeued)


def test_a_task_preempted_is_requeued_run_again_and_counted_and_the_phase_finishes_in_one_run(
        phase, slurm_preemption):
    """The cluster's PreemptMode=REQUEUE: a preempted task (the phase submits --requeue) goes back to the queue."""
    out = phase.root / "preempted-requeue"
    running = subprocess.Popen(phase_command(phase, out, "sloth.toml", "--time-limit", "8", "--backend", "slurm",
                                             "--max-parallel", "1"),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        task = wait_for(lambda: squeue("--name=mc-sloth", "--states=RUNNING", "--format=%i"), SLURM_WAIT,
                        "a running task")[0]
        wait_for(lambda: list(out.glob("jobs/*/running.json")), SLURM_WAIT, "the task's job to start")
        time.sleep(2)  # its container runs
        preempt(task)
        wait_requeued([task])
        release([task])
        output, _ = running.communicate(timeout=600)
    finally:
        running.kill()
        cancel_jobs_of(out)
    assert running.returncode == 0, output[-2000:]
    assert_ran_to_their_end_and_counted(out, [task])


def test_a_task_whose_runner_slurm_kills_for_its_memory_is_noted_node_oom_and_the_next_run_runs_it(
        phase, slurm_cgroup):
    """Slurm's own out-of-memory kill (task/cgroup: the step's --mem), not the container's: a site's --mem too small
    for the task's runner (Python, the engine's CLI) ends each task OUT_OF_MEMORY before it writes a state, and
    the phase's evaluation and leaderboard jobs too; with the option fixed, the next run runs those jobs."""
    out = phase.root / "node-oom"
    starved = run_phase(phase, out, "--backend", "slurm", f"--sbatch-option=--mem={RUNNER_STARVED_MB}M",
                        toml="alpha.toml")
    assert starved.returncode == 1, starved.stdout[-2000:]
    lost = {job: states(out)[job][1] for job in team_jobs(out, "alpha")}
    assert len(lost) == 4 and all((s["status"], s["cause"], s["slurm_state"]) ==
                                  ("interrupted", "node_oom", "OUT_OF_MEMORY") for s in lost.values()), lost
    status = subprocess.run([sys.executable, "-m", "medchallenge.phase.cli", "status", str(out)],
                            capture_output=True, text=True)
    assert "4 lost outside the job (node_oom)" in status.stdout, status.stdout
    again = run_phase(phase, out, "--backend", "slurm", toml="alpha.toml")
    assert again.returncode == 0, again.stdout[-2000:]
    assert "4 job(s) to run (slurm backend)" in again.stdout
    assert all(states(out)[job][1]["status"] == "succeeded" for job in lost)
    assert json.loads((out / "leaderboard.json").read_text())["teams"][0]["team"] == "alpha"


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
            wait_requeued(tasks)
        finally:
            set_node("RESUME")
        release(tasks)
        output, _ = running.communicate(timeout=600)
    finally:
        running.kill()
        cancel_jobs_of(out)
    assert running.returncode == 0, output[-2000:]
    assert len(tasks) == 2
    assert_ran_to_their_end_and_counted(out, tasks)


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


def job_runs(out: Path, job: str) -> int:
    """How many tasks ran `job` to its end (the task's last line for it, in the Slurm logs)."""
    ended = re.compile(rf"^job {job}: (succeeded|failed)(:|$)", re.MULTILINE)
    return sum(len(ended.findall(log.read_text(errors="replace"))) for log in (out / "logs").glob("slurm-*.out"))


def test_after_a_ctrl_c_status_counts_the_jobs_in_slurm_and_the_rerun_waits_for_them_and_runs_no_job_twice(phase):
    """Ctrl-C of `phase run --backend slurm` leaves the array in Slurm: `phase status` counts its tasks as running
    and queued; a second array of the same manifest (as a second submit host's run would submit it) finds the
    running job's lease taken and runs nothing; a task cancelled while pending is the only job the next run submits,
    and the next run waits for the old array to finish its other jobs: each of the four runs once."""
    out = phase.root / "ctrl-c"
    command = phase_command(phase, out, "sloth.toml", "--time-limit", "8", "--backend", "slurm", "--max-parallel",
                            "1")
    running = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: list(out.glob("jobs/*/running.json")), SLURM_WAIT, "the first task's job to start")
        running.send_signal(signal.SIGINT)
        output, _ = running.communicate(timeout=120)
        assert running.returncode == 130, output[-2000:]
        assert "interrupted: the submitted jobs go on in Slurm" in output and "containers removed" not in output
        status = json.loads(subprocess.run([sys.executable, "-m", "medchallenge.phase.cli", "status", str(out),
                                            "--json"], capture_output=True, text=True, check=True).stdout)
        sloth = status["submissions"][0]
        assert sloth["not-run"] == 0 and sloth["queued"] >= 2 and sum(
            sloth[k] for k in ("succeeded", "failed", "running", "queued")) == 4, sloth
        array = squeue("--name=mc-sloth", "--states=RUNNING", "--format=%F")[0].strip()
        manifest = next((out / "slurm").glob("sloth-*.tasks"))
        duplicate = subprocess.run(["sbatch", "--parsable", "--array=0-0", "--job-name=mc-sloth-duplicate",
                                    f"--output={out}/logs/slurm-duplicate-%A_%a.out", "--mem=600M", "--wrap",
                                    f"exec {sys.executable} -m medchallenge.phase.slurm task {manifest}"],
                                   capture_output=True, text=True, check=True).stdout.strip()
        pending = squeue("--name=mc-sloth", "--states=PENDING", "--array", "--format=%i")
        cancelled = max(pending, key=lambda task: int(task.split("_")[1]))
        subprocess.run(["scancel", cancelled], check=True)
        again = run_phase(phase, out, "--backend", "slurm", "--max-parallel", "1", toml="sloth.toml", time_limit="8")
    finally:
        running.kill()
        cancel_jobs_of(out)
    assert again.returncode == 0, again.stdout[-2000:]
    assert "1 job(s) to run (slurm backend)" in again.stdout
    assert re.search(r"[23] job\(s\) still in Slurm from an earlier run \(array " + array, again.stdout), again.stdout
    final = {job: state for job, (_, state) in states(out).items()}
    assert len(final) == 4 and all(s["status"] == "failed" and s["error"].startswith("Time limit exceeded")
                                   for s in final.values())
    assert sorted(s["slurm_job_id"].split("_")[0] for s in final.values()) == [array] * 3 + [
        next(s["slurm_job_id"].split("_")[0] for s in final.values() if not s["slurm_job_id"].startswith(array))]
    assert {job: job_runs(out, job) for job in final} == {job: 1 for job in final}
    held = (out / "logs" / f"slurm-duplicate-{duplicate}_0.out").read_text()
    assert "held by another task" in held and f"{array}_0" in held
    not_ranked = json.loads((out / "leaderboard.json").read_text())["not_ranked"]
    assert [(row["team"], row["reason"]) for row in not_ranked] == [("sloth", "every job failed (4 of 4)")]


def test_a_submission_past_the_array_size_is_split_and_its_evaluation_waits_for_every_array(phase, tmp_path):
    """A site's max_array_size (3) below alpha's four cases: two arrays, one evaluation after both, under the
    site's job name prefix; and the cluster's own MaxArraySize is read as `scontrol show config` says it."""
    assert cluster_limits().max_array_size == int(slurm_config()["MaxArraySize"])
    site = tmp_path / "site.toml"
    site.write_text('max_array_size = 3\njob_name_prefix = "h38t-"\n')
    out = phase.root / "split"
    result = run_phase(phase, out, "--backend", "slurm", f"--slurm-config={site}", toml="alpha.toml")
    assert result.returncode == 0, result.stdout[-2000:]
    arrays = re.search(r"submission alpha: 4 job\(s\) as Slurm array (\d+), (\d+)\n", result.stdout)
    assert arrays, result.stdout[-2000:]
    assert sorted(len((out / "slurm" / f"alpha-{n}.tasks").read_text().split()) for n in (1, 2)) == [1, 3]
    final = [s for _, s in states(out).values()]
    assert len(final) == 4 and all(s["status"] == "succeeded" for s in final)
    assert sorted({s["slurm_job_id"].split("_")[0] for s in final}) == sorted(arrays.groups())
    logs = sorted(p.name for p in (out / "logs").glob("slurm-*.out"))
    assert any(name.startswith("slurm-h38t-evaluate-alpha-") for name in logs) and not any(
        name.startswith("slurm-mc-") for name in logs)
    board = json.loads((out / "leaderboard.json").read_text())
    assert board["teams"][0]["team"] == "alpha"


def test_a_sbatch_option_a_site_does_not_set_is_refused_before_anything_is_submitted(phase):
    out = phase.root / "refused-option"
    for option in ("--output=/tmp/evil", "--export=ALL,PYTHONPATH=/tmp", "--wrap=id"):
        result = run_phase(phase, out, "--backend", "slurm", f"--sbatch-option={option}", toml="alpha.toml")
        assert result.returncode == 1 and "not an sbatch option a site sets" in result.stdout, result.stdout
        assert result.stdout.count("\n") == 1 and not (out / "slurm").exists()
