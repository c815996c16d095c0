"""Every number a phase reads is bounded where it is read (issue 37 items 6 and 8, issue 38 section 6): the
submissions file's, the Slurm site file's and the command line's memory, CPUs, time, disk, parallelism and poll
interval; a hostile value is one `error:` line, never a traceback, and one team's value out of bounds refuses that
team alone: the phase and the leaderboard go on for the others (tested with real containers through the local
backend)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import one_error_line
from medchallenge.cli import main as medchallenge
from medchallenge.errors import InputError
from medchallenge.jobs import EmulationError, JobLimits
from medchallenge.phase.slurm_options import read_site_file
from medchallenge.phase.submissions import read_submissions
from phase_helpers import build_image, phase_argv, synth_cohort


def write_toml(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "phase.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "message"), [
    ("x = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply to be a submissions file"),
    ('[[submission]]\nimage = "a:1"\n', "submission 1: team is missing"),
    ('[[submission]]\nteam = "a"\nimage = "a:1"\n[slurm]\nmax_parallel = "0; rm -rf /"\n',
     "[slurm]: the submissions file carries no scheduler options"),
])
def test_a_hostile_number_or_nesting_in_the_submissions_file_is_one_line(tmp_path, text, message):
    path = write_toml(tmp_path, text)
    with pytest.raises(InputError) as raised:
        read_submissions(path)
    line = str(raised.value)
    assert line.startswith(f"{path}: ") and "\n" not in line and message in line, line


@pytest.mark.parametrize(("text", "message"), [
    ("x = " + "[" * 5000 + "]" * 5000 + "\n", "not a TOML file"),
    ('max_parallel = "0; rm -rf /"\n', "max_parallel must be an integer"),
    ("max_parallel = 1e308\n", "max_parallel must be an integer"), ("max_parallel = 0\n", "max_parallel = 0: expected"),
    ("poll_s = -1\n", "poll_s = -1: expected 0.5 to 3600"), ("poll_s = inf\n", "poll_s = inf: expected"),
    ("step_memory_gb = nan\n", "step_memory_gb = nan: expected"),
    ("step_time_limit_s = 1e308\n", "step_time_limit_s = 1e+308: expected"),
    ("anything = -inf\n", "unknown key(s) 'anything'"),
])
def test_a_hostile_number_or_nesting_in_the_slurm_site_file_is_one_line(tmp_path, text, message):
    path = tmp_path / "site.toml"
    path.write_text(text)
    with pytest.raises(InputError) as raised:
        read_site_file(path)
    line = str(raised.value)
    assert line.startswith(f"--slurm-config {path}: ") and "\n" not in line and message in line, line


@pytest.mark.parametrize("memory", ["1e308", "inf", "-inf", "nan", "-1", "0.5", "4097"])
def test_a_submissions_memory_out_of_bounds_refuses_that_submission_alone(tmp_path, memory):
    path = write_toml(tmp_path, f'[[submission]]\nteam = "a"\nimage = "a:1"\nmemory_gb = {memory}\n\n'
                                '[[submission]]\nteam = "b"\nimage = "b:1"\nmemory_gb = 16\n')
    bad, good = read_submissions(path).submissions
    assert bad.refused == f"{path}: submission 1 (team a): memory_gb = {float(memory):g}: must be a number of GB " \
                          "above 1 and at most 4096"
    assert (good.refused, good.memory_gb) == (None, 16.0)


@pytest.mark.parametrize(("limits", "message"), [
    ({"memory_gb": 1e308}, "memory limit 1e+308 GB"), ({"memory_gb": float("nan")}, "memory limit nan GB"),
    ({"time_limit_s": float("inf")}, "time limit inf s"), ({"time_limit_s": -1}, "time limit -1 s"),
    ({"cpus": float("nan")}, "CPUs nan"), ({"cpus": 1e9}, "CPUs 1000000000.0"),
    ({"disk_gb": 1e308}, "disk limit 1e+308 GB"), ({"disk_gb": 1e-12}, "disk limit 1e-12 GB"),
])
def test_job_limits_are_bounded_wherever_they_come_from(limits, message):
    with pytest.raises(EmulationError, match=re.escape(message)):
        JobLimits(**limits)


@pytest.mark.parametrize("option", [
    ["--memory-gb", "inf"], ["--memory-gb", "1e308"], ["--memory-gb", "nan"], ["--time-limit", "-1"],
    ["--time-limit", "inf"], ["--cpus", "nan"], ["--disk-gb", "1e308"], ["--jobs", "0"], ["--jobs", "1000000000"],
    ["--max-parallel", "0"], ["--max-parallel", "1000000000"], ["--bootstrap", "1000000000"],
    ["--bootstrap-seed", "-1"], ["--bootstrap-level", "nan"],
])
def test_a_hostile_number_on_the_command_line_is_one_line_before_anything_is_written(tmp_path, capsys, option):
    path = write_toml(tmp_path, '[[submission]]\nteam = "a"\nimage = "a:1"\n')
    (tmp_path / "cases").mkdir()
    (tmp_path / "gt").mkdir()
    status = medchallenge(["phase", "run", "--challenge", "tb-caverns", "--submissions", str(path), "--cases",
                           str(tmp_path / "cases"), "--ground-truth", str(tmp_path / "gt"), "--output",
                           str(tmp_path / "out"), *option])
    assert status == 1
    line = one_error_line(capsys)
    assert option[0] in line or "limit" in line or "CPUs" in line, line
    assert not (tmp_path / "out").exists()


def test_one_teams_memory_of_1e308_does_not_stop_the_others_leaderboard(docker_compose, repo, tmp_path, capsys):
    image = build_image(repo, "ok")
    cohort = synth_cohort(tmp_path / "cohort", 2)
    path = write_toml(tmp_path / "submissions", f'[[submission]]\nteam = "bomb"\nimage = "{image}"\n'
                                                'memory_gb = 1e308\n\n'
                                                f'[[submission]]\nteam = "alpha"\nimage = "{image}"\n')
    out = tmp_path / "out"
    for _ in range(2):  # and again on a rerun: the refusal is kept, the others' results stand
        assert medchallenge(phase_argv(path, cohort, out)) == 0
        bomb = json.loads((out / "submissions" / "bomb" / "submission.json").read_text())
        assert bomb["jobs"] == [] and "memory_gb = 1e+308: must be a number of GB above 1" in bomb["refused"]
        board = json.loads((out / "leaderboard.json").read_text())
        assert [row["team"] for row in board["teams"]] == ["alpha"]
        alpha = json.loads((out / "submissions" / "alpha" / "report.json").read_text())
        assert [job["status"] for job in alpha["jobs"]] == ["succeeded", "succeeded"]
        printed = capsys.readouterr()
        assert "Traceback" not in printed.err and "OverflowError" not in printed.err
