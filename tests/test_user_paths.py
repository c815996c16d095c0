"""The commands without containers (synth, evaluate, infer, leaderboard) with paths as users type them: relative to
the folder they work in, through `..`, a symbolic link, with spaces, and `~` as a program given the words without a
shell (or a shell in `--output=~/x`) passes it; and `medchallenge phase --help`. The container commands:
tests/e2e/test_user_paths.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def user(tmp_path) -> tuple[Path, Path]:
    """(the folder the user works in, with a space in its name; HOME)."""
    folder, home = tmp_path / "my work", tmp_path / "home"
    folder.mkdir()
    home.mkdir()
    return folder, home


def medchallenge(folder: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "medchallenge.cli", *args], cwd=folder, capture_output=True,
                            text=True, env=dict(os.environ, HOME=str(home)), timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def test_synth_evaluate_and_leaderboard_with_relative_linked_spaced_and_tilde_paths(user):
    folder, home = user
    medchallenge(folder, home, "synth", "object-cxr", "--out=~/cxr data", "--seed", "3")
    assert (home / "cxr data" / "ground_truth").is_dir() and not (folder / "~").exists()
    (folder / "team link").symlink_to(home / "cxr data" / "predictions", target_is_directory=True)
    medchallenge(folder, home, "evaluate", "object-cxr", "--input", "team link", "--ground-truth=~/cxr data/"
                 "ground_truth", "--output", "../my work/metrics out", "--no-plots")
    assert "froc" in json.loads((folder / "metrics out" / "metrics.json").read_text())["aggregates"]
    (folder / "teams").mkdir()
    (home / "cxr data" / "predictions").rename(folder / "teams" / "alpha")  # a team's folder is its own, no link
    medchallenge(folder, home, "leaderboard", "--challenge", "object-cxr", "--ground-truth=~/cxr data/ground_truth",
                 "--submissions", "teams/", "--output", "board", "--bootstrap", "20", "--no-progress")
    assert [row["team"] for row in json.loads((folder / "board" / "leaderboard.json").read_text())["teams"]] == \
        ["alpha"]


def test_infer_with_a_tilde_input_a_relative_output_and_a_model_through_dots(user, repo):
    folder, home = user
    medchallenge(folder, home, "synth", "tb-caverns", "--out=~/tb", "--cases", "1", "--shape", "32", "32", "8",
                 "--seed", "1")
    model = os.path.relpath(repo / "algorithms" / "tb_caverns" / "model", folder)
    medchallenge(folder, home, "infer", "tb-caverns", "--input=~/tb/input", "--output", "tb predictions/", "--model",
                 model)
    assert list((folder / "tb predictions").iterdir())


def test_gateway_check_with_its_configuration_under_home_written_with_a_tilde(user):
    from gateway_helpers import config_text

    folder, home = user
    (home / "gateway config.toml").write_text(config_text(home / "work", 11112, 4242, ["true"]))
    assert "route" in medchallenge(folder, home, "gateway", "--config=~/gateway config.toml", "--check").stdout


def test_phase_help_lists_both_commands_and_their_options(user):
    text = medchallenge(*user, "phase", "--help").stdout
    assert "run " in text and "status " in text
    for option in ("--submissions", "--cases", "--ground-truth", "--backend", "--engine", "--jobs", "--json"):
        assert option in text, option
