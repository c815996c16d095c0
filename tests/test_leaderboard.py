"""medchallenge leaderboard: ranks, paired bootstrap intervals and rank distributions, pairwise tests checked
against scipy.stats.wilcoxon, Holm's adjustment, records reused, bad submissions listed, the CSV."""

from __future__ import annotations

import csv
import json
import shutil
from itertools import combinations, permutations
from pathlib import Path

import numpy as np
import pytest
from leaderboard_helpers import caption_teams
from scipy import stats

from medchallenge.cli import main as cli_main
from medchallenge.evaluators.imageclef_caption import EVALUATOR as CAPTION
from medchallenge.leaderboard.significance import bootstrap_greater, holm, kendall_tau_b, wilcoxon_greater
from medchallenge.leaderboard.table import competition_ranks


@pytest.fixture(scope="module")
def board(tmp_path_factory) -> tuple[Path, Path, Path, dict]:
    """(ground truth, submissions, output, leaderboard.json) of four caption teams and one broken submission."""
    root = tmp_path_factory.mktemp("leaderboard")
    ground_truth, submissions = caption_teams(root, 4)
    broken = submissions / "team-broken"
    broken.mkdir()
    (broken / "concepts.csv").write_text("no-such-image|C0000001\n")
    output = root / "out"
    assert cli_main(["leaderboard", "--challenge", "imageclef-caption", "--ground-truth", str(ground_truth),
                     "--submissions", str(submissions), "--output", str(output), "--bootstrap", "300",
                     "--bootstrap-seed", "4", "--no-progress"]) == 0
    return ground_truth, submissions, output, json.loads((output / "leaderboard.json").read_text())


def test_ranked_by_the_official_metric_with_intervals_and_rank_distributions(board):
    _, _, output, result = board
    assert result["metric"] == "concept_f1" and result["bootstrap"]["n"] == 300
    teams = result["teams"]
    assert [t["team"] for t in teams] == ["team-A", "team-B", "team-C", "team-D"]  # fewer concepts kept: worse
    assert [t["rank"] for t in teams] == [1, 2, 3, 4]
    values = [t["value"] for t in teams]
    assert values == sorted(values, reverse=True)
    for team in teams:
        metrics = json.loads((output / "teams" / team["team"] / "metrics.json").read_text())
        assert metrics["aggregates"]["concept_f1"] == team["value"]
        assert metrics["meta"]["bootstrap"]["concept_f1"]["low"] == team["low"] < team["value"] < team["high"]
        assert sum(team["rank_distribution"]) == 300 and len(team["rank_distribution"]) == 4
        assert team["rank_low"] <= team["median_rank"] <= team["rank_high"]
    assert sum(t["p_first"] for t in teams) == pytest.approx(1.0)
    assert -1 <= result["mean_kendall_tau"] <= 1
    assert list(result["failed"]) == ["team-broken"] and "no-such-image" in result["failed"]["team-broken"]


def test_the_first_team_gets_the_evaluator_commands_intervals(board, tmp_path):
    """Paired resamples in the first team's case order: its intervals are those of the evaluator command with
    the same --bootstrap and seed."""
    ground_truth, submissions, _, result = board
    assert CAPTION.main(["--input", str(submissions / "team-A"), "--ground-truth", str(ground_truth), "--output",
                         str(tmp_path), "--no-progress", "--no-plots", "--bootstrap", "300",
                         "--bootstrap-seed", "4"]) == 0
    alone = json.loads((tmp_path / "metrics.json").read_text())["meta"]["bootstrap"]
    assert result["teams"][0]["intervals"] == alone


def test_pairwise_p_values_are_scipy_wilcoxon_on_the_per_case_scores_then_holm(board):
    _, _, output, result = board
    sig = result["significance"]
    assert sig["test"] == "wilcoxon" and sig["correction"] == "holm"
    names = sig["teams"]
    scores = {name: json.loads((output / "teams" / name / "metrics.json").read_text())["case"] for name in names}
    raw = []
    for i, j in permutations(range(len(names)), 2):
        common = sorted(set(scores[names[i]]) & set(scores[names[j]]))
        a = [scores[names[i]][c]["concept_f1"] for c in common]
        b = [scores[names[j]][c]["concept_f1"] for c in common]
        expected = stats.wilcoxon(a, b, alternative="greater", method="asymptotic", correction=True).pvalue
        assert sig["p"][i][j] == pytest.approx(expected, rel=1e-12)
        raw.append(sig["p"][i][j])
    adjusted = holm(raw)
    for k, (i, j) in enumerate(permutations(range(len(names)), 2)):
        assert sig["p_holm"][i][j] == pytest.approx(adjusted[k], rel=1e-12)
        assert sig["significant"][i][j] == (adjusted[k] <= 0.05)
    assert sig["significant"][0][3] and not sig["significant"][3][0]  # team-A over team-D, not the reverse


