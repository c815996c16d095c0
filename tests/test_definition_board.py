"""The leaderboard of a challenge defined by a file (medchallenge.leaderboard.definition_board), on hand-made
metrics.json: grand-challenge's path resolution and ranking (ties, ascending and descending columns, mean and median
position, exclude_from_ranking, missing paths, result_display_choice, no rounding before ranking), intervals from
per-case values in each layout, a lower-is-better HD95 column ranked as such, and a page that says why a column
has no intervals."""

from __future__ import annotations

import csv
import io
import json
import statistics

import numpy as np
import pytest

from medchallenge.challenges.definition import LeaderboardDefinition, ResultColumn
from medchallenge.errors import InputError
from medchallenge.evaluation import bootstrap as boot
from medchallenge.leaderboard import table
from medchallenge.leaderboard.definition_board import (MISSING, build_definition_board, resolve_jsonpath,
                                                       write_definition_boards)
from medchallenge.leaderboard.table import TeamNotes

DICE = ResultColumn("Dice", "aggregates.dice.mean", "desc", 3, case_path="dice", summary="mean")
HD95 = ResultColumn("HD95 (mm)", "aggregates.hd95.mean", "asc", 2, case_path="hd95", summary="mean")
TIME = ResultColumn("run time (s)", "aggregates.seconds", "asc", 1)


def board(metrics, score=DICE, extra=(), method="abs", display="all", **kwargs):
    leaderboard = LeaderboardDefinition(score, tuple(extra), method, display)
    return build_definition_board(leaderboard, metrics, bootstrap=kwargs.pop("bootstrap", 200), seed=3,
                                  level=0.95, **kwargs)


def aggregates(**values) -> dict:
    """metrics.json with the given aggregates (dice=..., hd95=..., seconds=...), no per-case values."""
    result: dict = {"aggregates": {}, "case": {}, "meta": {}}
    for key, value in values.items():
        result["aggregates"][key] = value if key == "seconds" else {"mean": value}
    return result


def per_case(dice: list[float], hd95: list[float] | None = None, layout: str = "case-major") -> dict:
    """metrics.json with per-case Dice (and HD95) in the given layout and their means as aggregates."""
    ids = [str(k) for k in range(len(dice))]
    result = {"aggregates": {"dice": {"mean": statistics.fmean(dice)}}, "meta": {}}
    columns = {"dice": dict(zip(ids, dice))}
    if hd95 is not None:
        result["aggregates"]["hd95"] = {"mean": statistics.fmean(hd95)}
        columns["hd95"] = dict(zip(ids, hd95))
    if layout == "case-major":
        result["case"] = {case: {name: values[case] for name, values in columns.items()} for case in ids}
    elif layout == "column-major":
        result["case"] = columns
    else:
        result["results"] = [{name: values[case] for name, values in columns.items()} for case in ids]
    return result


def ranks(result: dict) -> dict[str, int]:
    return {row["team"]: row["rank"] for row in result["teams"]}


def test_paths_resolve_as_grand_challenge_resolves_them():
    metrics = {"aggregates": {"dice": {"mean": 0.8}, "none": None, "list": [1, 2]}, "a.b": 1}
    assert resolve_jsonpath(metrics, "aggregates.dice.mean") == 0.8
    assert resolve_jsonpath(metrics, "aggregates.none") is None  # present, null
    for path in ("aggregates.hd95.mean", "aggregates.list.0", "aggregates.dice.mean.more", "a.b", ""):
        assert resolve_jsonpath(metrics, path) is MISSING  # nothing there: no error
    assert not MISSING


def test_equal_values_share_the_better_rank_descending_and_ascending():
    dice = {"A": aggregates(dice=0.9), "B": aggregates(dice=0.8), "C": aggregates(dice=0.9), "D": aggregates(dice=0.7)}
    assert ranks(board(dice)) == {"A": 1, "C": 1, "B": 3, "D": 4}
    hd95 = {"A": aggregates(hd95=3.0), "B": aggregates(hd95=1.0), "C": aggregates(hd95=2.0), "D": aggregates(hd95=1.0)}
    result = board(hd95, score=HD95)
    assert ranks(result) == {"B": 1, "D": 1, "C": 3, "A": 4}
    assert result["higher_is_better"] is False and [r["team"] for r in result["teams"]] == ["B", "D", "C", "A"]


