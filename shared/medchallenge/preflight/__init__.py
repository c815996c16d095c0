"""`medchallenge preflight`: run a participant's algorithm image once per case as grand-challenge would, then score
the jobs with the challenge's evaluator.

run.py: the command (the jobs, their scoring and review, preflight.json, the terminal table); page.py:
preflight.html.
"""

from .run import REVIEW_FOLDER, main, report, review_figures, score_jobs

__all__ = ["REVIEW_FOLDER", "main", "report", "review_figures", "score_jobs"]
