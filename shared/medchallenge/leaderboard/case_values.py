"""The per-case values behind a leaderboard column of a foreign evaluation's metrics.json, where the challenge
definition says the column is their mean or median (`ResultColumn.case_path`, `summary`).

Three layouts are read, the first that fits:
- case-major, as this project and most evaluations write it: `case` maps each case id to an object holding the
  metric at `case_path` (`{"case": {"lung-001": {"dice": 0.8}, ...}}`);
- column-major, as evalutils writes a pandas frame (`DataFrame.to_dict()`): `case` holds, at `case_path`, an object
  from each row index to the value (`{"case": {"dice": {"0": 0.8, "1": 0.7}}}`); the row index is the case id;
- grand-challenge-forge's example evaluation: `results`, a list of per-case objects in the order of
  predictions.json; the position is the case id.
A case whose value is null has none (a metric undefined on it, as HD95 on an empty mask); any other value that is
not a finite number makes the column unusable. Pure functions over plain data.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from ..challenges.definition import ResultColumn
from .gc_ranking import MISSING, as_number, number_at, resolve_jsonpath

LAYOUTS = {"case-major": "case.<case id>.", "column-major": "case.", "results": "results.<position>."}


@dataclass(frozen=True)
class CaseValues:
    """A column's per-case values in one metrics.json: every case id of its layout (in file order) and the value
    of each case that has one; `layout` names where they were found."""

    layout: str
    cases: tuple[str, ...]
    values: dict[str, float]


def _numbers(pairs: list[tuple[str, object]], layout: str) -> CaseValues | str:
    values: dict[str, float] = {}
    for case, value in pairs:
        if value is None or value is MISSING:
            continue
        number = as_number(value)
        if number is None:
            return f"a per-case value ({layout}) is not a finite number"
        values[case] = number
    if not values:
        return "no case has a value"
    return CaseValues(layout, tuple(case for case, _ in pairs), values)


def per_case_values(metrics: Mapping, case_path: str) -> CaseValues | str:
    """The values at `case_path` of each case, in the first layout that holds them; else why there are none."""
    cases = metrics.get("case")
    if isinstance(cases, Mapping) and cases:
        entries = [(str(case), resolve_jsonpath(entry, case_path) if isinstance(entry, Mapping) else MISSING)
                   for case, entry in cases.items()]
        if any(value is not MISSING for _, value in entries):
            return _numbers(entries, "case-major")
        column = resolve_jsonpath(cases, case_path)
        if isinstance(column, Mapping) and column:
            return _numbers([(str(index), value) for index, value in column.items()], "column-major")
    results = metrics.get("results")
    if isinstance(results, list) and results:
        return _numbers([(str(position), resolve_jsonpath(entry, case_path) if isinstance(entry, Mapping)
                          else MISSING) for position, entry in enumerate(results)], "results")
    return f"metrics.json has no per-case values at {case_path} (neither case.<case id>.{case_path}, " \
           f"case.{case_path}.<index> nor results.<position>.{case_path})"


def summarise(values: list[float], summary: str) -> float:
    """The mean or median of the values."""
    return statistics.fmean(values) if summary == "mean" else statistics.median(values)


def check_summary(metrics: Mapping, column: ResultColumn, found: CaseValues) -> str | None:
    """None where the column's value is the declared mean or median of its per-case values (to 1e-6, relative),
    else why not."""
    value = number_at(metrics, column.path)
    if value is None:
        return None  # the team is not ranked by it; said elsewhere
    expected = summarise(list(found.values.values()), column.summary or "mean")
    if not math.isclose(value, expected, rel_tol=1e-6, abs_tol=1e-12):
        return (f"{column.path} is not the {column.summary} of its {len(found.values)} per-case values at "
                f"{LAYOUTS[found.layout]}{column.case_path}")
    return None