def test_mean_and_median_position_over_the_ranked_columns():
    """Per-column ranks A [1, 3, 1], B [2, 1, 3], C [3, 2, 2]: mean 5/3, 2, 7/3; median 1, 2, 2 (B and C tie)."""
    metrics = {"A": aggregates(dice=0.9, hd95=5.0, seconds=10), "B": aggregates(dice=0.8, hd95=1.0, seconds=30),
               "C": aggregates(dice=0.7, hd95=2.0, seconds=20)}
    mean = board(metrics, extra=(HD95, TIME), method="avg")
    assert ranks(mean) == {"A": 1, "B": 2, "C": 3}
    assert [row["value"] for row in mean["teams"]] == pytest.approx([5 / 3, 2, 7 / 3])
    assert mean["teams"][0]["rank_per_column"] == {"Dice": 1, "HD95 (mm)": 3, "run time (s)": 1}
    assert mean["metric"] == "mean position over 3 columns" and mean["higher_is_better"] is False
    median = board(metrics, extra=(HD95, TIME), method="med")
    assert ranks(median) == {"A": 1, "B": 2, "C": 2}
    absolute = board(metrics, extra=(HD95, TIME), method="abs")
    assert ranks(absolute) == {"A": 1, "B": 2, "C": 3}  # the score column alone


def test_an_excluded_column_neither_moves_the_position_nor_is_required():
    excluded = ResultColumn("run time (s)", "aggregates.seconds", "asc", 1, exclude_from_ranking=True)
    metrics = {"A": aggregates(dice=0.9, hd95=5.0, seconds=1), "B": aggregates(dice=0.8, hd95=1.0),
               "C": aggregates(dice=0.7, hd95=2.0, seconds=99)}
    result = board(metrics, extra=(HD95, excluded), method="avg")
    assert ranks(result) == {"B": 1, "A": 2, "C": 3}  # (2+1)/2, (1+3)/2, (3+2)/2: run time not counted
    assert [c["ranked"] for c in result["columns"]] == [True, True, False]
    assert result["teams"][0]["aggregates"]["run time (s)"] is None  # B has none, and is ranked


def test_a_result_without_a_number_at_a_ranked_path_is_not_ranked_whatever_the_scoring_method():
    """grand-challenge ranks only results that have every ranked column, even where only the score decides."""
    metrics = {"A": aggregates(dice=0.9, hd95=5.0), "B": aggregates(dice=0.95), "C": aggregates(dice="high", hd95=1.0),
               "D": {"aggregates": {"dice": {"mean": 0.1}, "hd95": {"mean": None}}},
               "E": aggregates(dice=0.5, hd95=9.0), "F": [0.99]}
    result = board(metrics, extra=(HD95,), method="abs")
    assert ranks(result) == {"A": 1, "E": 2}
    reasons = {row["team"]: row["reason"] for row in result["not_ranked"]}
    assert reasons == {"B": "HD95 (mm): metrics.json has nothing at aggregates.hd95.mean",
                       "C": "Dice: metrics.json has text at aggregates.dice.mean, not a finite number",
                       "D": "HD95 (mm): metrics.json has null at aggregates.hd95.mean",
                       "F": "Dice: metrics.json has nothing at aggregates.dice.mean"}
    assert "high" not in json.dumps(result["not_ranked"])  # the value itself is never echoed


def test_values_are_ranked_unrounded_and_shown_in_the_declared_decimal_places():
    score = ResultColumn("Dice", "aggregates.dice.mean", "desc", 2)
    result = board({"A": aggregates(dice=0.81234), "B": aggregates(dice=0.81239)}, score=score)
    assert ranks(result) == {"B": 1, "A": 2}
    from medchallenge.leaderboard.page import render_definition
    page = render_definition(result)
    assert page.count("<td>0.81</td>") == 6  # per team: the ranking, the Dice column, every aggregate


def test_an_error_path_is_shown_beside_its_value():
    from medchallenge.leaderboard.page import render_definition

    score = ResultColumn("Dice", "aggregates.dice.mean", "desc", 2, error_path="aggregates.dice.std")
    metrics = {"A": {"aggregates": {"dice": {"mean": 0.8, "std": 0.125}}}, "B": aggregates(dice=0.7)}
    result = board(metrics, score=score)
    assert [row["errors"] for row in result["teams"]] == [{"Dice": 0.125}, {"Dice": None}]
    page = render_definition(result)
    assert "<td>0.80 ± 0.12</td>" in page and "<td>0.70</td>" in page


