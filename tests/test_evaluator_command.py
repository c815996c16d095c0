"""The one evaluator command: the same flags, workers default and metrics.json envelope for every challenge, and
per-case records that round-trip through JSON."""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path

import pytest

from medchallenge.evaluator import META_KEYS, build_parser, default_workers
from medchallenge.registry import CHALLENGES
from medchallenge.synth.__main__ import main as synth_main

TESTS = Path(__file__).parent


def evaluator(name: str):
    return importlib.import_module(CHALLENGES[name].evaluator_module).EVALUATOR


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """(predictions, ground truth) of a small cohort per challenge."""
    root = tmp_path_factory.mktemp("cohorts")
    tb_gt, tb_pred = root / "tb" / "gt", root / "tb" / "pred"
    tb_gt.mkdir(parents=True)
    tb_pred.mkdir()
    fixtures = TESTS / "tb_caverns" / "fixtures"
    shutil.copy(fixtures / "gt.csv", tb_gt / "gt_boxes.csv")
    shutil.copy(fixtures / "all_ids.csv", tb_gt / "all_ids.csv")
    shutil.copy(fixtures / "pred.csv", tb_pred / "submission.txt")
    cohorts = {"tb-caverns": (tb_pred, tb_gt),
               "ribfrac": (TESTS / "ribfrac" / "fixtures" / "pred", TESTS / "ribfrac" / "fixtures" / "gt")}
    for name, size in (("object-cxr", ("--images", "20")), ("imageclef-caption", ("--images", "20"))):
        assert synth_main([name, "--out", str(root / name), *size, "--seed", "1"]) == 0
        cohorts[name] = (root / name / "predictions", root / name / "ground_truth")
    return cohorts


@pytest.mark.parametrize("name", CHALLENGES)
def test_same_envelope_and_records_that_round_trip(inputs, tmp_path, name):
    predictions, ground_truth = inputs[name]
    records = tmp_path / "records"
    assert evaluator(name).main(["--input", str(predictions), "--ground-truth", str(ground_truth), "--output",
                                 str(tmp_path / "out"), "--records", str(records), "--workers", "1",
                                 "--no-progress", "--no-plots"]) == 0
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert list(metrics) == ["aggregates", "case", "meta"]
    assert tuple(metrics["meta"]) == META_KEYS
    assert metrics["meta"]["challenge"] == name and metrics["meta"]["options"]["strict"] is False
    assert metrics["meta"]["evaluator"] == CHALLENGES[name].evaluator_module
    assert not list((tmp_path / "out").glob("*.png"))
    stored = [json.loads(path.read_text()) for path in sorted(records.glob("*.json"))]
    assert stored and all(evaluator(name).record.from_json(data).to_json() == data for data in stored)


def test_a_record_of_another_shape_is_one_error_line(inputs, tmp_path, capsys):
    predictions, ground_truth = inputs["tb-caverns"]
    args = ["--input", str(predictions), "--ground-truth", str(ground_truth), "--output", str(tmp_path / "out"),
            "--records", str(tmp_path / "records"), "--workers", "1", "--no-progress"]
    assert evaluator("tb-caverns").main(args) == 0
    path = tmp_path / "records" / "TST_001.nii.gz.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "n_gt": 1}))
    assert evaluator("tb-caverns").main(args) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: a per-case record is not a CaseScore") and "empty --records folder" in line


@pytest.mark.parametrize("name", CHALLENGES)
def test_every_evaluator_takes_the_common_flags(name):
    args = build_parser(evaluator(name)).parse_args(["--no-plot", "--strict", "--records", "r", "--shard", "1/2",
                                                     "--no-progress", "--workers", "3"])
    assert args.no_plots and args.strict and args.shard == "1/2" and args.no_progress and args.workers == 3


def test_workers_default_grand_challenge_first_then_eval_max_workers(monkeypatch):
    monkeypatch.delenv("GRAND_CHALLENGE_MAX_WORKERS", raising=False)
    monkeypatch.delenv("EVAL_MAX_WORKERS", raising=False)
    assert default_workers() == 0  # one per core
    monkeypatch.setenv("EVAL_MAX_WORKERS", "3")
    assert default_workers() == 3
    monkeypatch.setenv("GRAND_CHALLENGE_MAX_WORKERS", "2")
    assert default_workers() == 2
    assert build_parser(evaluator("tb-caverns")).parse_args([]).workers == 2


