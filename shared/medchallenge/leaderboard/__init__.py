"""`medchallenge leaderboard`: score every submission, rank them, and show how certain the ranking is.

table.py: the command (scoring the teams, ranks, paired bootstrap, pairwise tests, leaderboard.json and .csv);
page.py: leaderboard.html; significance.py: the pairwise tests and ranking agreement on NumPy alone.
"""

from .table import CSV_COLUMNS, edition_environment, leaderboard_csv, main

__all__ = ["CSV_COLUMNS", "edition_environment", "leaderboard_csv", "main"]
