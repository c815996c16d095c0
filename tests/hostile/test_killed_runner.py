"""A killed job runner leaves no container (issue 37 item 7): a phase task killed with SIGKILL mid-job, a `phase run`
killed with SIGKILL (alone, or with its whole process group: every task and `ENGINE run` client), on Docker and
Podman: the job's container is gone well within its time limit and margin, and no more containers of the phase than
`--jobs` ever run at once (a new `phase run` waits for the slots a killed one's containers hold). The watchdog alone:
it removes its container at the deadline while its runner lives, and leaves it when told "done"; the sweep removes
containers past their deadline label."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from e2e.test_preflight import cohort  # noqa: F401 (fixture)
from gateway_helpers import wait_for

from medchallenge.jobs import DockerImage, JobFolders, JobLimits
from medchallenge.jobs.docker_run import (DEADLINE_LABEL, ENGINES, WATCH_MARGIN_S, WATCHDOG, engine_differences,
                                          sweep_expired, watch_seconds)
from medchallenge.jobs.watchdog import WATCH_LABEL

pytestmark = pytest.mark.serial  # it counts the phase's containers running at once

IMAGE = "mc-test-h37-killed:slow"  # sleeps 600 s (tests/job_images/broken, BEHAVIOUR=slow)
GONE_S = 45  # a killed runner's container is gone within this (its time limit is 600 s, the margin 120 s)
PREFIX = "medchallenge-phase-"


@pytest.fixture(scope="module")
def slow_image(docker_compose, repo) -> None:
    subprocess.run(["docker", "build", "--quiet", "--build-arg", "BEHAVIOUR=slow", "--label", "mc-test-h37=killed",
                    "--tag", IMAGE, str(repo / "tests" / "job_images" / "broken")], check=True, capture_output=True)


@pytest.fixture(params=["docker", "podman"])
def engine(request, slow_image) -> str:
    """The engine, with the slow image in it."""
    if request.param == "podman":
        request.getfixturevalue("podman")
        if subprocess.run(["podman", "image", "exists", IMAGE]).returncode != 0:
            saved = subprocess.run(["docker", "save", IMAGE], check=True, capture_output=True).stdout
            subprocess.run(["podman", "load"], input=saved, check=True, capture_output=True)
    return request.param


def start_phase(engine: str, cohort: Path, out: Path) -> subprocess.Popen:
    """`phase run --jobs 1` of one slow submission over two cases, in a process group of its own."""
    submissions = out.parent / f"{out.name}.toml"
    submissions.write_text(f'[[submission]]\nteam = "slow"\nimage = "{IMAGE}"\n')
    command = [sys.executable, "-m", "medchallenge.cli", "phase", "run", "--challenge", "tb-caverns", "--submissions",
               str(submissions), "--cases", str(cohort / "input"), "--ground-truth", str(cohort / "ground_truth"),
               "--output", str(out), "--engine", engine, "--jobs", "1", "--cpus", "1", "--memory-gb", "1.5",
               "--time-limit", "600", "--bootstrap", "10", "--no-progress"]
    with open(out.parent / f"{out.name}-{time.monotonic_ns()}.log", "w") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def running(engine: str, out: Path) -> dict[str, str]:
    """The containers of this phase's jobs that run now: {job id: container id}."""
    jobs = {p.stem for p in out.glob("tasks/*.json")}
    listed = subprocess.run([engine, "ps", "--no-trunc", "--filter", f"name={PREFIX}", "--format",
                             "{{.Names}} {{.ID}}"], capture_output=True, text=True).stdout.splitlines()
    named = dict(line.removeprefix(PREFIX).split() for line in listed if line.startswith(PREFIX))
    return {job: container for job, container in named.items() if job in jobs}


def gone(engine: str, container: str) -> bool:
    """The container is removed (not merely stopped: a stopped one may be started again)."""
    return subprocess.run([engine, "inspect", container], capture_output=True).returncode != 0


class Census:
    """The most containers of the phase seen running at once, sampled while the test runs."""

    def __init__(self, engine: str, out: Path):
        self.engine, self.out, self.most = engine, out, 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._count, daemon=True)
        self.thread.start()

    def _count(self) -> None:
        while not self.stopping.is_set():
            jobs = running(self.engine, self.out)
            self.most = max(self.most, len(jobs))
            self.stopping.wait(0.2)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()


def stop_phase(process: subprocess.Popen, engine: str, out: Path) -> None:
    """Ctrl-C for a `phase run` still running; the phase's containers removed whatever happened."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
    left = list(running(engine, out).values())
    if left:
        subprocess.run([engine, "rm", "--force", *left], capture_output=True)


def kill_a_task(engine: str, out: Path) -> str:
    """SIGKILL the task of a job whose container runs; that job's id, once its container is gone."""
    job, container = next(iter(wait_for(lambda: running(engine, out), 180, "a job's container runs").items()))
    os.kill(json.loads((out / "jobs" / job / "running.json").read_text())["pid"], signal.SIGKILL)
    wait_for(lambda: gone(engine, container), GONE_S, f"the killed task's container {container[:12]} is gone")
    return job


