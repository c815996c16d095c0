"""The Slurm backend's options without a cluster: what sbatch is asked for a submission's array, what `scontrol show
job` says of each task, what `sacct` says each task used, and the options refused (the backend against a real Slurm:
tests/e2e/test_slurm.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from medchallenge.errors import InputError
from medchallenge.phase.backend import Resources
from medchallenge.phase.layout import PhaseLayout
from medchallenge.phase.leases import job_lease, lease_held
from medchallenge.phase.records import backend_notes, read_state
from medchallenge.phase.slurm import (SlurmBackend, SlurmError, SlurmHandle, manifest_specs, parse_scontrol,
                                      phase_in_slurm, record_usage, slurm_bytes, slurm_seconds, submitted_jobs,
                                      task_options)
from medchallenge.phase.slurm_limits import ClusterLimits, cluster_limits
from medchallenge.phase.slurm_options import check_sbatch_option, read_site_file
from medchallenge.phase.submissions import read_submissions


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
    with pytest.raises(InputError, match=r"^Slurm backend: qos: not an option"):
        SlurmBackend(PhaseLayout(tmp_path), qos="long")
    with pytest.raises(InputError, match=r"^--max-parallel 0: expected at least 1"):
        SlurmBackend(PhaseLayout(tmp_path), max_parallel=0)
    backend = SlurmBackend(PhaseLayout(tmp_path), partition="gpu", options=["--qos=long", "--constraint=a100 80g"])
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


@pytest.mark.parametrize("option", ["--output=/tmp/x", "--export=ALL,PYTHONPATH=/tmp/evil", "--wrap=id",
                                    "--chdir=/", "--qos", "qos=long", "--partition=a\nb", "--open-mode=append", 7])
def test_an_sbatch_option_a_site_does_not_set_is_refused_in_one_line_wherever_it_is_given(tmp_path, option):
    with pytest.raises(InputError) as raised:
        check_sbatch_option(option, "--sbatch-option")
    assert "not an sbatch option a site sets (allowed: --account=..." in str(raised.value)
    assert "\n" not in str(raised.value)
    with pytest.raises(InputError, match="not an sbatch option a site sets"):
        SlurmBackend(PhaseLayout(tmp_path), options=[option])
    site = tmp_path / "site.toml"
    site.write_text(f"partition = \"gpu\"\noptions = [{json.dumps(option)}]\n")
    with pytest.raises(InputError, match=rf"^--slurm-config {site}: .*not an sbatch option a site sets"):
        read_site_file(site)


def test_a_site_file_gives_the_slurm_backend_s_options_checked_and_bounded(tmp_path):
    site = tmp_path / "site.toml"
    site.write_text('partition = "gpu"\naccount = "challenge"\nmax_parallel = 50\noptions = ["--qos=long", '
                    '"--no-requeue", "--gres=gpu:a100:1"]\njob_name_prefix = "cxr25-"\nmax_array_size = 1000\n'
                    'poll_s = 10\n')
    options = read_site_file(site)
    assert options == {"partition": "gpu", "account": "challenge", "max_parallel": 50,
                       "options": ["--qos=long", "--no-requeue", "--gres=gpu:a100:1"], "job_name_prefix": "cxr25-",
                       "max_array_size": 1000, "poll_s": 10.0}
    assert SlurmBackend(PhaseLayout(tmp_path), **options).job_name("alpha") == "cxr25-alpha"
    for text, message in [("poll_s = -1", "poll_s = -1: expected 0.5 to 3600"),
                          ("max_parallel = 1e308", "max_parallel must be an integer"),
                          ('job_name_prefix = "a b"', "a job name prefix is 1-32 letters"),
                          ("extra = '--qos=x'", "unknown key(s) 'extra'"), ("a = [[[", "not a TOML file")]:
        site.write_text(text + "\n")
        with pytest.raises(InputError, match=re.escape(message)):
            read_site_file(site)


def test_a_submissions_file_with_a_slurm_table_is_refused_saying_where_its_options_went(tmp_path):
    path = tmp_path / "submissions.toml"
    path.write_text('[[submission]]\nteam = "alpha"\nimage = "a:1"\n\n[slurm]\nextra = "--export=ALL"\n')
    with pytest.raises(InputError, match=re.escape(f"{path}: [slurm]: the submissions file carries no scheduler "
                                                   "options; give them as the site's (`phase run --slurm-config")):
        read_submissions(path)


FAKE_SLURM = """#!/bin/sh
# sbatch, squeue, scontrol and scancel of a cluster whose MaxArraySize is 3: each call noted in calls.log
echo "$(basename "$0") $*" >> "$(dirname "$0")/calls.log"
case "$(basename "$0")" in
  sbatch) n=$(cat "$(dirname "$0")/next" 2>/dev/null || echo 100); echo $((n + 1)) > "$(dirname "$0")/next"
          echo "$n" ;;
  scontrol) printf 'MaxArraySize            = 3\\nMaxJobCount             = 10000\\n' ;;
  squeue) cat "$(dirname "$0")/queue" 2>/dev/null ;;
  sacctmgr) cat "$(dirname "$0")/assoc" 2>/dev/null ||
            { echo "You are not running a supported accounting_storage plugin" >&2; exit 1; } ;;