def test_result_display_choice_all_most_recent_and_best_of_several_submissions():
    metrics = {"red/1": aggregates(dice=0.9), "blue/1": aggregates(dice=0.7), "red/2": aggregates(dice=0.6),
               "blue/2": aggregates(dice=0.8)}
    assert ranks(board(metrics, display="all")) == {"red/1": 1, "blue/2": 2, "blue/1": 3, "red/2": 4}
    assert ranks(board(metrics, display="rec")) == {"blue/2": 1, "red/2": 2}
    assert ranks(board(metrics, display="bst")) == {"red/1": 1, "blue/2": 2}
    # the most recent lacks the score: grand-challenge picks it before the check and shows nothing of the team
    latest_broken = {**metrics, "red/3": {"aggregates": {}}}
    result = board(latest_broken, display="rec")
    assert ranks(result) == {"blue/2": 1} and [r["team"] for r in result["not_ranked"]] == ["red/3"]
    assert ranks(board(latest_broken, display="bst")) == {"red/1": 1, "blue/2": 2}
    # best among equals: the most recent
    tied = {"red/1": aggregates(dice=0.9), "red/2": aggregates(dice=0.9), "blue/1": aggregates(dice=0.1)}
    assert ranks(board(tied, display="bst")) == {"red/2": 1, "blue/1": 2}


@pytest.mark.parametrize("layout", ["column-major", "results"])
def test_intervals_from_per_case_values_are_the_same_in_every_layout(layout):
    rng = np.random.default_rng(0)
    teams = {name: (rng.uniform(0.5, 0.9, 12).tolist(), rng.uniform(1, 9, 12).tolist()) for name in "ABC"}
    major = board({n: per_case(d, h) for n, (d, h) in teams.items()}, extra=(HD95,), method="avg")
    other = board({n: per_case(d, h, layout) for n, (d, h) in teams.items()}, extra=(HD95,), method="avg")
    assert [c["case_layout"] for c in other["columns"]] == [layout, layout]
    from medchallenge.leaderboard.page import render_definition
    assert render_definition(other).count("cases paired by their") == 2 and "<metric>" not in render_definition(other)
    for a, b in zip(major["teams"], other["teams"]):
        assert a["intervals"] == b["intervals"] and a["rank_distribution"] == b["rank_distribution"]
    # the interval is the percentile interval of the mean over the project's paired resamples of the cases
    draws = boot.draw_resamples(12, 200, 3)  # over the case ids in sorted order: "0", "1", "10", "11", "2", ...
    dice = np.array(teams["A"][0])[sorted(range(12), key=str)]
    low, high = boot.percentile_interval(dice[draws].mean(axis=1), 0.95)
    row = next(r for r in major["teams"] if r["team"] == "A")
    assert row["intervals"]["Dice"]["low"] == pytest.approx(low) and row["intervals"]["Dice"]["high"] == \
        pytest.approx(high)
    assert row["intervals"]["Dice"]["low"] < row["aggregates"]["Dice"] < row["intervals"]["Dice"]["high"]


def test_a_lower_is_better_hd95_is_ranked_with_its_rank_distribution_and_tests():
    rng = np.random.default_rng(1)
    metrics = {"near": per_case(rng.uniform(0.6, 0.9, 20).tolist(), rng.uniform(0.5, 1.5, 20).tolist()),
               "far": per_case(rng.uniform(0.6, 0.9, 20).tolist(), rng.uniform(6.0, 9.0, 20).tolist()),
               "mid": per_case(rng.uniform(0.6, 0.9, 20).tolist(), rng.uniform(2.0, 4.0, 20).tolist())}
    result = board(metrics, score=HD95, extra=(DICE,))
    assert [row["team"] for row in result["teams"]] == ["near", "mid", "far"]
    near, mid, far = result["teams"]
    assert near["p_first"] > 0.99 and near["median_rank"] == 1 and far["median_rank"] == 3
    assert all(sum(row["rank_distribution"]) == 200 for row in result["teams"])
    assert near["low"] < near["value"] < near["high"] < mid["low"]
    sig = result["significance"]
    assert sig["test"] == "wilcoxon" and sig["teams"] == ["near", "mid", "far"]
    assert sig["significant"][0][2] and not sig["significant"][2][0]  # lower HD95 is better, not higher
    assert result["mean_kendall_tau"] == pytest.approx(1.0)


