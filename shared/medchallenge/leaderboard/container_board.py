"""`medchallenge leaderboard --challenge FILE`: the leaderboard of a challenge defined by a file. Every folder of
--submissions is one team's evaluation input (as grand-challenge lays it out: predictions.json and
`<job pk>/output/...`, what `medchallenge preflight` writes to OUT/evaluation-input), scored by the definition's
evaluation container (evaluation.container: grand-challenge's conditions, one error line where it fails) into
OUT/teams/<team>/metrics.json, then ranked by the definition's leaderboard fields (definition_board.py)."""

from __future__ import annotations

import argparse
import json
import logging

from ..challenges.definition import ChallengeDefinition
from ..errors import InputError
from ..evaluation.container import evaluation_image, evaluation_limits, run_evaluation_container
from ..io import write_text_atomic
from .definition_board import write_definition_boards
from .table import TeamNotes, find_teams

log = logging.getLogger("medchallenge.leaderboard")


def write_container_leaderboard(args: argparse.Namespace, definition: ChallengeDefinition) -> None:
    """Each team's evaluation input scored by the evaluation container, then the board (OUT/leaderboard.*)."""
    if args.edition is not None:
        raise InputError(f"--edition {args.edition[:40]}: editions are a built-in evaluator's")
    teams = find_teams(args.submissions)
    image = evaluation_image(definition.evaluation, args.engine)
    metrics, notes = {}, {}
    for team in teams:
        folder = args.output / "teams" / team.name
        result = run_evaluation_container(image, team.folder, args.ground_truth, folder / "evaluation-job",
                                          engine=args.engine, limits=evaluation_limits(definition.limits))
        if result.metrics is None:
            log.warning("warning: submission %s not ranked: %s", team.name, result.error)
            notes[team.name] = TeamNotes(0, 0, result.notes, not_ranked=f"evaluation failed: {result.error}")
            continue
        write_text_atomic(folder / "metrics.json", json.dumps(result.metrics, indent=2, allow_nan=False))
        metrics[team.name] = result.metrics
        notes[team.name] = TeamNotes(0, 0, result.notes)
    write_definition_boards(definition.leaderboard, metrics, args.output, bootstrap=args.bootstrap,
                            seed=args.bootstrap_seed, level=args.bootstrap_level, notes=notes, metric=args.metric,
                            alpha=args.alpha, challenge=definition.name)
