"""The Slurm backend's options without a cluster: what sbatch is asked for a submission's array, what `scontrol show
job` says of each task, what `sacct` says each task used, and the options refused (the backend against a real Slurm:
tests/e2e/test_slurm.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from medchallenge.errors import InputError
from medchallenge.phase.backend import Resources
from medchallenge.phase.layout import PhaseLayout
from medchallenge.phase.records import backend_notes, read_state
from medchallenge.phase.slurm import (SlurmBackend, SlurmHandle, parse_scontrol, record_usage, slurm_bytes,
                                      slurm_seconds, task_options)


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


@pytest.mark.parametrize(("text", "seconds"), [("00:01.234", 1.234), ("01:02:03", 3723.0), ("1-00:00:02", 86_402.0),
                                               ("12:00", 720.0), ("", None), ("n/a", None), ("1:2:3:4", None)])
def test_sacct_s_times_are_read_as_seconds(text, seconds):
    assert slurm_seconds(text) == seconds


@pytest.mark.parametrize(("text", "size"), [("1234K", 1234 << 10), ("1.5M", 3 << 19), ("0", 0), ("2G", 2 << 30),
                                            ("", None), ("12Q", None)])
def test_sacct_s_sizes_are_read_as_bytes(text, size):
    assert slurm_bytes(text) == size


SACCT = """#!/bin/sh
case "$*" in
  *--jobs=41*) printf '%s\\n' '41_0|COMPLETED|00:01.500|' '41_0.batch|COMPLETED|00:01.500|102400K' \\
                 '41_0.extern|COMPLETED|00:00:00|0' '41_1|RUNNING|00:00.100|' '41_1.batch|RUNNING|00:00.100|' ;;
  *) echo "Slurm accounting storage is disabled" >&2; exit 1 ;;
esac
"""


def test_where_sacct_answers_each_finished_task_gets_its_batch_step_s_cpu_and_max_rss_and_elsewhere_nothing(
        tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "sacct").write_text(SACCT)
    (tmp_path / "bin" / "sacct").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    layout = PhaseLayout.of(tmp_path / "out")
    manifest = tmp_path / "alpha-1.tasks"
    manifest.write_text("".join(f"{layout.task(job)}\n" for job in ("j0", "j1", "j2")))
    for index, job in enumerate(("j0", "j1", "j2")):
        layout.job(job).mkdir(parents=True)
        layout.state(job).write_text(json.dumps({"status": "succeeded", "slurm_job_id": f"41_{index}"}))
    assert record_usage(layout, SlurmHandle("41", manifest)) == ["j0"]  # j1's step still runs; j2 unknown to sacct
    state = read_state(layout, "j0")
    assert (state["slurm_cpu_seconds"], state["slurm_max_rss_bytes"]) == (1.5, 100 << 20)
    assert "slurm_cpu_seconds" not in read_state(layout, "j1")
    assert backend_notes(state) == ["Slurm's accounting of the task (its runner: the container is not in the Slurm "
                                    "step): CPU 1.5 s, MaxRSS 100 MiB"]
    for index, job in enumerate(("k0", "k1")):  # a cluster without slurmdbd: nothing, and no error
        layout.job(job).mkdir(parents=True)
        layout.state(job).write_text(json.dumps({"status": "failed", "slurm_job_id": f"52_{index}"}))
    other = tmp_path / "beta-1.tasks"
    other.write_text(f"{layout.task('k0')}\n{layout.task('k1')}\n")
    assert record_usage(layout, SlurmHandle("52", other)) == []
    assert read_state(layout, "k0") == {"status": "failed", "slurm_job_id": "52_0"}