def test_the_mean_position_gets_a_rank_distribution_over_the_resamples():
    rng = np.random.default_rng(2)
    metrics = {name: per_case(rng.uniform(0.5, 0.9, 15).tolist(), rng.uniform(1, 9, 15).tolist()) for name in "ABCD"}
    result = board(metrics, extra=(HD95,), method="avg")
    assert result["resampled"] and result["significance"]["test"] == "bootstrap"
    for row in result["teams"]:
        assert sum(row["rank_distribution"]) == 200 and row["low"] <= row["value"] <= row["high"]
        assert row["value"] == statistics.fmean(row["rank_per_column"].values())


def test_the_page_says_why_there_are_no_intervals(tmp_path):
    inconsistent = per_case([0.8, 0.6], [1.0, 3.0])
    inconsistent["aggregates"]["hd95"]["mean"] = 2.5  # not the mean of 1 and 3
    metrics = {"A": {**aggregates(dice=0.8), "aggregates": {"dice": {"mean": 0.8}, "hd95": {"mean": 2.5},
                                                            "seconds": 3}},
               "<b>B</b>": {**inconsistent, "aggregates": {**inconsistent["aggregates"], "seconds": 4}}}
    write_definition_boards(LeaderboardDefinition(DICE, (HD95, TIME)), metrics, tmp_path, bootstrap=50, seed=0,
                            level=0.95, challenge="lung-nodule")
    result = json.loads((tmp_path / "leaderboard.json").read_text())
    reasons = {c["title"]: c["no_intervals"] for c in result["columns"]}
    assert reasons["Dice"].startswith("metrics.json has no per-case values at dice")
    assert reasons["run time (s)"].startswith("not declared the mean or median of per-case values")
    assert result["resampled"] is False and result["no_intervals"].startswith("Dice: metrics.json has no per-case")
    assert all(row["median_rank"] is None and row["low"] is None for row in result["teams"])
    page = (tmp_path / "leaderboard.html").read_text()
    assert "No intervals, rank distributions or pairwise tests for the ranking" in page
    assert 'id="no-intervals"' in page and "not declared the mean or median" in page
    assert "blob-plot" not in page and "significance-map" not in page
    assert "<b>B</b>" not in page and "&lt;b&gt;B&lt;/b&gt;" in page
    rows = list(csv.DictReader(io.StringIO((tmp_path / "leaderboard.csv").read_text())))
    assert [row["team"] for row in rows] == ["A", "<b>B</b>"] and rows[0]["run time (s)"] == "3.0"
    # the per-case HD95 of B does not average to its aggregate: said, and no interval for anyone
    only_b = board({"B": inconsistent}, score=HD95)
    assert only_b["columns"][0]["no_intervals"] == ("aggregates.hd95.mean is not the mean of its 2 per-case values "
                                                    "at case.<case id>.hd95 (the metrics.json of B)")


def test_metric_ranks_by_another_column_and_phase_notes_list_teams_not_ranked():
    metrics = {"A": aggregates(dice=0.9, hd95=5.0), "B": aggregates(dice=0.8, hd95=1.0),
               "C": aggregates(dice=0.1, hd95=0.1)}
    notes = {"A": TeamNotes(4, 1), "B": TeamNotes(4, 0), "C": TeamNotes(4, 4, not_ranked="every job failed (4 of 4)"),
             "D": TeamNotes(0, 0, not_ranked="refused before any job: not an archive")}
    by_hd95 = board(metrics, extra=(HD95,), metric="aggregates.hd95.mean", notes=notes)
    assert ranks(by_hd95) == {"B": 1, "A": 2} and by_hd95["metric"] == "HD95 (mm)"
    assert ranks(board(metrics, extra=(HD95,), metric="HD95 (mm)", notes=notes)) == {"B": 1, "A": 2}
    assert [r["team"] for r in by_hd95["not_ranked"]] == ["C", "D"]
    assert by_hd95["teams"][1]["jobs_failed"] == 1
    with pytest.raises(InputError, match="--metric nope: not a column"):
        board(metrics, metric="nope")


