"""The phase's leaderboard: `python -m medchallenge.phase.leaderboard OUT` ranks every evaluated submission with
`medchallenge leaderboard` (OUT/leaderboard.html, .json and .csv; paired bootstrap, rank distributions, pairwise
tests). Only a complete phase is ranked: while some submission's jobs have no result, the old leaderboard is removed
and none is written (exit status 1). Nothing is redone while the evaluations and options are unchanged. A refused
submission (its image or model unreadable) is not ranked; `medchallenge phase status` shows why."""

from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path

from ..errors import InputError, report_errors
from ..io import write_json_atomic
from ..leaderboard import main as leaderboard_main
from ..logs import setup_logging
from .evaluate import evaluation_fingerprint, read_json, stored_fingerprint
from .hashes import sha256_json
from .layout import PhaseLayout

log = logging.getLogger("medchallenge.phase")
OUTPUTS = ("leaderboard.json", "leaderboard.html", "leaderboard.csv")


def ranked_teams(layout: PhaseLayout) -> list[str]:
    """The phase's submissions that were not refused, in the submissions file's order."""
    phase = read_json(layout.phase_file, "phase.json")
    return [team for team in phase["submissions"]
            if not read_json(layout.submission_file(team), "submission.json")["refused"]]


def current_evaluations(layout: PhaseLayout) -> dict[str, str] | None:
    """Each ranked submission's evaluation fingerprint; None while one of them is not current."""
    evaluations = {}
    for team in ranked_teams(layout):
        fingerprint = evaluation_fingerprint(layout, team)
        if fingerprint is None or fingerprint != stored_fingerprint(layout.evaluation_state(team)):
            return None
        evaluations[team] = fingerprint
    return evaluations


def leaderboard_fingerprint(layout: PhaseLayout, evaluations: dict[str, str]) -> str:
    phase = read_json(layout.phase_file, "phase.json")
    return sha256_json({"evaluations": evaluations, "bootstrap": phase["bootstrap"], "edition": phase["edition"]})


def leaderboard_current(layout: PhaseLayout) -> bool:
    evaluations = current_evaluations(layout)
    return (evaluations is not None
            and leaderboard_fingerprint(layout, evaluations) == stored_fingerprint(layout.leaderboard_state)
            and all((layout.out / name).exists() for name in OUTPUTS))


def remove_stale(layout: PhaseLayout, evaluations: dict[str, str]) -> None:
    """The evaluation inputs of submissions no longer in the phase, and the leaderboard's records of submissions
    evaluated again since it last ranked them (`medchallenge leaderboard` refuses records of other inputs)."""
    try:
        ranked = json.loads(layout.leaderboard_state.read_text()).get("evaluations", {})
    except (OSError, ValueError, AttributeError):
        ranked = {}
    for folder, keep in ((layout.evaluation_inputs, set(evaluations)),
                         (layout.out / "records", {t for t, f in evaluations.items() if ranked.get(t) == f})):
        for team in (folder.iterdir() if folder.is_dir() else []):
            if team.name not in keep:
                shutil.rmtree(team)


@report_errors
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m medchallenge.phase.leaderboard OUT", file=sys.stderr)
        return 2
    setup_logging()
    layout = PhaseLayout.of(Path(argv[0]))
    if leaderboard_current(layout):
        log.info("leaderboard current: %s", layout.out / "leaderboard.html")
        return 0
    for name in OUTPUTS:
        (layout.out / name).unlink(missing_ok=True)
    evaluations = current_evaluations(layout)
    if evaluations is None:
        raise InputError("the leaderboard waits for every submission's evaluation (`medchallenge phase status "
                         f"{layout.out}` shows what is missing)")
    remove_stale(layout, evaluations)
    layout.leaderboard_state.unlink(missing_ok=True)
    phase = read_json(layout.phase_file, "phase.json")
    boot = phase["bootstrap"]
    status = leaderboard_main(["--challenge", phase["challenge"], "--ground-truth", phase["ground_truth"],
                               "--submissions", str(layout.evaluation_inputs), "--output", str(layout.out),
                               "--bootstrap", str(boot["n"]), "--bootstrap-seed", str(boot["seed"]),
                               "--bootstrap-level", str(boot["level"]), "--no-progress",
                               *(["--edition", phase["edition"]] if phase["edition"] else [])])
    if status == 0:
        write_json_atomic(layout.leaderboard_state, {"fingerprint": leaderboard_fingerprint(layout, evaluations),
                                                     "evaluations": evaluations})
    return status


if __name__ == "__main__":
    sys.exit(main())
