"""The phase's leaderboard: `python -m medchallenge.phase.leaderboard OUT` ranks every evaluated submission with
`medchallenge leaderboard` (OUT/leaderboard.html, .json and .csv; paired bootstrap, rank distributions, pairwise
tests), one board per official ranking metric of the challenge (OUT/leaderboard-<metric>.* for the others: object-CXR
ranks by AUC and by FROC). Beside each team: its failed jobs out of all, its warnings (the convention check, the
evaluator's warnings on its values) and a link to its report. A submission refused before any job (its image or
model unreadable) and one whose every job failed are listed as not ranked, with why. Only a complete phase is
ranked: while some submission's jobs have no result, the old leaderboard is removed and none is written (exit status
1). Nothing is redone while the evaluations, the refusals and the options are unchanged."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import sys
from pathlib import Path

from ..challenges import LeaderboardDefinition
from ..errors import InputError, report_errors
from ..evaluation.container import read_metrics
from ..io import write_json_atomic
from ..leaderboard.definition_board import write_definition_boards
from ..leaderboard.table import TeamNotes, build_leaderboard_parser, write_boards
from ..logs import setup_logging
from .evaluate import evaluation_fingerprint, evaluation_warnings, phase_definition, stored_fingerprint
from .hashes import sha256_json
from .layout import PhaseLayout
from .records import PhaseRecords

log = logging.getLogger("medchallenge.phase")
OUTPUTS = ("leaderboard.json", "leaderboard.html", "leaderboard.csv")


def ranked_teams(records: PhaseRecords) -> list[str]:
    """The phase's submissions that were not refused, in the submissions file's order."""
    return [team for team in records.phase["submissions"] if not records.submission(team)["refused"]]


def current_evaluations(records: PhaseRecords) -> dict[str, str] | None:
    """Each ranked submission's evaluation fingerprint; None while one of them is not current."""
    evaluations = {}
    for team in ranked_teams(records):
        fingerprint = evaluation_fingerprint(records, team)
        if fingerprint is None or fingerprint != stored_fingerprint(records.layout.evaluation_state(team)):
            return None
        evaluations[team] = fingerprint
    return evaluations


def leaderboard_fingerprint(records: PhaseRecords, evaluations: dict[str, str]) -> str:
    phase = records.phase
    refused = {team: records.submission(team)["refused"] for team in phase["submissions"]
               if records.submission(team)["refused"]}
    own = {**({"definition": phase["definition_sha256"]} if phase.get("definition") else {}),
           **({"metric": phase["metric"]} if phase.get("metric") else {})}  # a phase of neither: as it was
    return sha256_json({"evaluations": evaluations, "refused": refused, "bootstrap": phase["bootstrap"],
                        "edition": phase["edition"], **own})


def team_notes(records: PhaseRecords) -> dict[str, TeamNotes]:
    """What the leaderboard shows beside each submission, in the submissions file's order: its jobs and how many
    failed, its evaluation's warnings, its report; refused, or every job failed: not ranked, and why."""
    notes = {}
    for team in records.phase["submissions"]:
        submission = records.submission(team)
        if submission["refused"]:
            notes[team] = TeamNotes(0, 0, not_ranked=f"refused before any job: {submission['refused']}")
            continue
        jobs = len(submission["jobs"])
        failed = sum((records.state(job["job_id"]) or {}).get("status") == "failed" for job in submission["jobs"])
        notes[team] = TeamNotes(
            jobs, failed, tuple(evaluation_warnings(records.layout, team)),
            (records.layout.submission(team) / "report.html").relative_to(records.layout.out).as_posix(),
            not_ranked=f"every job failed ({failed} of {jobs})" if jobs and failed == jobs else None)
    return notes


def board_files(out: Path) -> list[Path]:
    """The leaderboard's files in OUT: leaderboard.* and every other board's leaderboard-<metric>.*."""
    stems = ["leaderboard", *(page.stem for page in out.glob("leaderboard-*.html"))]
    return [out / f"{stem}{suffix}" for stem in stems for suffix in (".json", ".html", ".csv")]


