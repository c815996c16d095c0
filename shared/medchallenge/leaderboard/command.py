"""`medchallenge leaderboard`: a built-in challenge's submissions scored by its evaluator (table.py), or the
evaluation inputs of a challenge defined by a file scored by its evaluation container (container_board.py); then
ranked with intervals."""

from __future__ import annotations

from ..challenges import check_ground_truth, load_challenge
from ..errors import InputError, report_errors
from ..logs import setup_logging
from .container_board import write_container_leaderboard
from .table import build_leaderboard_parser, write_boards


@report_errors
def main(argv: list[str] | None = None) -> int:
    args, extra = build_leaderboard_parser().parse_known_args(argv)
    setup_logging()
    definition = load_challenge(args.challenge)
    check_ground_truth(definition, args.ground_truth)
    if definition.evaluation.builtin:  # a built-in challenge, or a definition scored by a built-in evaluator
        args.challenge, args.edition = definition.evaluation.builtin, args.edition or definition.evaluation.edition
        write_boards(args, [a for a in extra if a != "--"], {})
    elif extra:
        raise InputError(f"{' '.join(extra)[:80]}: unknown options (a definition's evaluation container takes none)")
    else:
        write_container_leaderboard(args, definition)
    return 0
