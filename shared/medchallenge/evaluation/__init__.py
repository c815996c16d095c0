"""The one evaluator command every challenge's evaluator runs, and the machinery under it.

command.py: the command (`evaluators/<challenge>/evaluate.py`, `medchallenge evaluate`): the `Evaluator` a challenge
plugs in, with the base types its steps give (`Cases`, `CaseRecord`, `Summary`), flags, workers and metrics.json;
records.py: stage 1, the per-case records (worker processes, the --records cache tied to a fingerprint of the
inputs, --shard); bootstrap.py: the percentile bootstrap intervals of --bootstrap and the leaderboard.
"""

from .bootstrap import resampled_ids
from .command import OMITTED, CaseRecord, Cases, Evaluator, Omitted, Scored, Summary, build_parser, score, write_results
from .records import input_state

__all__ = ["OMITTED", "CaseRecord", "Cases", "Evaluator", "Omitted", "Scored", "Summary", "build_parser",
           "input_state", "resampled_ids", "score", "write_results"]