def test_a_task_killed_mid_job_leaves_no_container_and_the_next_job_waits_for_its_slot(engine, cohort,  # noqa: F811
                                                                                     tmp_path):
    out = tmp_path / "out"
    phase = start_phase(engine, cohort, out)
    census = Census(engine, out)
    try:
        killed = kill_a_task(engine, out)
        wait_for(lambda: set(running(engine, out)) - {killed}, 180, "the next job's container runs")
        assert phase.poll() is None
    finally:
        census.stop()
        stop_phase(phase, engine, out)
    assert census.most == 1, f"{census.most} containers of the phase ran at once under --jobs 1"
    assert running(engine, out) == {}


@pytest.mark.parametrize("whom", ["phase run", "its process group"])
def test_a_killed_phase_run_leaves_no_container_and_a_new_run_waits_for_its_slots(engine, cohort,  # noqa: F811
                                                                                  tmp_path, whom):
    """Killed on its second job: the new run starts with the first (not done), so it would run beside the second."""
    out = tmp_path / "out"
    killed = start_phase(engine, cohort, out)
    census = Census(engine, out)
    again = None
    try:
        first = kill_a_task(engine, out)
        job, container = next(iter(wait_for(lambda: {j: c for j, c in running(engine, out).items() if j != first},
                                            180, "the second job's container runs").items()))
        if whom == "phase run":
            os.kill(killed.pid, signal.SIGKILL)
        else:  # every task and `ENGINE run` client too
            os.killpg(killed.pid, signal.SIGKILL)
        killed.wait()
        again = start_phase(engine, cohort, out)  # at once: the killed run's container may still be there
        wait_for(lambda: gone(engine, container), GONE_S, f"the killed run's container {container[:12]} is gone")
        wait_for(lambda: running(engine, out), 180, "the new run's job runs")
    finally:
        census.stop()
        stop_phase(killed, engine, out)
        if again is not None:
            stop_phase(again, engine, out)
    assert census.most == 1, f"{census.most} containers of the phase ran at once under --jobs 1"
    assert running(engine, out) == {}


def labelled_container(engine: str, labels: dict[str, str]) -> str:
    return subprocess.run([engine, "run", "--detach", "--network", "none", *engine_differences(engine, gpu=False),
                           *[a for key, value in labels.items() for a in ("--label", f"{key}={value}")], IMAGE],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_the_watchdog_removes_its_container_at_the_deadline_while_its_runner_lives_and_not_when_told_done(engine):
    tokens = [uuid.uuid4().hex for _ in range(2)]
    containers = [labelled_container(engine, {WATCH_LABEL: token}) for token in tokens]
    try:
        watchdogs = [subprocess.Popen([sys.executable, "-I", str(WATCHDOG), engine, token, "3"],
                                      stdin=subprocess.PIPE, start_new_session=True) for token in tokens]
        watchdogs[1].stdin.write(b"done\n")
        watchdogs[1].stdin.close()
        assert watchdogs[1].wait(timeout=10) == 0
        started = time.monotonic()
        assert watchdogs[0].wait(timeout=60) == 1  # its runner (this test) alive, its pipe open
        assert time.monotonic() - started > 1.5
        assert gone(engine, containers[0]) and not gone(engine, containers[1])
        watchdogs[0].stdin.close()
    finally:
        subprocess.run([engine, "rm", "--force", *containers], capture_output=True)


def test_the_sweep_removes_job_containers_past_their_deadline_label_only(engine):
    past = labelled_container(engine, {DEADLINE_LABEL: str(int(time.time()) - 5)})
    future = labelled_container(engine, {DEADLINE_LABEL: str(int(time.time()) + 3600)})
    try:
        removed = sweep_expired(engine)
        assert any(past.startswith(r) or r.startswith(past) for r in removed)
        assert gone(engine, past) and not gone(engine, future)
    finally:
        subprocess.run([engine, "rm", "--force", past, future], capture_output=True)


def test_each_container_carries_its_watchdog_token_and_deadline_and_podman_kills_it_at_that_deadline(tmp_path):
    folders = JobFolders(*(tmp_path / name for name in ("input", "output", "model", "tmp")))
    limits = JobLimits(time_limit_s=300)
    for engine in ENGINES:
        before = int(time.time())
        command = DockerImage("image", engine=engine).command(folders, limits, False, "job", token="abc")
        labels = dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "--label")
        assert labels[WATCH_LABEL] == "abc"
        assert before + watch_seconds(limits) <= int(labels[DEADLINE_LABEL]) <= int(time.time()) + watch_seconds(limits)
        assert ("--timeout" in command) == (engine == "podman")
    assert command[command.index("--timeout") + 1] == str(watch_seconds(limits)) == str(300 + 1 + WATCH_MARGIN_S)
