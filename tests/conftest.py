"""Shared fixtures: the repository root, and Docker (required when REQUIRE_DOCKER=1 or in CI)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test of tests/e2e is `serial` (make test runs those one at a time, after the others in parallel)."""
    for item in items:
        if "e2e" in item.path.relative_to(REPO / "tests").parts[:1]:
            item.add_marker(pytest.mark.serial)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(autouse=True)
def process_state_restored():
    """What a test's in-process entry point sets for its whole process (`phase.task.main`: the owner-only umask, its
    SIGTERM and SIGINT handlers) restored after it, so that later tests see the umask the run started with."""
    umask = os.umask(0)
    os.umask(umask)
    handlers = {stop: signal.getsignal(stop) for stop in (signal.SIGTERM, signal.SIGINT)}
    yield
    os.umask(umask)
    for stop, handler in handlers.items():
        signal.signal(stop, handler)


def docker_problem() -> str | None:
    """Why docker compose cannot be used here, or None."""
    if shutil.which("docker") is None:
        return "no docker CLI on PATH"
    for command in (["docker", "info"], ["docker", "compose", "version"]):
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            return f"`{' '.join(command)}` failed: {result.stderr.strip().splitlines()[-1:]}"
    return None


@pytest.fixture(scope="session")
def docker_compose(repo: Path):
    """A callable running `docker compose -f compose.yaml ...`; fails (not skips) when Docker is required."""
    problem = docker_problem()
    if problem:
        if os.environ.get("REQUIRE_DOCKER") == "1" or os.environ.get("CI") == "true":
            pytest.fail(f"Docker is required (REQUIRE_DOCKER=1 or CI=true) but {problem}; run .ci/provision-docker.sh")
        pytest.skip(f"Docker not available: {problem} (set REQUIRE_DOCKER=1 to make this a failure)")

    def run(*args: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", "compose", "-f", str(repo / "compose.yaml"), *args],
                              env=dict(os.environ, **(env or {})), check=check, capture_output=True, text=True)

    return run


def require(what: str, problem: str | None) -> None:
    """Fail (REQUIRE_SLURM=1 or CI=true: .ci/run) or skip when `what` is not usable here."""
    if problem:
        if os.environ.get("REQUIRE_SLURM") == "1" or os.environ.get("CI") == "true":
            pytest.fail(f"{what} is required (REQUIRE_SLURM=1 or CI=true) but {problem}; run .ci/provision-slurm.sh")
        pytest.skip(f"{what} not available: {problem} (set REQUIRE_SLURM=1 to make this a failure)")


@pytest.fixture(scope="session")
def podman() -> None:
    """Podman usable here (provisioned with Slurm by .ci/provision-slurm.sh)."""
    found = shutil.which("podman") and subprocess.run(["podman", "info"], capture_output=True).returncode == 0
    require("Podman", None if found else "`podman info` failed or there is no podman")


@pytest.fixture(scope="session")
def slurm() -> None:
    """A Slurm cluster answering with an idle node (.ci/provision-slurm.sh makes a one-node one)."""
    found = shutil.which("sinfo") and subprocess.run(["sinfo", "--noheader", "--format", "%t"], capture_output=True,
                                                     text=True).stdout.split()
    require("Slurm", None if found else "`sinfo` lists no node")


def slurm_config() -> dict[str, str]:
    """`scontrol show config` as KEY: value."""
    shown = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True).stdout
    return {key.strip(): value.strip() for key, _, value in
            (line.partition("=") for line in shown.splitlines()) if value}


@pytest.fixture(scope="session")
def slurm_cgroup(slurm) -> None:
    """Slurm limits each step's memory to its --mem (task/cgroup; .ci/provision-slurm.sh where cgroup v1 allows)."""
    plugin = slurm_config().get("TaskPlugin", "")
    require("Slurm's task/cgroup", None if "task/cgroup" in plugin else f"TaskPlugin is {plugin or 'unknown'}")


@pytest.fixture(scope="session")
def slurm_preemption(slurm) -> None:
    """A partition `urgent` whose jobs preempt the default partition's (.ci/provision-slurm.sh)."""
    preempt = slurm_config().get("PreemptType", "")
    urgent = subprocess.run(["scontrol", "show", "partition", "urgent"], capture_output=True).returncode == 0
    require("Slurm's preemption", None if preempt == "preempt/partition_prio" and urgent else
            f"PreemptType is {preempt or 'unknown'}{'' if urgent else ', no partition urgent'}")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """(predictions, ground truth) of a small cohort per challenge (helpers.small_cohorts)."""
    from helpers import small_cohorts

    return small_cohorts(tmp_path_factory.mktemp("cohorts"))


@pytest.fixture(scope="module")
def studies(tmp_path_factory) -> dict:
    """The gateway tests' DICOM studies (see gateway_helpers.write_gateway_studies)."""
    from gateway_helpers import write_gateway_studies

    return write_gateway_studies(tmp_path_factory.mktemp("gateway_studies"))


@pytest.fixture
def pacs():
    """A PACS stand-in on loopback receiving the gateway's results (gateway_helpers.FakePacs)."""
    from gateway_helpers import FakePacs

    server = FakePacs()
    yield server
    server.close()