esac
"""


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch) -> Path:
    """Slurm's client commands as FAKE_SLURM; returns their folder (calls.log: what was called)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for command in ("sbatch", "squeue", "scontrol", "scancel", "sacctmgr"):
        (folder / command).write_text(FAKE_SLURM)
        (folder / command).chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder


def sbatch_calls(folder: Path) -> list[list[str]]:
    return [line.split()[1:] for line in (folder / "calls.log").read_text().splitlines()
            if line.startswith("sbatch ")]


def test_a_submission_past_the_cluster_s_max_array_size_is_split_into_arrays_its_evaluation_waits_for_all(
        tmp_path, fake_slurm):
    layout = PhaseLayout.of(tmp_path / "out")
    assert cluster_limits().max_array_size == 3  # read from `scontrol show config`
    specs = [layout.task(f"j{i}") for i in range(7)]
    backend = SlurmBackend(layout, max_parallel=4, job_name_prefix="site-")
    group = backend.submit_tasks("alpha", specs, Resources(cpus=1, memory_gb=1, gpus=0, time_limit_s=60))
    assert [a.job_id for a in group.arrays] == ["100", "101", "102"]
    assert [len(manifest_specs(a.manifest)) for a in group.arrays] == [3, 3, 1]
    assert [s for a in group.arrays for s in manifest_specs(a.manifest)] == [spec.absolute() for spec in specs]
    evaluation = backend.submit_after([group], ["true"], "evaluate-alpha")
    calls = sbatch_calls(fake_slurm)
    assert [next(o for o in call if o.startswith("--array=")) for call in calls[:3]] == [
        "--array=0-2%1", "--array=0-2%1", "--array=0-0%1"]  # max_parallel 4 shared: at most 4 at once
    assert all("--job-name=site-alpha" in call for call in calls[:3])
    assert "--dependency=afterany:100:101:102" in calls[3] and "--job-name=site-evaluate-alpha" in calls[3]
    assert [o for o in calls[3] if o.startswith("100=") or o.startswith("102=")] == [
        f"100={group.arrays[0].manifest}", f"102={group.arrays[2].manifest}"]
    assert {h.job_id for h in submitted_jobs(layout)} == {"100", "101", "102", evaluation.job_id}
    (fake_slurm / "assoc").write_text("\n10\n")  # the association's MaxSubmitJobs (a cluster with slurmdbd)
    assert cluster_limits() == ClusterLimits(max_array_size=3, max_jobs=10)
    with pytest.raises(SlurmError, match=r"^11 tasks to submit: more than the 10 jobs this cluster takes"):
        SlurmBackend(layout).submit_tasks("gamma", specs + specs[:4], Resources(cpus=1, memory_gb=1, gpus=0,
                                                                                time_limit_s=60))
    site = SlurmBackend(layout, max_array_size=2)  # a site's own cap below the cluster's
    assert [len(manifest_specs(a.manifest)) for a in site.submit_tasks("beta", specs[:5], Resources(
        cpus=1, memory_gb=1, gpus=0, time_limit_s=60)).arrays] == [2, 2, 1]


