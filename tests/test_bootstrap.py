"""--bootstrap: every challenge's resample step (re-keyed duplicates), the vectorised RibFrac path, agreement with
scipy.stats.bootstrap, and the command's meta.bootstrap."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from helpers import evaluator

from medchallenge.evaluation import bootstrap, build_parser
from medchallenge.registry import CHALLENGES

TESTS = Path(__file__).parent


def loaded(name: str, predictions: Path, ground_truth: Path, *options: str):
    """(evaluator, cases, records) as the command has them before stage 2."""
    ev = evaluator(name)
    args = build_parser(ev).parse_args(["--input", str(predictions), "--ground-truth", str(ground_truth), *options])
    cases = ev.read(args)
    return ev, cases, {case_id: ev.evaluate_case(cases.sources, case_id) for case_id in cases.ids}


def resampled_aggregates(ev, cases, records, draw) -> dict[str, float]:
    return ev.aggregate(*ev.resample(cases, records, np.asarray(draw))).aggregates


@pytest.mark.parametrize("name", CHALLENGES)
def test_drawing_every_unit_once_in_order_gives_the_aggregates_exactly(inputs, name):
    ev, cases, records = loaded(name, *inputs[name])
    units = ev.bootstrap_units(cases)
    assert resampled_aggregates(ev, cases, records, np.arange(len(units))) == ev.aggregate(cases, records).aggregates


@pytest.mark.parametrize("name", CHALLENGES)
def test_a_unit_drawn_twice_is_two_cases(inputs, name):
    """Every unit twice: each aggregate is a rate or mean over units, so the same value (up to summation order);
    were duplicates merged by id, the denominators would not double and the values would change (TB's map counts
    its id list, RibFrac divides false positives by the number of CTs, object-CXR by images)."""
    ev, cases, records = loaded(name, *inputs[name])
    n = len(ev.bootstrap_units(cases))
    original = ev.aggregate(cases, records).aggregates
    doubled = resampled_aggregates(ev, cases, records, np.tile(np.arange(n), 2))
    assert doubled.keys() == original.keys()
    for key, value in original.items():
        assert doubled[key] == pytest.approx(value, rel=1e-7, abs=1e-7), key  # 1e-8 terms of RibFrac
    # and a draw that leaves units out differs from the original somewhere (the resample is not a no-op)
    draws = bootstrap.draw_resamples(n, 20, seed=3)
    assert any(resampled_aggregates(ev, cases, records, draw) != original for draw in draws)


def test_tb_resample_equals_scoring_the_resampled_files(inputs, tmp_path):
    """A TB resample with duplicates scored by its re-keyed records equals the evaluator run on files holding the
    drawn CTs under new names (rows in the same order): tb-caverns-2022.md §4's sums and denominator over duplicates,
    exactly."""
    fixtures = TESTS / "tb_caverns" / "fixtures"
    ev, cases, records = loaded("tb-caverns", *inputs["tb-caverns"])
    draw = np.array([1, 1, 5, 0, 3, 1])  # TST_002 three times, TST_005 (no ground truth, no predictions), ...
    assert len(draw) == len(cases.ids) and cases.ids[5] == "TST_005.nii.gz"
    gt_lines = (fixtures / "gt.csv").read_text().splitlines()
    pred_lines = (fixtures / "pred.csv").read_text().splitlines()
    all_ids = (fixtures / "all_ids.csv").read_text().split()
    new_gt, new_pred, new_ids = [gt_lines[0]], [], []
    for position, index in enumerate(draw):
        name = cases.ids[index]  # TST_00k.nii.gz: the gt file names it without the suffix
        stem, new = name.removesuffix(".nii.gz"), f"D{position}_{name}"
        new_gt += [new.removesuffix(".nii.gz") + line[len(stem):] for line in gt_lines[1:]
                   if line.split(",")[0] == stem]
        new_pred += [new + line[len(name):] for line in pred_lines if line.split(",")[0] == name]
        new_ids += [new for listed in all_ids if listed == name]
    gt, pred = tmp_path / "gt", tmp_path / "pred"
    gt.mkdir()
    pred.mkdir()
    (gt / "gt_boxes.csv").write_text("\n".join(new_gt) + "\n")
    (gt / "all_ids.csv").write_text("\n".join(new_ids) + "\n")
    (pred / "submission.txt").write_text("\n".join(new_pred) + "\n")
    assert ev.main(["--input", str(pred), "--ground-truth", str(gt), "--output", str(tmp_path / "out"),
                    "--no-progress"]) == 0
    scored = json.loads((tmp_path / "out" / "metrics.json").read_text())["aggregates"]
    assert resampled_aggregates(ev, cases, records, draw) == scored
    assert scored["map"] != ev.aggregate(cases, records).aggregates["map"]


def test_ribfrac_vectorised_bootstrap_equals_its_aggregate_on_each_resample():
    fixtures = TESTS / "ribfrac" / "fixtures"
    for branch in ("master", "legacy"):
        ev, cases, records = loaded("ribfrac", fixtures / "pred", fixtures / "gt", "--branch", branch)
        draws = bootstrap.draw_resamples(len(cases.ids), 40, seed=5)
        fast = ev.fast_bootstrap(cases, records, draws)
        for row, draw in enumerate(draws):
            expected = resampled_aggregates(ev, cases, records, draw)
            assert {key: values[row] for key, values in fast.items()} == expected


@pytest.mark.parametrize("name", CHALLENGES)
def test_intervals_equal_scipy_bootstrap_percentile_with_the_same_resamples(inputs, name):
    """scipy.stats.bootstrap draws rng.integers(0, n, (N, n)) from the rng it is given: with the same seed it
    resamples the same units, and its percentile interval of the aggregate is ours, to the last bit."""
    ev, cases, records = loaded(name, *inputs[name])
    n = len(ev.bootstrap_units(cases))
    ours = bootstrap.bootstrap(ev, cases, records, 199, seed=11, level=0.9)
    key = ev.ranking[0]
    assert key in ours and ours[key]["n"] == 199 and ours[key]["seed"] == 11 and ours[key]["level"] == 0.9
    result = stats.bootstrap((np.arange(n),), lambda draw: resampled_aggregates(ev, cases, records, draw)[key],
                             vectorized=False, n_resamples=199, method="percentile", confidence_level=0.9,
                             rng=np.random.default_rng(11))
    draws = bootstrap.draw_resamples(n, 199, seed=11)
    assert np.array_equal(bootstrap.replicates(ev, cases, records, draws)[key], result.bootstrap_distribution)
    assert (ours[key]["low"], ours[key]["high"]) == (result.confidence_interval.low, result.confidence_interval.high)
    assert ours[key]["low"] < ours[key]["high"]


def test_replicates_kept_in_a_records_folder_are_reused_only_for_the_same_draws(inputs, tmp_path, monkeypatch):
    ev, cases, records = loaded("tb-caverns", *inputs["tb-caverns"])
    n = len(ev.bootstrap_units(cases))
    draws = bootstrap.draw_resamples(n, 60, seed=5)
    first = bootstrap.replicates(ev, cases, records, draws, tmp_path)
    [kept] = tmp_path.glob("bootstrap-*-60x*.npz")
    calls = []
    computed = bootstrap._replicates
    monkeypatch.setattr(bootstrap, "_replicates", lambda *a: (calls.append(a[3].shape), computed(*a))[1])
    again = bootstrap.replicates(ev, cases, records, draws, tmp_path)
    assert calls == [] and again.keys() == first.keys()
    assert all(np.array_equal(again[k], first[k], equal_nan=True) for k in first)
    other = bootstrap.draw_resamples(n, 60, seed=6)  # other draws: computed, kept beside
    bootstrap.replicates(ev, cases, records, other, tmp_path)
    assert calls == [(60, n)] and len(list(tmp_path.glob("bootstrap-*.npz"))) == 2
    kept.write_bytes(b"not npz")  # unreadable: computed again
    assert np.array_equal(bootstrap.replicates(ev, cases, records, draws, tmp_path)["map"], first["map"],
                          equal_nan=True)
    assert len(calls) == 2


@pytest.mark.parametrize("size", [1, 2, 7, 40, 1001])
def test_linear_quantile_is_scipys_to_the_last_bit(size):
    values = np.random.default_rng(size).normal(size=size)
    for probability in (0.0, 0.005, 0.025, 0.05, 0.1, 0.5, 0.9, 0.95, 0.975, 0.995, 1.0):
        assert bootstrap.linear_quantile(values, probability) == stats.quantile(values, probability)


def test_command_writes_finite_intervals_for_every_aggregate(inputs, tmp_path):
    predictions, ground_truth = inputs["object-cxr"]
    argv = ["--input", str(predictions), "--ground-truth", str(ground_truth), "--output", str(tmp_path),
            "--no-progress", "--no-plots", "--bootstrap", "50", "--bootstrap-seed", "7", "--bootstrap-level", "0.8"]
    assert evaluator("object-cxr").main(argv) == 0
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    intervals = metrics["meta"]["bootstrap"]
    assert intervals.keys() == metrics["aggregates"].keys()
    for key, interval in intervals.items():
        assert interval.keys() >= {"low", "high", "level", "n", "seed"}
        assert (interval["n"], interval["seed"], interval["level"]) == (50, 7, 0.8)
        assert math.isfinite(interval["low"]) and math.isfinite(interval["high"])
        assert interval["low"] <= interval["high"]
    assert "bootstrap" not in metrics["meta"]["options"]


@pytest.mark.parametrize("flag", [("--bootstrap", "-5"), ("--bootstrap-level", "1.5"), ("--bootstrap-level", "nan")])
def test_bad_bootstrap_arguments_are_one_error_line(inputs, tmp_path, capsys, flag):
    predictions, ground_truth = inputs["tb-caverns"]
    argv = ["--input", str(predictions), "--ground-truth", str(ground_truth), "--output", str(tmp_path),
            "--no-progress", "--bootstrap", "10", *flag]
    assert evaluator("tb-caverns").main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: --bootstrap") and "Traceback" not in "\n".join(err)
