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


# A `docker` whose engine, Compose and base image answer; the base image's configuration is `config`.
def engine_with_base_image(config: str) -> str:
    return ('#!/bin/sh\ncase "$1" in\n  info|compose) exit 0 ;;\n'
            f'  image) case "$*" in *--format*) echo \'{config}\' ;; esac; exit 0 ;;\n  *) exit 1 ;;\nesac\n')


@pytest.mark.parametrize(("config", "current"), [
    ("|null", False),                                # the first stand-in: no configuration at all
    ("1|[\"PATH=/usr/bin\"]", False),                # another recipe's stand-in
    ("2|[\"PATH=/usr/bin\",\"LANG=C.UTF-8\"]", True),  # this recipe's
    ("|[\"PATH=/usr/local/bin\",\"PYTHON_VERSION=3.11.9\"]", True),  # the real image, pulled or loaded
])
def test_an_outdated_stand_in_base_image_is_named(repo, fake_bin, config, current):
    result = subprocess.run(as_unprivileged_user(["bash", ".ci/require-docker.sh"]), cwd=repo, capture_output=True,
                            text=True, env=dict(os.environ, PATH=path_with_docker(fake_bin, engine_with_base_image(config))))
    if current:
        assert result.returncode == 0 and result.stderr == "", result.stderr
    else:
        assert result.returncode == 1
        assert "outdated offline stand-in" in result.stderr and "sudo make docker" in result.stderr


def minimal_wheel(folder: Path) -> Path:
    """A pure-Python wheel of one module, `greeting` (pip installs it with no index and no build step)."""
    import zipfile
    wheel = folder / "greeting-1.0-py3-none-any.whl"
    files = {"greeting.py": "def hello():\n    return 'hello from pip'\n",
             "greeting-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: greeting\nVersion: 1.0\n",
             "greeting-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{name},,\n" for name in files) + "greeting-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in {**files, "greeting-1.0.dist-info/RECORD": record}.items():
            archive.writestr(name, text)
    return wheel


# A participant's Dockerfile written for the real python:3.11-slim: `python` and `pip` commands, its environment.
REAL_IMAGE_DOCKERFILE = """ARG BASE=python:3.11-slim
FROM $BASE
COPY greeting-1.0-py3-none-any.whl /tmp/
RUN pip install --no-cache-dir --no-index /tmp/greeting-1.0-py3-none-any.whl && pip --version && python --version
RUN test -n "$PYTHON_VERSION" && test "$LANG" = C.UTF-8 && python -c "import sys; assert sys.version.startswith('$PYTHON_VERSION')"
COPY main.py /app/main.py
ENTRYPOINT ["python", "/app/main.py"]
"""


def test_a_dockerfile_for_the_real_base_image_builds_and_runs(docker_compose, tmp_path):
    base = os.environ.get("BASE_IMAGE", "python:3.11-slim")
    config = subprocess.run(["docker", "image", "inspect", "--format", "{{json .Config.Cmd}}", base],
                            capture_output=True, text=True, check=True)
    assert config.stdout.strip() == '["python3"]'
    default_command = subprocess.run(["docker", "run", "--rm", "-i", "--network", "none", base],
                                     input="print(6 * 7)\n", capture_output=True, text=True, timeout=120)
    assert default_command.stdout.strip() == "42", default_command.stderr
    minimal_wheel(tmp_path)
    (tmp_path / "main.py").write_text("import greeting\nprint(greeting.hello())\n")
    (tmp_path / "Dockerfile").write_text(REAL_IMAGE_DOCKERFILE)
    tag = "medchallenge-test/real-base-dockerfile:1"
    build = subprocess.run(["docker", "build", "--network", "none", "--build-arg", f"BASE={base}", "-t", tag, str(tmp_path)], capture_output=True,
                           text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    try:
        run = subprocess.run(["docker", "run", "--rm", "--network", "none", tag], capture_output=True, text=True,
                             timeout=120)
        assert run.returncode == 0 and run.stdout.strip() == "hello from pip", run.stderr
    finally:
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True)
