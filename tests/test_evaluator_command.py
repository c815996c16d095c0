"""The one evaluator command: the same flags, workers default and metrics.json envelope for every challenge, and
per-case records that round-trip through JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import evaluator, evaluator_argv, one_error_line
from medchallenge.evaluation.command import META_KEYS, build_parser, default_workers
from medchallenge.registry import CHALLENGES

TESTS = Path(__file__).parent


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
    import medchallenge.evaluation.command as command

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


def test_a_missing_prediction_folder_is_one_line_not_a_traceback(inputs, tmp_path, capsys):
    argv = evaluator_argv(inputs, "tb-caverns", tmp_path / "out", tmp_path / "absent")
    assert evaluator("tb-caverns").main(argv) == 1
    assert "absent" in one_error_line(capsys)
