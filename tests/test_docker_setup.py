"""The README's commands on a machine without a usable Docker, as a new user meets it: `make demo` and `make test`
either provision Docker as CI does (root) or stop with one line saying what to run, never with
`docker: unknown command: docker compose`."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

# The docker CLI of a fresh machine: the client is there, no engine answers, Compose v2 is not a command.
FRESH_MACHINE_DOCKER = """#!/bin/sh
touch "$(dirname "$0")/called"
case "$1" in
  info) echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock." >&2; exit 1 ;;
  compose) echo "docker: unknown command: docker compose" >&2; exit 1 ;;
  *) exit 1 ;;
esac
"""


@pytest.fixture()
def fake_bin():
    """A folder for fake commands that the unprivileged user can reach too (pytest's tmp_path is private)."""
    folder = Path(tempfile.mkdtemp(prefix="medchallenge-fake-bin-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder)


def path_with_docker(folder: Path, script: str) -> str:
    """PATH with a fake `docker` running `script` first."""
    (folder / "docker").write_text(script)
    (folder / "docker").chmod(0o755)
    return f"{folder}:{os.environ['PATH']}"


@pytest.fixture()
def fresh_path(fake_bin: Path) -> str:
    """A PATH whose `docker` behaves as on a fresh machine."""
    return path_with_docker(fake_bin, FRESH_MACHINE_DOCKER)


def as_unprivileged_user(command: list[str]) -> list[str]:
    """`command` run as uid/gid 65534 (nobody) when this test runs as root."""
    if os.getuid() != 0:
        return command
    return [shutil.which("setpriv"), "--reuid=65534", "--regid=65534", "--clear-groups", *command]


@pytest.mark.parametrize("goal", ["demo", "test", "images"])
def test_make_without_docker_stops_with_one_line_saying_what_to_run(repo, fake_bin, fresh_path, goal):
    result = subprocess.run(as_unprivileged_user(["make", "--no-print-directory", goal]), cwd=repo,
                            env=dict(os.environ, PATH=fresh_path), capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    ours = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(ours) == 1, result.stderr
    assert "no Docker engine answers" in ours[0] and "sudo make docker" in ours[0]
    assert "unknown command" not in result.stdout + result.stderr
    assert (fake_bin / "called").exists()  # the fresh machine's docker answered, not this machine's
    assert "pytest" not in result.stdout and "docker compose" not in result.stdout  # stopped before any work


def test_compose_v2_missing_is_named(repo, fake_bin):
    engine_without_compose = ('#!/bin/sh\n[ "$1" = info ] && exit 0\n'
                              'echo "docker: unknown command: docker $1" >&2; exit 1\n')
    result = subprocess.run(as_unprivileged_user(["bash", ".ci/require-docker.sh"]), cwd=repo, capture_output=True,
                            text=True, env=dict(os.environ, PATH=path_with_docker(fake_bin, engine_without_compose)))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert "Docker Compose v2 is missing" in result.stderr and "sudo make docker" in result.stderr


def test_as_root_docker_is_provisioned_as_ci_does(repo, fresh_path, tmp_path):
    if os.getuid() != 0:
        pytest.skip("provisioning is what root gets; this user gets the one-line message tested above")
    marker = tmp_path / "provisioned"
    fake_provision = tmp_path / "provision.sh"
    fake_provision.write_text(f"#!/bin/sh\ntouch {marker}\n")
    result = subprocess.run(["bash", ".ci/require-docker.sh"], cwd=repo, capture_output=True, text=True,
                            env=dict(os.environ, PATH=fresh_path, PROVISION_DOCKER_SCRIPT=str(fake_provision)))
    assert result.returncode == 0, result.stderr
    assert marker.exists()
    assert "provisioning Docker as CI does" in result.stdout


def test_a_ready_docker_passes_the_check(repo, docker_compose):
    result = subprocess.run(["bash", ".ci/require-docker.sh"], cwd=repo, capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""
