"""The Unicode tables of medchallenge/official/data (unicode13.json, decimal_digits.json): loading them, and their
code-point runs, written as in the Unicode data files ("0870..0887", "08B5")."""

from __future__ import annotations

import json
from importlib import resources


def load(name: str) -> dict:
    """medchallenge/official/data/`name`, parsed."""
    return json.loads(resources.files(__package__).joinpath("data", name).read_text(encoding="utf-8"))


def code_points(runs: list[str]) -> list[int]:
    """["0870..0887", "08B5"] -> every code point of those runs."""
    points: list[int] = []
    for run in runs:
        first, _, last = run.partition("..")
        points.extend(range(int(first, 16), int(last or first, 16) + 1))
    return points