def test_no_result_ranked_gives_the_unranked_page(tmp_path):
    write_definition_boards(LeaderboardDefinition(DICE), {"A": {"aggregates": {}}}, tmp_path, bootstrap=10, seed=0,
                            level=0.95)
    page = (tmp_path / "leaderboard.html").read_text()
    assert "No team could be ranked by <b>Dice</b>" in page and "metrics.json has nothing at" in page


def test_hd95_p_values_are_scipy_wilcoxon_less_over_the_cases_both_have():
    """Lower is better: `row better than column` is the one-sided Wilcoxon test that the row's HD95 is less; a
    case whose HD95 is null (undefined: an empty mask) counts in neither the mean nor the test."""
    from scipy import stats

    rng = np.random.default_rng(4)
    teams = {name: rng.uniform(1, 9, 16).tolist() for name in "ABC"}
    metrics = {name: per_case(rng.uniform(0.5, 0.9, 16).tolist(), hd95) for name, hd95 in teams.items()}
    metrics["B"]["case"]["3"]["hd95"] = None
    metrics["B"]["aggregates"]["hd95"]["mean"] = statistics.fmean(v for k, v in enumerate(teams["B"]) if k != 3)
    result = board(metrics, score=HD95)
    assert result["columns"][0]["no_intervals"] is None and result["significance"]["test"] == "wilcoxon"
    names = result["significance"]["teams"]
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            if i != j:
                common = [k for k in range(16) if not (3 == k and "B" in (a, b))]
                expected = stats.wilcoxon([teams[a][k] for k in common], [teams[b][k] for k in common],
                                          alternative="less", method="asymptotic", correction=True).pvalue
                assert result["significance"]["p"][i][j] == pytest.approx(expected, rel=1e-12)


