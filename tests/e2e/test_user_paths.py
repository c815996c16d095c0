"""The commands that run containers (pre-flight, gc-emulate, phase run and status) with paths as users type them:
relative to the folder they work in, through `..`, a symbolic link, with spaces and `~`, run from that folder by the
`medchallenge` command as a shell runs it (the engine is given absolute paths, whatever the user typed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

IMAGE = "mc-test-h38-paths:ok"  # its own tag (labelled), not the pre-flight tests' images


@pytest.fixture(scope="module")
def work(docker_compose, repo, tmp_path_factory) -> SimpleNamespace:
    """A user's folder with spaces in its name, the cohort beside it reached through a link, HOME for `~`."""
    root = tmp_path_factory.mktemp("user paths")
    subprocess.run(["docker", "build", "--quiet", "--build-arg", "BEHAVIOUR=ok", "--label", "mc-test-h38-paths=ok",
                    "--tag", IMAGE, str(repo / "tests" / "job_images" / "broken")], check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "medchallenge.synth", "tb-caverns", "--out", str(root / "cohort"),
                    "--cases", "2", "--shape", "32", "32", "8", "--seed", "5"], check=True, capture_output=True)
    folder = root / "my work"
    folder.mkdir()
    (root / "cases link").symlink_to(root / "cohort" / "input", target_is_directory=True)
    (root / "home").mkdir()
    return SimpleNamespace(root=root, folder=folder, home=root / "home")


def medchallenge(work: SimpleNamespace, *args: str) -> subprocess.CompletedProcess:
    """`medchallenge ARGS` run in the user's folder (no shell: `~` arrives as typed, as `--opt=~/x` does)."""
    return subprocess.run([sys.executable, "-m", "medchallenge.cli", *args], cwd=work.folder, capture_output=True,
                          text=True, env=dict(os.environ, HOME=str(work.home)), timeout=600)


def test_preflight_with_a_relative_output_folder_a_link_dots_and_spaces(work):
    result = medchallenge(work, "preflight", "--challenge", "tb-caverns", "--image", IMAGE, "--cases",
                          "../cases link", "--ground-truth", "../cohort/../cohort/ground_truth", "--output",
                          "pre flight/", "--bootstrap", "20", "--memory-gb", "1.5")
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((work.folder / "pre flight" / "preflight.json").read_text())
    assert [job["status"] for job in report["jobs"]] == ["succeeded", "succeeded"] and report["ready"]
    assert "report: pre flight/preflight.html" in result.stdout


def test_preflight_with_an_output_folder_under_home_written_with_a_tilde(work):
    result = medchallenge(work, "preflight", "--challenge", "tb-caverns", "--image", IMAGE, "--cases=../cases link",
                          "--output=~/preflight", "--bootstrap", "0", "--memory-gb", "1.5")
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads((work.home / "preflight" / "preflight.json").read_text())["summary"]["num_succeeded"] == 2
    assert not (work.folder / "~").exists()


def test_gc_emulate_with_a_relative_work_folder(work):
    result = medchallenge(work, "gc-emulate", "tb-caverns", "--cases", "../cases link", "--work", "emulated",
                          "--image", IMAGE)
    assert result.returncode == 0, result.stderr[-2000:]
    assert (work.folder / result.stdout.strip().splitlines()[-1]).is_dir()
    assert len(list((work.folder / "emulated" / "jobs").iterdir())) == 2


def test_phase_run_and_status_with_relative_paths(work):
    (work.folder / "phase").mkdir()
    (work.folder / "phase" / "submissions.toml").write_text(f'[[submission]]\nteam = "alpha"\nimage = "{IMAGE}"\n')
    result = medchallenge(work, "phase", "run", "--challenge", "tb-caverns", "--submissions",
                          "phase/submissions.toml", "--cases", "../cases link", "--ground-truth",
                          "../cohort/ground_truth", "--output", "phase out/", "--memory-gb", "1.5", "--bootstrap",
                          "20", "--no-progress")
    assert result.returncode == 0, result.stderr[-2000:]
    teams = json.loads((work.folder / "phase out" / "leaderboard.json").read_text())["teams"]
    assert [team["team"] for team in teams] == ["alpha"]
    status = medchallenge(work, "phase", "status", "phase out", "--json")
    assert status.returncode == 0, status.stderr[-2000:]
    assert json.loads(status.stdout)["complete"]
