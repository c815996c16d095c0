"""Podman as the job runner's engine (`--engine podman`, the daemonless engine of clusters without a Docker daemon):
the images of tests/e2e/test_preflight.py, loaded into Podman from a `docker save` archive, give the same report
lines as under Docker (no network, memory and time limits, files written outside /output, the image's own log)."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from e2e.test_preflight import BROKEN, cohort, images, run_preflight, tag  # noqa: F401 (fixtures)

from medchallenge.jobs.docker_run import ImageConfig

BEHAVIOURS = ["ok", "busy", "crash", "memory-kill", "network", "outside", "slow"]


@pytest.fixture(scope="module")
def podman_images(images, podman, tmp_path_factory) -> None:  # noqa: F811
    """The behaviours' images in Podman's store under their Docker tags, loaded from one `docker save` archive (a
    phase loads a team's archive without its tags: tests/hostile/test_phase_archives.py)."""
    archive = tmp_path_factory.mktemp("archive") / "images.tar"
    subprocess.run(["docker", "save", "--output", str(archive), *[tag(b) for b in BEHAVIOURS]], check=True)
    for behaviour in BEHAVIOURS:
        subprocess.run(["podman", "rmi", "--force", tag(behaviour)], capture_output=True)
    docker_id = ImageConfig.inspect(tag("ok")).id
    subprocess.run(["podman", "load", "--input", str(archive)], check=True, capture_output=True)
    assert ImageConfig.inspect(tag("ok"), engine="podman").id == docker_id  # one id for both engines


@pytest.mark.parametrize("behaviour", BEHAVIOURS)
def test_podman_runs_the_job_under_the_same_conditions_as_docker(podman_images, cohort, tmp_path,  # noqa: F811
                                                                 behaviour):
    status, report = run_preflight(behaviour, cohort, tmp_path / "out", "--engine", "podman")
    assert status == (0 if behaviour in ("ok", "busy") else 1)
    for job in report["jobs"]:
        if behaviour == "busy":  # a second of CPU time: the container's cgroup, as under Docker
            assert job["status"] == "succeeded" and 0.5 < job["cpu_seconds"] <= job["wall_seconds"], job
        elif behaviour == "ok":
            assert job["status"] == "succeeded" and job["exit_code"] == 0 and job["peak_memory_bytes"] > 1 << 20
            assert job["stdout_tail"][0].startswith("read ['") and job["stdout_tail"][0].endswith("model []")
            assert not any("outside /output" in note for note in job["notes"]), job["notes"]
        else:
            assert job["status"] == "failed" and re.match(BROKEN[behaviour], job["error"]), job["error"]
    left = subprocess.run(["podman", "ps", "--all", "--format", "json"], capture_output=True, text=True, check=True)
    assert not [c for c in json.loads(left.stdout or "[]") if tag(behaviour) in c.get("Image", "")]
