"""The built-in challenges' leaderboard page and CSV, byte for byte, from boards written before the page machinery
was shared with challenge definitions' boards (tests/fixtures/leaderboard_pages: a caption leaderboard with a
submission not scored, a phase's board with failed jobs, warnings, reports and teams not ranked, and a board on
which no team could be ranked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medchallenge.leaderboard.page import render
from medchallenge.leaderboard.table import leaderboard_csv

FIXTURES = Path(__file__).parent / "fixtures" / "leaderboard_pages"


@pytest.mark.parametrize("name", ["caption", "caption-notes", "unranked"])
def test_built_in_pages_and_csv_are_byte_identical(name):
    board = json.loads((FIXTURES / f"{name}.json").read_text())
    assert render(board) == (FIXTURES / f"{name}.html").read_text()
    assert leaderboard_csv(board) == (FIXTURES / f"{name}.csv").read_text()
