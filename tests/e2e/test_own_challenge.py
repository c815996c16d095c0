"""An organiser's own challenge, defined only by files (examples/lung-nodule: challenge.toml over
grand-challenge-forge's pack-context.json, an evaluation container in SimpleITK and another in NumPy and SciPy
alone), through pre-flight, a phase of three teams x four cases locally and on Slurm, and the leaderboard (issue 39
section 5). The images are built offline from the project's wheelhouse by the example's build.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lung-nodule"
TEAMS_BY_DICE = ["alpha", "gamma", "beta"]  # the example's teams: a fair threshold, a dilation, a leaky threshold


def medchallenge(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "medchallenge.cli", *argv], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=900)


@pytest.fixture(scope="module")
def lung(docker_compose, repo, tmp_path_factory) -> SimpleNamespace:
    root = tmp_path_factory.mktemp("lung nodule")
    subprocess.run([sys.executable, str(EXAMPLE / "make_data.py"), "--out", str(root / "data")], check=True,
                   capture_output=True)
    subprocess.run([sys.executable, str(EXAMPLE / "build.py"), "--wheelhouse", str(repo / "wheelhouse"),
                    "--build-folder", str(root / "build")], check=True, capture_output=True)
    data = root / "data"
    common = ["--challenge", str(EXAMPLE / "challenge.toml"), "--cases", str(data / "cases"), "--ground-truth",
              str(data / "ground-truth")]
    return SimpleNamespace(root=root, data=data, common=common)


def phase(lung: SimpleNamespace, out: Path, *extra: str) -> dict:
    result = medchallenge("phase", "run", *lung.common, "--submissions", str(lung.data / "submissions.toml"),
                          "--output", str(out), "--bootstrap", "200", "--no-progress", *extra)
    assert result.returncode == 0, result.stdout[-3000:]
    return json.loads((out / "leaderboard.json").read_text())


def comparable(board: dict) -> dict:
    """A leaderboard.json without the time its bootstrap took."""
    return {**board, "bootstrap": {k: v for k, v in board["bootstrap"].items() if k != "seconds"}}


def test_preflight_of_a_teams_image_scores_it_and_shows_its_masks_worst_first(lung):
    out = lung.root / "preflight"
    result = medchallenge("preflight", *lung.common, "--image", "lung-nodule-algorithm:1", "--model",
                          str(lung.data / "models" / "alpha.tar.gz"), "--output", str(out))
    assert result.returncode == 0, result.stdout[-3000:]
    report = json.loads((out / "preflight.json").read_text())
    evaluation = report["evaluation"]
    assert evaluation["error"] is None and set(evaluation["aggregates"]) == {"Dice", "HD95 (mm)"}
    metrics = json.loads((out / "evaluation" / "metrics.json").read_text())
    assert evaluation["aggregates"]["Dice"] == metrics["aggregates"]["dice"]["mean"]
    figures = evaluation["review"]["figures"]
    assert len(figures) == 4 and all((out / f["file"]).stat().st_size > 1000 for f in figures)
    shown = [float(f["caption"].split(";")[0].removeprefix("Dice ")) for f in figures]
    assert shown == sorted(shown), "the worst-scoring case first"
    assert "nodule-mask" in (out / "preflight.html").read_text()


@pytest.fixture(scope="module")
def local_phase(lung) -> tuple[Path, dict]:
    out = lung.root / "local"
    return out, phase(lung, out, "--jobs", "2")


def test_the_phase_ranks_by_the_definitions_columns_with_intervals(local_phase):
    out, board = local_phase
    assert [row["team"] for row in board["teams"]] == TEAMS_BY_DICE
    assert board["metric"] == "Dice" and board["higher_is_better"] is True
    assert all(row["low"] <= row["value"] <= row["high"] for row in board["teams"])
    assert [c["intervals"] for c in board["columns"]] == [True, True]
    for row in board["teams"]:
        metrics = json.loads((out / "submissions" / row["team"] / "evaluation" / "metrics.json").read_text())
        assert row["value"] == metrics["aggregates"]["dice"]["mean"]


def test_ranked_by_hd95_lower_is_better(lung, local_phase):
    out, _ = local_phase
    by_hd95 = phase(lung, out, "--metric", "HD95 (mm)")
    values = [row["value"] for row in by_hd95["teams"]]
    assert by_hd95["higher_is_better"] is False and values == sorted(values)
    assert values[-1] == max(values) and by_hd95["teams"][-1]["team"] == "beta"  # its leaky threshold
    phase(lung, out)  # and back: the same folder, the board of the definition's own score again


def test_a_phase_through_slurm_gives_the_leaderboard_of_the_local_backend(lung, local_phase, slurm):
    _, local = local_phase
    through_slurm = phase(lung, lung.root / "slurm", "--backend", "slurm", "--max-parallel", "2")
    assert comparable(through_slurm) == comparable(local)


def test_the_evaluation_written_without_the_project_gives_the_same_scores(lung, local_phase):
    out, board = local_phase
    plain = lung.root / "plain-definition"
    plain.mkdir()
    shutil.copy(EXAMPLE / "pack-context.json", plain)
    text = (EXAMPLE / "challenge.toml").read_text()
    (plain / "challenge.toml").write_text(text.replace('"lung-nodule-evaluation:1"',
                                                       '"lung-nodule-evaluation-plain:1"'))
    result = medchallenge("leaderboard", "--challenge", str(plain / "challenge.toml"), "--ground-truth",
                          str(lung.data / "ground-truth"), "--submissions", str(out / "evaluation-inputs"),
                          "--output", str(lung.root / "plain-board"), "--bootstrap", "200")
    assert result.returncode == 0, result.stdout[-3000:]
    for row in board["teams"]:
        ours = json.loads((out / "submissions" / row["team"] / "evaluation" / "metrics.json").read_text())
        theirs = json.loads((lung.root / "plain-board" / "teams" / row["team"] / "metrics.json").read_text())
        assert ours["case"].keys() == theirs["case"].keys()
        for case, scores in ours["case"].items():
            assert scores["dice"] == pytest.approx(theirs["case"][case]["dice"], abs=1e-12)
            assert scores["hd95"] == pytest.approx(theirs["case"][case]["hd95"], abs=1e-5)  # SimpleITK's float32 map
    plain_board = json.loads((lung.root / "plain-board" / "leaderboard.json").read_text())
    assert [row["team"] for row in plain_board["teams"]] == TEAMS_BY_DICE


def test_the_emulator_runs_a_teams_image_on_the_definitions_sockets(lung):
    work = lung.root / "emulator"
    result = subprocess.run([sys.executable, "-m", "medchallenge.grand_challenge.emulator",
                             str(EXAMPLE / "challenge.toml"), "--cases", str(lung.data / "cases"), "--work", str(work),
                             "--image", "lung-nodule-algorithm:1"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    eval_input = Path(result.stdout.strip().splitlines()[-1])
    predictions = json.loads((eval_input / "predictions.json").read_text())
    assert len(predictions) == 4
    for job in predictions:
        (output,) = job["outputs"]
        assert output["interface"]["slug"] == "nodule-mask" and output["interface"]["kind"] == "Segmentation"
        assert list((eval_input / job["pk"] / "output" / "images" / "nodule-mask").glob("*.mha"))
