"""The leaderboard of a challenge defined by a file: its evaluation container's metrics.json per team, ranked by
the definition's grand-challenge leaderboard fields (gc_ranking.py), with the built-ins' uncertainty where the
columns allow it.

A column declared the mean or median of per-case values (`case_path`, `summary`) whose per-case values every
ranked team's metrics.json holds (case_values.py) gets the built-ins' paired percentile bootstrap: the same
resamples of the cases (drawn over the case ids in sorted order, so the board is the same whatever order an
evaluation lists them in) for every team, each team's interval, and, where the ranking rests on such columns, the
rank distribution over the resamples (of the score's rank, or of the mean or median position: the columns without
per-case values then held at their values), blob plot, Kendall's tau and pairwise tests (Wilcoxon signed-rank over
per-case values for a mean, the paired bootstrap otherwise; Holm-adjusted). A column that is not such a summary
is ranked by its path as grand-challenge ranks it, and the page says why it has no interval.

`metrics` maps each result to its metrics.json in the order made (oldest first): a key `team` is a team's only
submission, `team/submission` one of its several (result_display_choice picks among them). Writes
OUT/leaderboard.json, .csv and .html with the built-ins' page machinery.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..challenges.definition import LeaderboardDefinition, ResultColumn
from ..errors import InputError
from ..evaluation import bootstrap as boot
from ..io import write_json_atomic, write_text_atomic
from .case_values import CaseValues, check_summary, per_case_values
from .gc_ranking import (MISSING, Positions, Result, displayed_results, number_at, positions, rankable, ranked_columns,
                         resolve_jsonpath, results_of, why_no_number)
from .page import render_definition, team_label
from .significance import bootstrap_greater, wilcoxon_greater
from .table import (NO_NOTES, TeamNotes, leaderboard_csv, mean_kendall_tau, rank_statistics, significance,
                    tested_teams)

__all__ = ["MISSING", "build_definition_board", "resolve_jsonpath", "write_definition_boards"]

log = logging.getLogger("medchallenge.leaderboard")
POSITION_TITLES = {"avg": "mean position", "med": "median position"}
MAX_DRAWS = 20_000_000  # cases x resamples: 160 MB of indices, as much again of one result's drawn values
NO_RANK_STATISTICS = {"median_rank": None, "rank_low": None, "rank_high": None, "p_first": None,
                      "rank_distribution": None}


def board_leaderboard(leaderboard: LeaderboardDefinition, metric: str | None) -> LeaderboardDefinition:
    """The leaderboard as defined, or with `--metric` (a column's title or path) ranked by that column alone,
    the others shown beside it."""
    if metric is None:
        return leaderboard
    chosen = next((c for c in leaderboard.columns if metric in (c.title, c.path)), None)
    if chosen is None:
        raise InputError(f"--metric {metric}: not a column of the leaderboard (columns: "
                         f"{', '.join(c.title for c in leaderboard.columns)})")
    others = tuple(dataclasses.replace(c, exclude_from_ranking=True) for c in leaderboard.columns if c is not chosen)
    return dataclasses.replace(leaderboard, score=chosen, extra_results_columns=others, scoring_method_choice="abs")


@dataclasses.dataclass(frozen=True)
class ColumnCases:
    """A column's per-case values in each ranked result, or why it has none (`reason`)."""

    found: tuple[CaseValues, ...] = ()
    reason: str | None = None


def column_cases(column: ResultColumn, results: list[Result]) -> ColumnCases:
    """The column's per-case values in every result, checked: present in each, over the same cases, and the
    column's value their declared summary."""
    if column.case_path is None or column.summary is None:
        return ColumnCases(reason="not declared the mean or median of per-case values (case_path and summary)")
    found = []
    for result in results:
        values = per_case_values(result.metrics, column.case_path)
        if isinstance(values, str):
            return ColumnCases(reason=f"{values} (the metrics.json of {result.key})")
        mismatch = check_summary(result.metrics, column, values)
        if mismatch is not None:
            return ColumnCases(reason=f"{mismatch} (the metrics.json of {result.key})")
        found.append(values)
    if len({frozenset(f.cases) for f in found}) > 1:
        return ColumnCases(reason="the results' metrics.json hold per-case values of different cases")
    return ColumnCases(tuple(found))


def resampled_statistic(found: tuple[CaseValues, ...], units: list[str], draws: np.ndarray,
                        summary: str) -> np.ndarray:
    """(results, resamples): the mean or median of each result's values over each resample's drawn cases (a
    case without a value left out; NaN where a resample draws none)."""
    index = {unit: k for k, unit in enumerate(units)}
    statistic = np.empty((len(found), len(draws)))
    for row, values in enumerate(found):  # one result at a time: (resamples, units) in memory, not all results'
        table = np.full(len(units), np.nan)
        table[[index[case] for case in values.values]] = list(values.values.values())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a resample drawing no case with a value: NaN
            statistic[row] = (np.nanmean if summary == "mean" else np.nanmedian)(table[draws], axis=1)
    return statistic


def pairwise(tested: np.ndarray, score: ResultColumn, cases: ColumnCases | None, method: str,
             replicate: np.ndarray, higher_is_better: bool) -> tuple[str, np.ndarray]:
    """p-values (one-sided: row better than column) between the results `tested` (their indices, in that order)
    and the test: Wilcoxon over the per-case values where the ranking is the score column alone and a per-case
    mean, else the paired bootstrap of the ranking's quantity."""
    p = np.full((len(tested), len(tested)), np.nan)
    wilcoxon = method == "abs" and score.summary == "mean" and cases is not None and cases.reason is None
    sign = 1.0 if higher_is_better else -1.0
    for row, i in enumerate(tested):
        for column, j in enumerate(tested):
            if i == j:
                continue
            if wilcoxon:
                a, b = cases.found[i].values, cases.found[j].values
                common = [case for case in a if case in b]
                p[row, column] = wilcoxon_greater([sign * a[c] for c in common], [sign * b[c] for c in common])[1]
            else:
                p[row, column] = bootstrap_greater(sign * replicate[i], sign * replicate[j])
    return ("wilcoxon" if wilcoxon else "bootstrap"), p


def column_json(column: ResultColumn, ranked: bool, cases: ColumnCases) -> dict[str, Any]:
    return {"title": column.title, "path": column.path, "order": column.order,
            "decimal_places": column.decimal_places, "ranked": ranked, "case_path": column.case_path,
            "summary": column.summary, "intervals": cases.reason is None,
            "case_layout": cases.found[0].layout if cases.found else None,
            "paired_by": cases.found[0].paired_by if cases.found else None, "no_intervals": cases.reason}


def not_ranked_rows(shown: list[Result], columns: tuple[ResultColumn, ...],
                    notes: Mapping[str, TeamNotes]) -> list[dict[str, Any]]:
    """The teams a phase did not rank (refused, every job failed) and the results lacking a ranked column."""
    rows = [{"team": team, "reason": note.not_ranked, **note.to_json()} for team, note in notes.items()
            if note.not_ranked is not None]
    for result in shown:
        missing = next((c for c in columns if number_at(result.metrics, c.path) is None), None)
        if missing is not None:
            reason = f"{missing.title}: {why_no_number(result.metrics, missing.path)}"
            rows.append({"team": result.key, "reason": reason,
                         **(notes[result.team].to_json() if result.team in notes else NO_NOTES)})
    return rows


def build_definition_board(leaderboard: LeaderboardDefinition, metrics: Mapping[str, Mapping], *, bootstrap: int,
                           seed: int, level: float, alpha: float = 0.05,
                           notes: Mapping[str, TeamNotes] | None = None, metric: str | None = None,
                           challenge: str = "challenge") -> dict[str, Any]:
    """The board (leaderboard.json's content) of the results' metrics.json ranked by the definition."""
    boot.check_level(level)
    if bootstrap < 1:
        raise InputError(f"--bootstrap {bootstrap}: the leaderboard needs at least one resample")
    if not 0 < alpha < 1:
        raise InputError(f"--alpha {alpha}: expected a number between 0 and 1")
    notes = dict(notes or {})
    board_lb = board_leaderboard(leaderboard, metric)
    columns = ranked_columns(board_lb)
    method = board_lb.scoring_method_choice
    title = board_lb.score.title if method == "abs" else f"{POSITION_TITLES[method]} over {len(columns)} columns"
    higher_is_better = method == "abs" and board_lb.score.order == "desc"
    results = [r for r in results_of(metrics) if r.team not in notes or notes[r.team].not_ranked is None]
    shown = displayed_results(results, board_lb)
    ranked = [r for r in shown if rankable(r, columns)]
    board: dict[str, Any] = {
        "challenge": challenge, "edition": None, "metric": title, "higher_is_better": higher_is_better,
        "scoring_method_choice": method, "result_display_choice": board_lb.result_display_choice,
        "ties": "equal values share the better rank, as grand-challenge ranks",
        "not_ranked": not_ranked_rows(shown, columns, notes), "failed": {}, "boards": []}
    if not ranked:
        board["teams"] = []
        return board
    started = time.perf_counter()
    cases = {c: column_cases(c, ranked) for c in board_lb.columns}
    units = sorted({case for c in cases.values() for f in c.found for case in f.cases})  # whatever order listed
    if len(units) * bootstrap > MAX_DRAWS:  # the draws and one result's drawn values are held in memory
        too_many = ColumnCases(reason=f"{len(units)} cases x {bootstrap} resamples: more than the leaderboard "
                                      f"draws ({MAX_DRAWS:,} at most); fewer resamples (--bootstrap) would do")
        cases = {column: too_many if c.reason is None else c for column, c in cases.items()}
        units = []
    draws = boot.draw_resamples(len(units), bootstrap, seed) if units else np.zeros((bootstrap, 0), np.int64)
    replicates = {c: resampled_statistic(found.found, units, draws, c.summary)
                  for c, found in cases.items() if found.reason is None}
    intervals = [boot.intervals({c.title: r[k] for c, r in replicates.items()}, level, seed)
                 for k in range(len(ranked))]
    values = np.array([[number_at(r.metrics, c.path) for r in ranked] for c in columns], dtype=np.float64)
    observed = positions(values, [c.order for c in columns], method)
    order = np.lexsort((np.arange(len(ranked)), observed.rank))
    resampled = columns[0] in replicates if method == "abs" else any(c in replicates for c in columns)
    if resampled:
        uncertainty = ranking_uncertainty(ranked, columns, method, values, replicates, cases.get(columns[0]),
                                          observed, level=level, seed=seed, alpha=alpha, order=order,
                                          higher_is_better=higher_is_better)
    else:
        uncertainty = RankingUncertainty([NO_RANK_STATISTICS] * len(ranked), [{} for _ in ranked], None, None)
    board.update({
        "significance": uncertainty.significance, "mean_kendall_tau": uncertainty.mean_kendall_tau,
        "num_units": len(units), "unit": "cases", "resampled": resampled,
        "no_intervals": None if resampled else (f"{columns[0].title}: {cases[columns[0]].reason}" if method == "abs"
                                                else "no ranked column has per-case values to resample"),
        "bootstrap": {"n": bootstrap, "seed": seed, "level": level, "paired": True,
                      "seconds": round(time.perf_counter() - started, 3)},
        "columns": [column_json(c, c in columns, cases[c]) for c in board_lb.columns]})
    quantity = values[0] if method == "abs" else observed.score
    rows = []
    for k in order:
        result = ranked[k]
        interval = intervals[k].get(columns[0].title, {}) if method == "abs" else uncertainty.position_intervals[k]
        rows.append({
            "team": result.key, "rank": int(observed.rank[k]), "value": float(quantity[k]),
            "low": interval.get("low"), "high": interval.get("high"), **uncertainty.statistics[k],
            "aggregates": {c.title: number_at(result.metrics, c.path) for c in board_lb.columns},
            "errors": {c.title: number_at(result.metrics, c.error_path) for c in board_lb.columns if c.error_path},
            "intervals": intervals[k],
            "rank_per_column": {c.title: int(observed.per_column[j][k]) for j, c in enumerate(columns)},
            **(notes[result.team].to_json() if result.team in notes else NO_NOTES)})
    board["teams"] = rows
    return board


@dataclasses.dataclass(frozen=True)
class RankingUncertainty:
    """What the resamples say of a ranking: each result's rank statistics (`rank_statistics`) and position
    interval (mean or median position only), the significance map's data and the mean Kendall's tau."""

    statistics: list[dict[str, Any]]
    position_intervals: list[dict[str, Any]]
    significance: dict[str, Any] | None
    mean_kendall_tau: float | None


def ranking_uncertainty(ranked: list[Result], columns: tuple[ResultColumn, ...], method: str, values: np.ndarray,
                        replicates: Mapping[ResultColumn, np.ndarray], score_cases: ColumnCases | None,
                        observed: Positions, *, level: float, seed: int, alpha: float, order: np.ndarray,
                        higher_is_better: bool) -> RankingUncertainty:
    """The ranking again in every resample (a column without replicates held at its values), the results' rank
    distributions, intervals of their positions and pairwise tests."""
    resamples = next(iter(replicates.values())).shape[1]
    stacked = np.stack([replicates[c] if c in replicates else np.repeat(values[k][:, None], resamples, axis=1)
                        for k, c in enumerate(columns)])
    again = positions(stacked, [c.order for c in columns], method)
    replicate = stacked[0] if method == "abs" else again.score
    tested = tested_teams(order)
    test, p = pairwise(tested, columns[0], score_cases, method, replicate, higher_is_better)
    position_intervals = [{} if method == "abs" else
                          boot.intervals({"position": again.score[k]}, level, seed).get("position", {})
                          for k in range(len(ranked))]
    return RankingUncertainty(rank_statistics(again.rank, level), position_intervals,
                              significance([ranked[i].key for i in tested], test, p, alpha, len(ranked)),
                              mean_kendall_tau(observed.rank, again.rank))


def write_definition_boards(leaderboard: LeaderboardDefinition, metrics: Mapping[str, Mapping], out: Path, *,
                            bootstrap: int, seed: int, level: float, notes: Mapping[str, TeamNotes] | None = None,
                            metric: str | None = None, alpha: float = 0.05, challenge: str = "challenge") -> None:
    """OUT/leaderboard.json, .csv and .html of the results' metrics.json ranked by the definition
    (`build_definition_board`)."""
    board = build_definition_board(leaderboard, metrics, bootstrap=bootstrap, seed=seed, level=level, alpha=alpha,
                                   notes=notes, metric=metric, challenge=challenge)
    write_json_atomic(out / "leaderboard.json", board)
    write_text_atomic(out / "leaderboard.csv", leaderboard_csv(board))
    write_text_atomic(out / "leaderboard.html", render_definition(board))
    for row in board["teams"]:
        log.info("%3d  %-24s %s = %g", row["rank"], team_label(row["team"]), board["metric"], row["value"])
    for row in board["not_ranked"]:
        log.info("     %-24s not ranked: %s", team_label(row["team"]), team_label(row["reason"]))
    log.info("leaderboard of %d result(s) -> %s", len(board["teams"]), out / "leaderboard.html")
