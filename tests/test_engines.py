"""Where Podman's command line differs from Docker's (the conditions themselves under both engines:
tests/e2e/test_podman.py): its open-files and processes limits, the GPUs Slurm gave the job, the /etc it mounts."""

from __future__ import annotations

import resource

import pytest

from medchallenge.jobs import DockerImage, EmulationError
from medchallenge.jobs.docker_run import PIDS_LIMIT, engine_differences, written_outside


def test_podman_is_given_limits_within_the_runner_s_own_and_docker_none(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_GPUS", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    options = engine_differences("podman", gpu=False)
    nofile = int(options[options.index("--ulimit") + 1].split("=")[1].split(":")[0])
    assert 0 < nofile <= hard and f"nproc={PIDS_LIMIT}:{PIDS_LIMIT}" in options
    assert engine_differences("docker", gpu=False) == []
    assert engine_differences("docker", gpu=True) == ["--gpus", "1"]


def test_the_gpus_slurm_gave_the_job_are_the_container_s(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # renumbered in a constrained step: not the node's ids
    monkeypatch.setenv("SLURM_JOB_GPUS", "2,3")
    assert engine_differences("docker", gpu=True) == ["--gpus", '"device=2,3"']
    assert engine_differences("podman", gpu=True)[-4:] == ["--device", "nvidia.com/gpu=2", "--device",
                                                           "nvidia.com/gpu=3"]
    # a GPU the caller chose (a gateway route's, from its pool) is the container's, whatever the environment names
    assert engine_differences("docker", gpu=True, devices=["1"]) == ["--gpus", '"device=1"']
    assert engine_differences("podman", gpu=True, devices=["1"])[-2:] == ["--device", "nvidia.com/gpu=1"]


def test_podman_s_own_etc_is_not_the_job_s_writing_but_a_file_there_is():
    diff = "C /etc\nA /etc/written-by-job\nC /opt\nA /opt/x\n"
    assert written_outside(diff, "podman") == ["/etc/written-by-job", "/opt/x"]
    assert written_outside("C /etc\n", "podman") == [] and written_outside("C /etc\n", "docker") == ["/etc"]


def test_an_unknown_engine_is_one_line():
    with pytest.raises(EmulationError, match="^engine singularity: not one of docker, podman$"):
        DockerImage("x", engine="singularity")
