"""The one evaluator command every challenge's evaluator runs, and the machinery under it.

command.py: the command (`evaluators/<challenge>/evaluate.py`, `medchallenge evaluate`): the `Evaluator` a challenge
plugs in, flags, workers, metrics.json; cases.py: the types a challenge's steps give (`Cases`, `CaseRecord`,
`Summary`); inputs.py: the checks of the submission's files and the fingerprint of the inputs; records.py: stage 1,
the per-case records (worker processes, the --records cache, --shard); bootstrap.py: the percentile bootstrap
intervals of --bootstrap, the leaderboard and the phase; container.py: an organiser's own evaluation container, run
as grand-challenge runs it (run_evaluation_container, read_metrics, load_evaluation_image).
"""

from .bootstrap import resampled_ids
from .cases import OMITTED, CaseRecord, Cases, Omitted, Summary
from .command import Evaluator, Scored, build_parser, score, write_results
from .inputs import input_state

__all__ = ["OMITTED", "CaseRecord", "Cases", "Evaluator", "Omitted", "Scored", "Summary", "build_parser",
           "input_state", "resampled_ids", "score", "write_results"]
