"""The Slurm backend's options without a cluster: what sbatch is asked for a submission's array, what `scontrol show
job` says of each task, and the options refused (the backend against a real Slurm: tests/e2e/test_slurm.py)."""

from __future__ import annotations

import pytest

from medchallenge.errors import InputError
from medchallenge.phase.backend import Resources
from medchallenge.phase.layout import PhaseLayout
from medchallenge.phase.slurm import SlurmBackend, parse_scontrol, task_options


def test_an_array_asks_for_the_job_s_resources_plus_the_runner_s_and_is_throttled():
    options = task_options(Resources(cpus=1.5, memory_gb=1.5, gpus=1, time_limit_s=1200), 500, 50)
    assert options == ["--array=0-499%50", "--cpus-per-task=2", "--mem=2048M", "--time=35", "--requeue",
                       "--gres=gpu:1"]
    assert task_options(Resources(cpus=2, memory_gb=8, gpus=0, time_limit_s=300), 1, None)[:2] == [
        "--array=0-0", "--cpus-per-task=2"]


def test_scontrol_s_one_line_per_task_is_read_by_key():
    text = ("JobId=3 ArrayJobId=1 ArrayTaskId=1 ArrayTaskThrottle=2 JobName=mc-alpha UserId=root(0) "
            "JobState=NODE_FAIL Reason=None Dependency=(null) Requeue=1 Restarts=2 BatchFlag=1 ExitCode=0:9 "
            "Command=(null) WorkDir=/shared/out\n"
            "JobId=1 ArrayJobId=1 ArrayTaskId=2-3%2 JobState=PENDING Reason=JobArrayTaskLimit Restarts=0\n")
    first, pending = parse_scontrol(text)
    assert (first["ArrayTaskId"], first["JobState"], first["Restarts"], first["ExitCode"]) == (
        "1", "NODE_FAIL", "2", "0:9")
    assert pending["ArrayTaskId"] == "2-3%2" and pending["JobState"] == "PENDING"


def test_an_unknown_slurm_option_or_a_bad_throttle_is_one_line(tmp_path):
    with pytest.raises(InputError, match=r"^\[slurm\] qos: not an option of the Slurm backend"):
        SlurmBackend(PhaseLayout(tmp_path), qos="long")
    with pytest.raises(InputError, match=r"^--max-parallel 0: expected at least 1"):
        SlurmBackend(PhaseLayout(tmp_path), max_parallel=0)
    backend = SlurmBackend(PhaseLayout(tmp_path), partition="gpu", extra="--qos=long --constraint='a100 80g'")
    assert backend.common == ["--partition=gpu", "--qos=long", "--constraint=a100 80g"]