def test_a_rerun_reuses_the_records_and_gives_the_same_board(board):
    ground_truth, submissions, output, result = board
    records = sorted((output / "records" / "team-A").glob("*.json"))
    stamps = [path.stat().st_mtime_ns for path in records]
    assert records
    assert cli_main(["leaderboard", "--challenge", "imageclef-caption", "--ground-truth", str(ground_truth),
                     "--submissions", str(submissions), "--output", str(output), "--bootstrap", "300",
                     "--bootstrap-seed", "4", "--no-progress"]) == 0
    assert [path.stat().st_mtime_ns for path in records] == stamps
    again = json.loads((output / "leaderboard.json").read_text())
    for key in ("teams", "significance", "mean_kendall_tau"):
        assert again[key] == result[key]


def test_csv_lists_every_ranked_team_then_those_not_ranked_with_why(board):
    _, _, output, result = board
    *rows, broken = list(csv.DictReader((output / "leaderboard.csv").open()))
    assert [row["team"] for row in rows] == [t["team"] for t in result["teams"]]
    assert [float(row["concept_f1"]) for row in rows] == [t["value"] for t in result["teams"]]
    assert all(row["not_ranked"] == "" for row in rows)
    assert (broken["team"], broken["rank"], broken["concept_f1"]) == ("team-broken", "", "")
    assert broken["not_ranked"].startswith("not scored: ") and "no-such-image" in broken["not_ranked"]
    assert result["not_ranked"] == [{"team": "team-broken", "reason": broken["not_ranked"], "jobs": None,
                                     "jobs_failed": None, "warnings": [], "report": None}]


def test_bootstrap_test_on_a_metric_without_per_case_scores(board, tmp_path):
    """--test bootstrap: p = (1 + resamples where the row is not better) / (1 + resamples), from the replicates."""
    ground_truth, submissions, _, _ = board
    kept = tmp_path / "submissions"
    for name in ("team-A", "team-C"):
        shutil.copytree(submissions / name, kept / name)
    assert cli_main(["leaderboard", "--challenge", "imageclef-caption", "--ground-truth", str(ground_truth),
                     "--submissions", str(kept), "--output", str(tmp_path / "out"), "--bootstrap", "200",
                     "--test", "bootstrap", "--metric", "bleu", "--no-progress"]) == 0
    result = json.loads((tmp_path / "out" / "leaderboard.json").read_text())
    assert result["metric"] == "bleu" and result["significance"]["test"] == "bootstrap"
    p = result["significance"]["p"]
    assert p[0][1] + p[1][0] >= 1 and 1 / 201 <= min(p[0][1], p[1][0])


