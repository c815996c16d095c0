"""`medchallenge leaderboard`: score every submission, rank them, and show how certain the ranking is.

table.py: the command (scoring the teams, ranks, paired bootstrap, pairwise tests, leaderboard.json and .csv);
page.py: leaderboard.html; significance.py: the pairwise tests and ranking agreement on NumPy alone;
definition_board.py: the board of a challenge definition (its evaluation container's metrics.json ranked as
grand-challenge ranks, gc_ranking.py, with intervals from per-case values, case_values.py).
"""

from .command import main
from .table import CSV_COLUMNS, edition_environment, leaderboard_csv

__all__ = ["CSV_COLUMNS", "edition_environment", "leaderboard_csv", "main"]