def test_the_definition_page_renders_offline_with_phase_notes_in_a_browser(tmp_path):
    from test_leaderboard_page import Elements, assert_offline, browser, run_browser

    browser()
    rng = np.random.default_rng(5)
    metrics = {f"team-{k}": per_case(rng.uniform(0.5 + 0.05 * k, 0.9, 12).tolist(),
                                     rng.uniform(1 + k, 5 + k, 12).tolist()) for k in range(4)}
    for k, result in enumerate(metrics.values()):
        result["aggregates"]["seconds"] = 10.0 + k
    (tmp_path / "submissions" / "team-0").mkdir(parents=True)
    (tmp_path / "submissions" / "team-0" / "report.html").write_text("<!DOCTYPE html><title>report</title>")
    notes = {"team-0": TeamNotes(12, 1, ("convention check: <x> swapped",), "submissions/team-0/report.html"),
             "team-9": TeamNotes(0, 0, not_ranked="refused before any job: not an archive")}
    write_definition_boards(LeaderboardDefinition(DICE, (HD95, TIME), "avg"), metrics, tmp_path, bootstrap=100,
                            seed=0, level=0.95, notes=notes, challenge="lung-nodule")
    page = tmp_path / "leaderboard.html"
    assert assert_offline(page) == ["submissions/team-0/report.html"]
    dom = run_browser("--dump-dom", page.as_uri(), home=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert not [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Failed to load" in line]
    elements = Elements()
    elements.feed(dom.stdout)
    assert elements.counts["leaderboard:tr"] == 4 + 1 and elements.counts["not-ranked:tr"] == 1 + 1
    assert elements.counts["significance-map:rect"] == 16 and elements.counts["blob-plot:.median"] == 4
    assert elements.counts["leaderboard:.failed-jobs"] == 1
    assert "convention check: &lt;x&gt; swapped" in dom.stdout


def test_more_cases_than_the_resamples_can_hold_are_ranked_without_intervals(monkeypatch):
    from medchallenge.leaderboard import definition_board

    monkeypatch.setattr(definition_board, "MAX_DRAWS", 1000)
    metrics = {name: per_case([0.5 + 0.01 * k] * 20) for k, name in enumerate("AB")}
    result = board(metrics, bootstrap=100)
    assert ranks(result) == {"B": 1, "A": 2} and result["resampled"] is False
    assert result["columns"][0]["no_intervals"].startswith("20 cases x 100 resamples: more than the leaderboard")
    assert ranks(board(metrics, bootstrap=50))["B"] == 1 and board(metrics, bootstrap=50)["resampled"]


@pytest.mark.parametrize("layout", ["column-major", "results"])
def test_a_case_id_pairs_the_cases_whatever_order_each_team_lists_them_in(layout):
    """evalutils' frame with a case_id column (and results entries with case_id) in another order for each team:
    the same board as the case-major layout; without the ids the cases pair by row, and the page says so."""
    rng = np.random.default_rng(6)
    teams = {name: (rng.uniform(0.5, 0.9, 10).tolist(), rng.uniform(1, 9, 10).tolist()) for name in "ABC"}
    major = board({n: per_case(d, h) for n, (d, h) in teams.items()}, extra=(HD95,), method="avg")
    shuffled = {}
    for name, (dice, hd95) in teams.items():
        order = rng.permutation(10).tolist()
        metrics = per_case([dice[k] for k in order], [hd95[k] for k in order], layout)
        if layout == "column-major":
            metrics["case"]["case_id"] = {str(row): f"lung-{k}" for row, k in enumerate(order)}
        else:
            for entry, k in zip(metrics["results"], order):
                entry["case_id"] = f"lung-{k}"
        shuffled[name] = metrics
    named = board(shuffled, extra=(HD95,), method="avg")
    assert [c["paired_by"] for c in named["columns"]] == ["case id", "case id"]
    for a, b in zip(major["teams"], named["teams"]):
        assert a["rank_distribution"] == b["rank_distribution"] and a["intervals"] == b["intervals"]
    assert named["significance"] == major["significance"]
    from medchallenge.leaderboard.page import render_definition
    assert "cases paired by their" not in render_definition(named)


def test_names_titles_and_metrics_text_are_never_markup_on_the_page():
    from medchallenge.leaderboard.page import render_definition

    hostile = ResultColumn('<img src=x onerror="alert(1)">', "aggregates.x", "asc", 2, case_path="x", summary="mean")
    metrics = {"<script>alert(1)</script>": {"aggregates": {"dice": {"mean": 0.5}, "x": 1.0},
                                             "case": {"<script>c</script>": {"x": "<script>v</script>"}}},
               "B\u202eevil": {"aggregates": {"dice": {"mean": 0.4}, "x": "<b>text</b>"}}}
    for method in ("abs", "avg"):
        page = render_definition(board(metrics, extra=(hostile,), method=method))
        assert "<script" not in page and "<img" not in page and "<b>text" not in page and "\u202e" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "B&lt;U+202E&gt;evil" in page


def test_pairwise_tests_are_among_the_first_of_the_ranking_when_there_are_many_teams(tmp_path, monkeypatch):
    monkeypatch.setattr(table, "MAX_PAIRWISE_TEAMS", 2)
    rng = np.random.default_rng(4)
    metrics = {name: per_case(rng.uniform(low, low + 0.1, 12).tolist())
               for name, low in (("third", 0.3), ("first", 0.8), ("fourth", 0.1), ("second", 0.6))}
    write_definition_boards(LeaderboardDefinition(DICE), metrics, tmp_path, bootstrap=50, seed=0, level=0.95)
    result = json.loads((tmp_path / "leaderboard.json").read_text())
    sig = result["significance"]
    assert [row["team"] for row in result["teams"]] == ["first", "second", "third", "fourth"]
    assert sig["teams"] == ["first", "second"] and sig["teams_ranked"] == 4 and len(sig["p"]) == 2
    assert sig["significant"][0][1] and not sig["significant"][1][0]
    assert "of the first 2 of the 4 ranked teams" in (tmp_path / "leaderboard.html").read_text()
    monkeypatch.setattr(table, "MAX_PAIRWISE_TEAMS", 4)  # all of them tested: as before, no such note
    write_definition_boards(LeaderboardDefinition(DICE), metrics, tmp_path, bootstrap=50, seed=0, level=0.95)
    result = json.loads((tmp_path / "leaderboard.json").read_text())
    assert len(result["significance"]["teams"]) == 4 and "teams_ranked" not in result["significance"]
    assert "ranked teams (the tests" not in (tmp_path / "leaderboard.html").read_text()
