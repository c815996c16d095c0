"""grand-challenge's leaderboard semantics over plain data, for a challenge definition's leaderboard.

As grand-challenge.org ranks a phase (`evaluation/utils.py` rank_results, `evaluation/tasks.py` calculate_ranks,
`Phase.valid_metrics` and `Phase.scoring_method`):
- a path (score_jsonpath, an extra column's path) is split on "." and each key looked up in turn; a key that is not
  there, or a lookup into something that is not an object, finds nothing (`MISSING`), never an error;
- the ranked columns are the score and every extra column not `exclude_from_ranking`; a result that lacks a value
  at any of them (missing or null) is not ranked at all, whatever the scoring method;
- each ranked column ranks the raw values (score_decimal_places only formats them), descending or ascending, and
  equal values share the better rank (1 + the number of strictly better results);
- the overall position is the score column's rank (absolute), or the mean or median of the columns' ranks; results
  are ranked by it, lower first, equal positions sharing a rank;
- result_display_choice: all results, each team's most recent one (before the check for missing values: a team
  whose latest result lacks a column is not shown), or each team's best-ranked one (the most recent among equals),
  ranked again among themselves.
Here a value must also be a finite number (grand-challenge would compare whatever JSON holds); the functions over
NumPy arrays rank many resamples at once with the same rules.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..challenges.definition import LeaderboardDefinition, ResultColumn, ScoringMethod, SortOrder
from .table import competition_ranks


class Missing:
    """What a path into nothing resolves to (grand-challenge's empty string): falsy, one of a kind."""

    _instance: Missing | None = None

    def __new__(cls) -> Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "MISSING"


MISSING = Missing()


def resolve_jsonpath(metrics: Mapping, path: str) -> object:
    """The value at a dotted path in metrics.json as grand-challenge's get_jsonpath finds it (each "."-separated
    key looked up in turn, no list indices), or MISSING where there is none."""
    value: object = metrics
    for key in path.split("."):
        if not isinstance(value, Mapping) or key not in value:
            return MISSING
        value = value[key]
    return value


def as_number(value: object) -> float | None:
    """A JSON number as a float; None for anything else (missing, null, text, true/false, not finite)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def number_at(metrics: Mapping, path: str) -> float | None:
    """The number at `path` in metrics.json, None where there is none."""
    return as_number(resolve_jsonpath(metrics, path))


def why_no_number(metrics: Mapping, path: str) -> str:
    """Why `path` gives no number, in words that never echo the value itself."""
    value = resolve_jsonpath(metrics, path)
    if value is MISSING:
        return f"metrics.json has nothing at {path}"
    if value is None:
        return f"metrics.json has null at {path}"
    kind = ("an object" if isinstance(value, Mapping) else "a list" if isinstance(value, list)
            else "text" if isinstance(value, str) else "true/false" if isinstance(value, bool) else "not a number")
    return f"metrics.json has {kind} at {path}, not a finite number"


def ranked_columns(leaderboard: LeaderboardDefinition) -> tuple[ResultColumn, ...]:
    """The columns a position ranks over, one per path (grand-challenge keys a result's ranks by path)."""
    seen: set[str] = set()
    columns = []
    for column in leaderboard.ranked_columns:
        if column.path not in seen:
            seen.add(column.path)
            columns.append(column)
    return tuple(columns)


def column_ranks(values: np.ndarray, order: SortOrder) -> np.ndarray:
    """Ranks along axis 0 (results), descending: higher first, ascending: lower first; equal values share the
    better rank; NaN ranks last."""
    return competition_ranks(values if order == "desc" else -values)


@dataclass(frozen=True)
class Positions:
    """A ranking of results (axis 0 of each array, any further axes are resamples): each ranked column's rank,
    the position they give (grand-challenge's rank_score) and the overall rank."""

    per_column: np.ndarray  # (columns, results, ...)
    score: np.ndarray  # (results, ...)
    rank: np.ndarray  # (results, ...)


def positions(values: np.ndarray, orders: Sequence[SortOrder], method: ScoringMethod) -> Positions:
    """grand-challenge's rank_results on values (columns, results, ...): the columns ranked, then the results by
    the score column's rank (abs) or the mean (avg) or median (med) of the columns' ranks, lower first."""
    per_column = np.stack([column_ranks(column, order) for column, order in zip(values, orders)])
    if method == "abs":
        score = per_column[0].astype(np.float64)
    elif method == "avg":
        score = per_column.mean(axis=0)
    else:
        score = np.median(per_column, axis=0)
    return Positions(per_column, score, competition_ranks(-score))


@dataclass(frozen=True)
class Result:
    """One evaluated submission: its key as given (`team` or `team/submission`), its team, its metrics.json."""

    key: str
    team: str
    metrics: Mapping


def results_of(metrics: Mapping[str, Mapping]) -> list[Result]:
    """Results from `{key: metrics.json}` in the order made (oldest first); a key `team/submission` is one of a
    team's several submissions, a plain key a team's only one."""
    return [Result(key, key.split("/", 1)[0], value) for key, value in metrics.items()]


def rankable(result: Result, columns: Sequence[ResultColumn]) -> bool:
    """Whether the result has a number at every ranked column (grand-challenge's _filter_valid_results)."""
    return all(number_at(result.metrics, column.path) is not None for column in columns)


def observed_values(results: Sequence[Result], columns: Sequence[ResultColumn]) -> np.ndarray:
    """(columns, results) of the numbers at the columns' paths, NaN where there is none."""
    return np.array([[np.nan if (value := number_at(r.metrics, c.path)) is None else value for r in results]
                     for c in columns], dtype=np.float64).reshape(len(columns), len(results))


def rank_results(results: Sequence[Result], leaderboard: LeaderboardDefinition) -> Positions:
    """The positions of results that all have every ranked column (`rankable`)."""
    columns = ranked_columns(leaderboard)
    return positions(observed_values(results, columns), [c.order for c in columns],
                     leaderboard.scoring_method_choice)


def displayed_results(results: Sequence[Result], leaderboard: LeaderboardDefinition) -> list[Result]:
    """The results the leaderboard shows before the check for missing values (all, or each team's most recent),
    or after it (each team's best: the rankable results ranked, then per team the best, the most recent among
    equals), in the order made."""
    choice = leaderboard.result_display_choice
    if choice == "all":
        return list(results)
    if choice == "rec":
        latest = {r.team: r for r in results}
        return [r for r in results if latest[r.team] is r]
    candidates = [r for r in results if rankable(r, ranked_columns(leaderboard))]
    if not candidates:
        return []
    rank = rank_results(candidates, leaderboard).rank
    best: dict[str, int] = {}
    for index in reversed(range(len(candidates))):  # most recent first, as grand-challenge walks them
        team = candidates[index].team
        if team not in best or rank[index] < rank[best[team]]:
            best[team] = index
    chosen = set(best.values())
    return [r for index, r in enumerate(candidates) if index in chosen]