def leaderboard_current(records: PhaseRecords) -> bool:
    evaluations = current_evaluations(records)
    layout = records.layout
    return (evaluations is not None
            and leaderboard_fingerprint(records, evaluations) == stored_fingerprint(layout.leaderboard_state)
            and all((layout.out / name).exists() for name in OUTPUTS))


def remove_stale(layout: PhaseLayout, evaluations: dict[str, str]) -> None:
    """The evaluation inputs and scoring records of submissions no longer ranked (a submission evaluated again has
    its records rewritten by its evaluation, for the inputs the leaderboard scores)."""
    for folder in (layout.evaluation_inputs, layout.out / "records"):
        for team in (folder.iterdir() if folder.is_dir() else []):
            if team.name not in evaluations:
                shutil.rmtree(team)


def write_container_board(records: PhaseRecords, leaderboard: LeaderboardDefinition, challenge: str) -> None:
    """The board of a challenge defined by a file: each ranked submission's metrics.json (its evaluation
    container's) ranked by the definition's leaderboard fields; a submission whose evaluation failed is listed as
    not ranked, with the evaluation's error."""
    layout, phase = records.layout, records.phase
    notes = team_notes(records)
    metrics = {}
    for team in ranked_teams(records):
        state = json.loads(layout.evaluation_state(team).read_text())
        if state.get("status") != "evaluated":
            if notes[team].not_ranked is None:
                notes[team] = dataclasses.replace(notes[team], not_ranked=f"evaluation failed: {state.get('error')}")
            continue
        metrics[team] = read_metrics(layout.submission(team) / "evaluation" / "metrics.json")
    boot = phase["bootstrap"]
    write_definition_boards(leaderboard, metrics, layout.out, bootstrap=boot["n"], seed=boot["seed"],
                            level=boot["level"], notes=notes, metric=phase.get("metric"), challenge=challenge)


@report_errors
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m medchallenge.phase.leaderboard OUT", file=sys.stderr)
        return 2
    setup_logging()
    layout = PhaseLayout.of(Path(argv[0]))
    records = PhaseRecords(layout)
    if leaderboard_current(records):
        log.info("leaderboard current: %s", layout.out / "leaderboard.html")
        return 0
    for path in board_files(layout.out):
        path.unlink(missing_ok=True)
    evaluations = current_evaluations(records)
    if evaluations is None:
        raise InputError("the leaderboard waits for every submission's evaluation (`medchallenge phase status "
                         f"{layout.out}` shows what is missing)")
    remove_stale(layout, evaluations)
    layout.leaderboard_state.unlink(missing_ok=True)
    phase = records.phase
    boot = phase["bootstrap"]
    definition = phase_definition(phase)
    if not definition.evaluation.builtin:
        write_container_board(records, definition.leaderboard, definition.name)
        write_json_atomic(layout.leaderboard_state, {"fingerprint": leaderboard_fingerprint(records, evaluations),
                                                     "evaluations": evaluations})
        return 0
    args = build_leaderboard_parser().parse_args([
        "--challenge", definition.evaluation.builtin, "--ground-truth", phase["ground_truth"], "--submissions",
        str(layout.evaluation_inputs), "--output", str(layout.out), "--bootstrap", str(boot["n"]), "--bootstrap-seed",
        str(boot["seed"]), "--bootstrap-level", str(boot["level"]), "--no-progress",
        *(["--edition", edition] if (edition := phase["edition"] or definition.evaluation.edition) else []),
        *(["--metric", phase["metric"]] if phase.get("metric") else [])])
    write_boards(args, [], team_notes(records))
    write_json_atomic(layout.leaderboard_state, {"fingerprint": leaderboard_fingerprint(records, evaluations),
                                                 "evaluations": evaluations})
    return 0

if __name__ == "__main__":
    sys.exit(main())