def test_an_earlier_run_s_tasks_still_in_slurm_hold_their_jobs_and_its_pending_steps_are_cancelled(
        tmp_path, fake_slurm):
    layout = PhaseLayout.of(tmp_path / "out")
    specs = [layout.task(f"j{i}") for i in range(3)]
    earlier = SlurmBackend(layout)
    group = earlier.submit_tasks("alpha", specs, Resources(cpus=1, memory_gb=1, gpus=0, time_limit_s=60))
    evaluation = earlier.submit_after([group], ["true"], "evaluate-alpha")
    earlier.submit_after([evaluation], ["true"], "leaderboard")
    # after a Ctrl-C: task 0 over, 1 running, 2 pending (squeue --array: one line each); the steps pending
    (fake_slurm / "queue").write_text("100_1 RUNNING\n100_2 PENDING\n101 PENDING\n102 PENDING\n")
    assert phase_in_slurm(layout) == {"j1": "running", "j2": "queued"}
    held = SlurmBackend(layout).held()
    assert sorted(held) == ["j1", "j2"] and {h.job_id for h in held.values()} == {"100"}
    assert [line for line in (fake_slurm / "calls.log").read_text().splitlines() if line.startswith("scancel")] == [
        "scancel 101", "scancel 102"]
    assert {h.job_id for h in submitted_jobs(layout)} == {"100"}  # the records of the cancelled steps dropped
    (fake_slurm / "queue").write_text("")
    assert SlurmBackend(layout).held() == {} and submitted_jobs(layout) == []


HOLD = """
import sys, time
from pathlib import Path
from medchallenge.phase.layout import PhaseLayout
from medchallenge.phase.leases import job_lease
with job_lease(PhaseLayout(Path(sys.argv[1])), "j0") as holder:
    print("held" if holder is None else "refused", flush=True)
    time.sleep(60)
"""


def test_a_job_s_lease_is_held_by_one_task_and_one_naming_a_live_slurm_task_is_not_broken(
        tmp_path, fake_slurm, monkeypatch):
    layout = PhaseLayout.of(tmp_path / "out")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "SLURM_ARRAY_JOB_ID": "100",
           "SLURM_ARRAY_TASK_ID": "0"}
    first = subprocess.Popen([sys.executable, "-c", HOLD, str(layout.out)], stdout=subprocess.PIPE, text=True,
                             env=env)
    try:
        assert first.stdout.readline().strip() == "held"
        assert lease_held(layout, "j0")
        with job_lease(layout, "j0") as holder:
            assert holder["slurm_job_id"] == "100_0"  # another task's: not run here
    finally:
        first.kill()
        first.wait()
    assert not lease_held(layout, "j0")
    # a filesystem whose locks stay on one host: the lease names Slurm task 100_0, which Slurm still runs
    layout.lease("j0").write_text(json.dumps({"host": "node7", "pid": 1, "slurm_job_id": "100_0"}))
    (fake_slurm / "queue").write_text("100_0 RUNNING\n")
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "200")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    with job_lease(layout, "j0") as holder:
        assert holder["slurm_job_id"] == "100_0"
    (fake_slurm / "queue").write_text("")  # over: the lease is taken
    with job_lease(layout, "j0") as holder:
        assert holder is None and json.loads(layout.lease("j0").read_text())["slurm_job_id"] == "200_3"
    assert layout.lease("j0").read_text() == ""