@pytest.mark.parametrize("argv, message", [
    (["--metric", "no_such_metric"], "--metric no_such_metric"),
    (["--edition", "1999"], "--edition '1999'"),
    (["--bootstrap", "0"], "--bootstrap 0"),
    (["--alpha", "2"], "--alpha 2"),
])
def test_bad_arguments_are_one_error_line(board, tmp_path, capsys, argv, message):
    ground_truth, submissions, _, _ = board
    assert cli_main(["leaderboard", "--challenge", "imageclef-caption", "--ground-truth", str(ground_truth),
                     "--submissions", str(submissions), "--output", str(tmp_path), "--no-progress", *argv]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: {message}")


def test_competition_ranks_share_the_better_rank_and_put_undefined_last():
    values = np.array([[0.5, 0.2], [0.7, np.nan], [0.5, 0.1]])
    assert competition_ranks(values).tolist() == [[2, 1], [1, 3], [2, 2]]


@pytest.mark.parametrize("n, ties", [(1, False), (8, False), (30, False), (12, True), (40, True), (80, False)])
def test_wilcoxon_equals_scipy_asymptotic_with_continuity_correction(n, ties):
    rng = np.random.default_rng(n + ties)
    for _ in range(20):
        a = rng.normal(0.3, 1, n)
        b = rng.normal(0, 1, n)
        if ties:  # small integers: ties among |differences| and zero differences
            a, b = rng.integers(0, 6, n).astype(float), rng.integers(0, 5, n).astype(float)
        statistic, p = wilcoxon_greater(a, b)
        expected = stats.wilcoxon(a, b, alternative="greater", method="asymptotic", correction=True)
        assert statistic == expected.statistic and p == pytest.approx(expected.pvalue, rel=1e-12)
    assert wilcoxon_greater([0.5, 0.2], [0.5, 0.2]) == (0.0, 1.0)  # no difference left


def challenger_test_then_rank(values: dict[str, list[float]], small_better: bool) -> dict[str, tuple[float, int]]:
    """challengeR's testThenRank on one task (p.adjust "none", alpha 0.05, ties "min"): per algorithm the share of
    the others it is significantly better than (one-sided Wilcoxon, p <= alpha) and its rank by that share."""
    sign = -1 if small_better else 1
    names = list(values)
    share = {a: np.mean([wilcoxon_greater(sign * np.array(values[a]), sign * np.array(values[b]))[1] <= 0.05
                         for b in names if b != a]) for a in names}
    ranks = competition_ranks(np.array([share[a] for a in names]))
    return {a: (float(share[a]), int(r)) for a, r in zip(names, ranks)}


@pytest.mark.parametrize("values, small_better, expected", [
    # tests/testthat/test-testThenRank.R of wiesenfa/challengeR: "works with two algorithms, small values are better"
    ({"A1": [0.2] * 4, "A2": [1.0] * 4}, True, {"A1": (1.0, 1), "A2": (0.0, 2)}),
    # "... large values are better"
    ({"A1": [0.2] * 4, "A2": [1.0] * 4}, False, {"A1": (0.0, 2), "A2": (1.0, 1)}),
    # "test-then-rank works for multi-task data set", task T2 (two cases: no significance, a shared first rank)
    ({"A1": [0.6, 0.6], "A2": [0.8, 0.8]}, True, {"A1": (0.0, 1), "A2": (0.0, 1)}),
])
def test_challenger_test_then_rank_examples(values, small_better, expected):
    """challengeR's own examples with their published numbers: the Wilcoxon decisions behind its significance map
    (four cases 0.2 against 1.0: p = 0.0359, significant; two cases: p = 0.173, not)."""
    assert challenger_test_then_rank(values, small_better) == expected
    assert wilcoxon_greater([1.0] * 4, [0.2] * 4)[1] == pytest.approx(stats.norm.sf(1.8), rel=1e-12)


def test_holm_equals_its_step_down_definition():
    rng = np.random.default_rng(1)
    for _ in range(50):
        p = rng.uniform(0, 0.2, rng.integers(1, 12))
        m = len(p)
        order = np.argsort(p)
        expected = np.empty(m)
        running = 0.0
        for k, index in enumerate(order):
            running = max(running, min(1.0, (m - k) * p[index]))
            expected[index] = running
        assert np.allclose(holm(p), expected, rtol=0, atol=0)
        # the step-down rule: reject in ascending order while p_(k) <= alpha / (m - k)
        alpha = 0.05
        rejected = set()
        for k, index in enumerate(order):
            if p[index] > alpha / (m - k):
                break
            rejected.add(index)
        assert {i for i in range(m) if holm(p)[i] <= alpha} == rejected


def test_paired_bootstrap_p_value():
    a = np.array([0.5, 0.6, 0.4, np.nan, 0.7])
    b = np.array([0.4, 0.6, 0.5, 0.1, 0.2])
    assert bootstrap_greater(a, b) == (1 + 2) / (1 + 4)
    assert all(bootstrap_greater(x, y) + bootstrap_greater(y, x) >= 1 for x, y in combinations([a, b, b + 0.1], 2))


def test_kendall_tau_b_equals_scipy():
    rng = np.random.default_rng(2)
    for size in (2, 3, 5, 9):
        for _ in range(30):
            x, y = rng.integers(1, size + 1, size), rng.integers(1, size + 1, size)
            expected = stats.kendalltau(x, y).statistic
            assert (np.isnan(expected) and np.isnan(kendall_tau_b(x, y))) or \
                kendall_tau_b(x, y) == pytest.approx(expected, rel=1e-12, abs=1e-15)
