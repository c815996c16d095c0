"""An engine's fault is never the team's result (issue 38 section 3): an `image inspect` that fails because of the
engine (its daemon not answering, an error of its own) makes a phase task `interrupted` (cause `engine`, run again),
not `failed`; the image's own fault (it runs as root) stays the team's `failed`. Pre-flight says it in one line, and
the gateway's job-runner service hands the cause to the gateway (its note: the engine failed). The engine here is a
fake `docker` on PATH: it knows the image's id (the task's presence check) and fails or answers the full inspect."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

from medchallenge.errors import InputError
from medchallenge.gateway.config import Route
from medchallenge.gateway.jobs import run_in_inbox
from medchallenge.inbox import watch_inbox
from medchallenge.jobs import DockerImage, EmulationError, EngineFault
from medchallenge.phase import task as phase_task
from medchallenge.phase.images import EngineError
from medchallenge.phase.layout import PhaseLayout

DIGEST = f"sha256:{'ab' * 32}"
DAEMON_DOWN = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"
ROOT_IMAGE = json.dumps([{"Id": DIGEST, "Architecture": "amd64", "Config": {"User": "", "Cmd": ["run"], "Env": []}}])
FAKE_DOCKER = """#!/bin/sh
if [ "$1 $2" = "image inspect" ] && [ "$3" = "--format" ]; then echo {digest}; exit 0; fi
if [ "$1 $2" = "image inspect" ]; then {answer}; fi
exit 0
"""
ANSWERS = {"down": f"echo '{DAEMON_DOWN}' >&2; exit 1", "root": f"echo '{ROOT_IMAGE}'; exit 0",
           "missing": "echo 'Error response from daemon: No such image: team/x:1' >&2; exit 1"}


def fake_docker(tmp_path: Path, monkeypatch, answer: str) -> None:
    docker = tmp_path / "bin" / "docker"
    docker.parent.mkdir(exist_ok=True)
    docker.write_text(FAKE_DOCKER.format(digest=DIGEST, answer=ANSWERS[answer]))
    docker.chmod(0o755)
    monkeypatch.setenv("PATH", f"{docker.parent}:/usr/bin:/bin")


def task_spec(out: Path) -> dict:
    job_id = "0" * 32
    return {"version": 1, "job_id": job_id, "out": str(out), "challenge": "tb-caverns", "engine": "docker",
            "python": sys.executable, "image": {"ref": "team/x:1", "archive": None, "digest": DIGEST},
            "run_image": DIGEST, "inputs": [], "outputs": [], "sockets": [], "model": None,
            "limits": {"memory_gb": 2, "time_limit_s": 60, "cpus": 1, "disk_gb": 1}, "gpu": False,
            "resources": {}, "work_dir": str(out / "jobs" / job_id), "pk_base": 16}


def run_phase_task(tmp_path: Path) -> tuple[int, dict]:
    out = tmp_path / "out"
    spec = task_spec(out)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    status = phase_task.main([str(spec_file)])
    return status, json.loads(PhaseLayout.of(out).state(spec["job_id"]).read_text())


def test_an_image_inspect_the_engine_fails_is_run_again_not_failed_for_the_team(tmp_path, monkeypatch):
    fake_docker(tmp_path, monkeypatch, "down")
    status, state = run_phase_task(tmp_path)
    assert status == phase_task.OUTSIDE
    assert state["status"] == "interrupted" and state["cause"] == "engine", state
    assert "failed to inspect it" in state["error"] and "Cannot connect to the Docker daemon" in state["error"]


def test_an_image_that_runs_as_root_is_still_the_teams_failure(tmp_path, monkeypatch):
    fake_docker(tmp_path, monkeypatch, "root")
    status, state = run_phase_task(tmp_path)
    assert status == 0
    assert state["status"] == "failed" and "runs as root" in state["error"], state


@pytest.mark.parametrize(("answer", "line"), [("down", "the docker engine failed to inspect it: Cannot connect"),
                                              ("missing", "not found by this docker engine")])
def test_the_launchers_check_says_the_engine_failed_in_one_line(tmp_path, monkeypatch, answer, line):
    fake_docker(tmp_path, monkeypatch, answer)
    with pytest.raises(EngineFault) as refused:  # pre-flight's `error:` line
        DockerImage("team/x:1").check()
    assert line in str(refused.value) and "\n" not in str(refused.value)
    layout = PhaseLayout.of(tmp_path / "out")
    with pytest.raises(EngineError, match=line):  # the phase's cause outside the job
        phase_task.GuardedLauncher(DockerImage("team/x:1"), False, layout.image_check(DIGEST)).check()
    assert not layout.image_check(DIGEST).exists()
    fake_docker(tmp_path, monkeypatch, "root")
    with pytest.raises(EmulationError, match="runs as root") as refused:  # the image's own fault: the team's
        phase_task.GuardedLauncher(DockerImage("team/x:1"), False, layout.image_check(DIGEST)).check()
    assert not isinstance(refused.value, EngineFault)


@pytest.mark.parametrize(("fault", "raised"), [(EngineFault("image x: the docker engine failed to inspect it"),
                                                EngineFault), (EmulationError("image x: runs as root"), InputError)])
def test_the_gateways_job_runner_hands_the_engines_fault_to_the_gateway(tmp_path, fault, raised):
    inbox, study = tmp_path / "inbox", tmp_path / "study"
    (study / "input").mkdir(parents=True)

    def process(job: Path) -> None:
        raise fault

    route = Route(name="r", modalities=("CT",), body_parts=(), interface="tb-caverns", timeout_seconds=60,
                  image="x:1", inbox=inbox)
    done = threading.Event()
    watcher = threading.Thread(target=watch_inbox, args=(inbox, process, done.is_set))
    watcher.start()
    try:
        with pytest.raises(raised, match=str(fault)) as caught:
            run_in_inbox(route, study, threading.Event())
    finally:
        done.set()
        watcher.join(30)
    assert isinstance(caught.value, EngineFault) == isinstance(fault, EngineFault)


def test_the_gateways_note_says_the_engine_failed_not_the_detector(tmp_path, monkeypatch):
    from gateway_helpers import config_text

    from medchallenge.gateway import worker
    from medchallenge.gateway.config import load_config
    from medchallenge.gateway.notes import Failure, note_text

    config = tmp_path / "gateway.toml"
    config.write_text(config_text(tmp_path / "work", 11112, 4242, ["true"]))
    gateway = worker.Gateway(load_config(config))
    study = tmp_path / "work" / "running" / "1.2.3"
    (study / "input").mkdir(parents=True)

    def engine_down(*args, **kwargs) -> None:
        raise EngineFault(f"image x:1: the docker engine failed to inspect it: {DAEMON_DOWN}")

    monkeypatch.setattr(worker, "run_detector", engine_down)
    with pytest.raises(worker.StudyFailed) as failed:
        gateway.run_study(study, gateway.config.routes[0])
    assert failed.value.failure == Failure.ENGINE and DAEMON_DOWN in str(failed.value)
    assert "the container engine that runs the detector failed" in note_text(Failure.ENGINE, "tb-caverns", "1.2.3")


APP_IMAGE = json.dumps([{"Id": DIGEST, "Architecture": "amd64", "Config": {"User": "app", "Cmd": ["run"], "Env": []}}])
PASSWD_DOCKER = """#!/bin/sh
if [ "$1 $2 $3" = "image inspect --format" ]; then echo {digest}; exit 0; fi
if [ "$1 $2" = "image inspect" ]; then echo '{image}'; exit 0; fi
if [ "$1" = cp ]; then exit 1; fi
if [ "$1 $2" = "container inspect" ]; then {container}; fi
exit 0
"""


@pytest.mark.parametrize("engine_alive", [True, False])
def test_an_unreadable_etc_passwd_is_the_images_unless_the_engine_failed(tmp_path, monkeypatch, engine_alive):
    docker = tmp_path / "bin" / "docker"
    docker.parent.mkdir()
    down = f"echo '{DAEMON_DOWN}' >&2; exit 1"
    docker.write_text(PASSWD_DOCKER.format(digest=DIGEST, image=APP_IMAGE,
                                           container="exit 0" if engine_alive else down))
    docker.chmod(0o755)
    monkeypatch.setenv("PATH", f"{docker.parent}:/usr/bin:/bin")
    with pytest.raises(EmulationError) as refused:
        DockerImage("team/x:1").check()
    if engine_alive:  # `cp` found no /etc/passwd in the image: its USER cannot be resolved, the team's failure
        assert "USER 'app' is not in the image's /etc/passwd" in str(refused.value)
        assert not isinstance(refused.value, EngineFault)
    else:
        assert isinstance(refused.value, EngineFault) and DAEMON_DOWN in str(refused.value)