def test_a_bad_workers_variable_is_one_error_line(inputs, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GRAND_CHALLENGE_MAX_WORKERS", "four")
    predictions, ground_truth = inputs["tb-caverns"]
    assert evaluator("tb-caverns").main(["--input", str(predictions), "--ground-truth", str(ground_truth),
                                         "--output", str(tmp_path / "out")]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == "error: $GRAND_CHALLENGE_MAX_WORKERS = 'four': expected a number of worker processes"


@pytest.mark.parametrize("name, in_process", [("tb-caverns", True), ("object-cxr", True),
                                              ("imageclef-caption", True), ("ribfrac", False)])
def test_cheap_cases_run_in_this_process_unless_workers_are_asked_for(inputs, tmp_path, monkeypatch, name,
                                                                     in_process):
    import medchallenge.evaluator as command

    asked = []
    real = command.compute_records
    monkeypatch.setattr(command, "compute_records", lambda *a, **k: asked.append(k["workers"]) or real(*a, **k))
    for variable in command.WORKER_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    predictions, ground_truth = inputs[name]
    argv = ["--input", str(predictions), "--ground-truth", str(ground_truth), "--no-progress", "--no-plots"]
    assert evaluator(name).main([*argv, "--output", str(tmp_path / "default")]) == 0
    monkeypatch.setenv("GRAND_CHALLENGE_MAX_WORKERS", "2")
    assert evaluator(name).main([*argv, "--output", str(tmp_path / "two")]) == 0
    assert asked == [1 if in_process else 0, 2]  # 0: one process per core


def _argv(inputs, name: str, out: Path, predictions: Path | None = None) -> list[str]:
    default_predictions, ground_truth = inputs[name]
    return ["--input", str(predictions or default_predictions), "--ground-truth", str(ground_truth), "--output",
            str(out), "--no-progress", "--no-plots"]


def _one_error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.mark.parametrize("kind", ["symlink to the ground truth", "hard link", "fifo"])
def test_predictions_are_never_read_through_links_or_special_files(inputs, tmp_path, capsys, kind):
    import os

    predictions = tmp_path / "predictions"
    shutil.copytree(inputs["ribfrac"][0], predictions)
    target = predictions / "RibFrac901.nii.gz"
    target.unlink()
    if kind == "symlink to the ground truth":  # would score froc_average 1.0 if followed
        target.symlink_to(inputs["ribfrac"][1] / "RibFrac901-label.nii.gz")
    elif kind == "hard link":
        shutil.copy(inputs["ribfrac"][1] / "RibFrac901-label.nii.gz", tmp_path / "copy.nii.gz")
        os.link(tmp_path / "copy.nii.gz", target)
    else:
        os.mkfifo(target)
    assert evaluator("ribfrac").main(_argv(inputs, "ribfrac", tmp_path / "out", predictions)) == 1
    line = _one_error_line(capsys)
    assert str(target) in line and ("link" in line or "not a regular file" in line)
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_a_failed_run_leaves_no_old_metrics(inputs, tmp_path, capsys):
    out = tmp_path / "out"
    assert evaluator("tb-caverns").main(_argv(inputs, "tb-caverns", out)) == 0
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "submission.txt").write_text("TST_001.nii.gz,1,2\n")  # a short row: the official code crashes
    assert evaluator("tb-caverns").main(_argv(inputs, "tb-caverns", out, broken)) == 1
    _one_error_line(capsys)
    assert not (out / "metrics.json").exists()


def test_output_that_is_a_file_or_cannot_be_written_is_one_line(inputs, tmp_path, capsys, monkeypatch):
    import errno

    import medchallenge.evaluator as command

    a_file = tmp_path / "taken"
    a_file.write_text("x")
    assert evaluator("tb-caverns").main(_argv(inputs, "tb-caverns", a_file)) == 1
    assert "the output folder cannot be written" in _one_error_line(capsys)

    def disk_full(path, *args):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(command, "write_metrics", disk_full)
    assert evaluator("tb-caverns").main(_argv(inputs, "tb-caverns", tmp_path / "out")) == 1
    line = _one_error_line(capsys)
    assert "cannot write the results: No space left on device" in line
    assert [p.name for p in (tmp_path / "out").iterdir()] == []



def test_a_missing_prediction_folder_is_one_line_not_a_traceback(inputs, tmp_path, capsys):
    assert evaluator("tb-caverns").main(_argv(inputs, "tb-caverns", tmp_path / "out", tmp_path / "absent")) == 1
    assert "absent" in _one_error_line(capsys)
