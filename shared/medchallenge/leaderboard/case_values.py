"""The per-case values behind a leaderboard column of a foreign evaluation's metrics.json, where the challenge
definition says the column is their mean or median (`ResultColumn.case_path`, `summary`).

Three layouts are read, the first that fits:
- case-major, as this project and most evaluations write it: `case` maps each case id to an object holding the
  metric at `case_path` (`{"case": {"lung-001": {"dice": 0.8}, ...}}`);
- column-major, as evalutils writes a pandas frame (`DataFrame.to_dict()`): `case` holds, at `case_path`, an object
  from each row index to the value (`{"case": {"dice": {"0": 0.8, "1": 0.7}}}`); the case id is the frame's
  `case_id` column where it has one (a distinct text per row), else the row index;
- grand-challenge-forge's example evaluation: `results`, a list of per-case objects in the order of
  predictions.json; the case id is each object's `case_id` where every one has a distinct text, else the position.
Results are paired by case id, so a row index or position pairs the same case only where every team's evaluation
lists the cases in the same order.
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
CASE_ID = "case_id"  # the column (evalutils' frame) or key (a `results` entry) that names each row's case


@dataclass(frozen=True)
class CaseValues:
    """A column's per-case values in one metrics.json: every case id of its layout (in file order) and the value
    of each case that has one; `layout` names where they were found, `paired_by` what the ids are ("case id",
    "row index" or "position")."""

    layout: str
    cases: tuple[str, ...]
    values: dict[str, float]
    paired_by: str = "case id"


def _numbers(pairs: list[tuple[str, object]], layout: str, paired_by: str = "case id") -> CaseValues | str:
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
    return CaseValues(layout, tuple(case for case, _ in pairs), values, paired_by)


def case_ids(names: list[object]) -> list[str] | None:
    """The rows' case ids: their names where every row has a distinct text, else None (the rows' indices or
    positions stand for them)."""
    if all(isinstance(name, str) for name in names) and len(set(names)) == len(names):
        return [str(name) for name in names]
    return None


def per_case_values(metrics: Mapping, case_path: str) -> CaseValues | str:
    """The values at `case_path` of each case, in the first layout that holds them; else why there are none."""
    if not isinstance(metrics, Mapping):
        return "metrics.json is not an object"
    cases = metrics.get("case")
    if isinstance(cases, Mapping) and cases:
        entries = [(str(case), resolve_jsonpath(entry, case_path) if isinstance(entry, Mapping) else MISSING)
                   for case, entry in cases.items()]
        if any(value is not MISSING for _, value in entries):
            return _numbers(entries, "case-major")
        column = resolve_jsonpath(cases, case_path)
        if isinstance(column, Mapping) and column:
            rows = [str(index) for index in column]
            names = cases.get(CASE_ID)
            ids = case_ids([names.get(row) if isinstance(names, Mapping) else None for row in rows])
            return _numbers(list(zip(ids or rows, column.values())), "column-major",
                            "case id" if ids else "row index")
    results = metrics.get("results")
    if isinstance(results, list) and results:
        entries = [entry if isinstance(entry, Mapping) else {} for entry in results]
        ids = case_ids([entry.get(CASE_ID) for entry in entries])
        pairs = [(case, resolve_jsonpath(entry, case_path))
                 for case, entry in zip(ids or map(str, range(len(entries))), entries)]
        return _numbers(pairs, "results", "case id" if ids else "position")
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
