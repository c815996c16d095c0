"""The evaluation of one submission: `python -m medchallenge.phase.evaluate OUT TEAM`.

Once every job of the submission has its result, its outputs become the evaluator's input
(OUT/evaluation-inputs/<team>, as grand-challenge lays it out) and the challenge's evaluator scores them with
bootstrap intervals, as pre-flight does (a job that failed is a missing prediction; its records and bootstrap
replicates kept in OUT/records/<team> for the leaderboard); then the pre-flight-style report of its jobs:
OUT/submissions/<team>/report.json and report.html, evaluation/metrics.json. Nothing is redone while
its inputs (the jobs' results, the ground truth, the options) are unchanged. Exit status 1 while some job has no
result yet (nothing is written, and the submission's old evaluation input is removed).

`python -m medchallenge.phase.evaluate OUT TEAM [TEAM ...]` evaluates several: `phase run` names together the
submissions with the same jobs (one image and model under several teams), which are then scored once and the
others given a copy of that evaluation, so that a hundred teams on one tag cost one evaluation."""

from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ..challenges import ChallengeDefinition, load_challenge
from ..errors import InputError, report_errors
from ..evaluation.container import evaluation_image
from ..grand_challenge.emulator import CaseJob, definition_spec
from ..io import write_json_atomic, write_text_atomic
from ..jobs import JobLimits
from ..logs import setup_logging
from ..preflight import REVIEW_FOLDER, report, review_figures, score_jobs
from ..preflight.container import CONTAINER_WORK, score_jobs_by_container
from ..preflight.page import render_page
from .hashes import sha256_json
from .layout import PhaseLayout
from .records import BACKEND_FIELDS, PhaseRecords, backend_notes, is_final, read_result

log = logging.getLogger("medchallenge.phase")


def evaluation_fingerprint(records: PhaseRecords, team: str) -> str | None:
    """The hash of everything the submission's evaluation depends on; None while some job has no final result."""
    phase = records.phase
    submission = records.submission(team)
    states = []
    for job in submission["jobs"]:
        state = records.state(job["job_id"])
        if not is_final(state):
            return None
        states.append([job["case"], job["job_id"], state.get("finished"), state["status"],
                       *[state.get(k) for k in BACKEND_FIELDS]])
    own = {"definition": phase["definition_sha256"]} if phase.get("definition") else {}
    return sha256_json({"phase": {**{k: phase[k] for k in ("challenge", "edition", "bootstrap")}, **own},
                        "ground_truth": records.ground_truth_stamp, "jobs": states,
                        "refused": submission["refused"]})


def stored_fingerprint(path: Path) -> str | None:
    try:
        return json.loads(path.read_text()).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        return None


def evaluation_current(records: PhaseRecords, team: str) -> bool:
    fingerprint = evaluation_fingerprint(records, team)
    return fingerprint is not None and fingerprint == stored_fingerprint(records.layout.evaluation_state(team))


def report_warnings(data: dict[str, Any]) -> list[str]:
    """What a submission's report warns of, as pre-flight shows it: the convention check's findings (coordinates
    that score far better transformed) and the evaluator's warnings on its values (out of range, doubtful)."""
    evaluation = data.get("evaluation") or {}
    review = evaluation.get("review") or {}
    return [*(f"convention check: {line}" for line in review.get("conventions", [])),
            *(f"evaluator: {line}" for line in evaluation.get("warnings", []))]


def evaluation_warnings(layout: PhaseLayout, team: str) -> list[str]:
    """The warnings of the submission's last evaluation (`report_warnings`, kept in its evaluation state)."""
    try:
        warnings = json.loads(layout.evaluation_state(team).read_text()).get("warnings")
    except (OSError, ValueError, AttributeError):
        return []
    return [w for w in warnings if isinstance(w, str)] if isinstance(warnings, list) else []


def phase_definition(phase: dict[str, Any]) -> ChallengeDefinition:
    """The phase's challenge: its definition file (read again: InputError where it changed into something
    unreadable), else the built-in of its name."""
    return load_challenge(phase.get("definition") or phase["challenge"])


def evaluate(records: PhaseRecords, team: str) -> dict[str, Any]:
    """Score the submission (the built-in evaluator, or the definition's evaluation container) and write its report;
    returns the report."""
    layout, phase, submission = records.layout, records.phase, records.submission(team)
    definition = phase_definition(phase)
    algorithm = definition_spec(definition)
    sockets = {s.slug: s for s in (algorithm.input_socket, *algorithm.output_sockets)}
    files = {case["name"]: Path(case["file"]) for case in phase["cases"]}  # the review reads their headers
    jobs = [CaseJob(files[job["case"]], read_result(layout, job["job_id"], sockets)) for job in submission["jobs"]]
    boot = phase["bootstrap"]
    args = SimpleNamespace(challenge=definition.evaluation.builtin or phase["challenge"],
                           edition=phase["edition"] or definition.evaluation.edition,
                           ground_truth=Path(phase["ground_truth"]), bootstrap=boot["n"], bootstrap_seed=boot["seed"],
                           bootstrap_level=boot["level"], image=submission["image"],
                           model=Path(submission["model"]) if submission["model"] else None)
    eval_input = layout.evaluation_input(team)
    shutil.rmtree(eval_input, ignore_errors=True)
    shutil.rmtree(layout.submission(team) / REVIEW_FOLDER, ignore_errors=True)
    shutil.rmtree(layout.scoring_records(team), ignore_errors=True)
    shutil.rmtree(layout.submission(team) / CONTAINER_WORK, ignore_errors=True)
    (layout.submission(team) / "evaluation" / "metrics.json").unlink(missing_ok=True)
    if definition.evaluation.builtin:
        evaluation = score_jobs(args, jobs, eval_input, layout.submission(team) / "evaluation",
                                layout.scoring_records(team))
    else:
        image = evaluation_image(definition.evaluation, phase["engine"])
        evaluation = score_jobs_by_container(definition, image, jobs, args.ground_truth, eval_input,
                                             layout.submission(team) / "evaluation", phase["engine"])
    data = report(args, jobs, JobLimits(**submission["limits"]), [], evaluation)
    data["tool"] = f"{data['tool'].removesuffix(' preflight')} phase"
    data["team"] = team
    data["digest"] = submission["digest"]
    for entry, job in zip(data["jobs"], submission["jobs"]):
        state = records.state(job["job_id"]) or {}
        entry.update(job_id=job["job_id"], host=state.get("host"), **{k: state.get(k) for k in BACKEND_FIELDS})
        entry["notes"] = [*entry["notes"], *backend_notes(state)]
    write_json_atomic(layout.submission(team) / "report.json", data)
    write_text_atomic(layout.submission(team) / "report.html",
                      render_page(data, review_figures(layout.submission(team), evaluation)))
    return data


def copy_evaluation(records: PhaseRecords, source: str, team: str) -> dict[str, Any]:
    """The evaluation of `source` made `team`'s, where both have the same jobs (the same image and model, on one
    tag or several): its evaluation input, records, metrics.json and figures copied (not linked: an evaluator reads
    only files of their own), its report with `team`'s name, image and model; returns the report."""
    layout = records.layout
    for folder in (layout.evaluation_input, layout.scoring_records,
                   lambda name: layout.submission(name) / "evaluation",
                   lambda name: layout.submission(name) / REVIEW_FOLDER):
        shutil.rmtree(folder(team), ignore_errors=True)
        if folder(source).is_dir():
            shutil.copytree(folder(source), folder(team))
    data = json.loads((layout.submission(source) / "report.json").read_text())
    submission = records.submission(team)
    data.update(team=team, image=submission["image"], digest=submission["digest"],
                model=Path(submission["model"]).name if submission["model"] else None)
    write_json_atomic(layout.submission(team) / "report.json", data)
    write_text_atomic(layout.submission(team) / "report.html",
                      render_page(data, review_figures(layout.submission(team), data["evaluation"])))
    return data


def evaluate_team(records: PhaseRecords, team: str, scored: dict[str, str]) -> None:
    """One submission's evaluation, where it is not current: scored, or copied from the submission of `scored`
    (fingerprint -> a team this process found evaluated) with the same fingerprint; InputError where it is refused
    or some job has no result yet."""
    layout = records.layout
    refused = records.submission(team)["refused"]
    if refused:
        shutil.rmtree(layout.evaluation_input(team), ignore_errors=True)
        write_json_atomic(layout.evaluation_state(team), {"status": "refused", "error": refused, "fingerprint": None})
        raise InputError(f"submission {team}: refused before any job: {refused}")
    fingerprint = evaluation_fingerprint(records, team)
    if fingerprint is None:
        shutil.rmtree(layout.evaluation_input(team), ignore_errors=True)
        write_json_atomic(layout.evaluation_state(team), {"status": "incomplete", "fingerprint": None})
        raise InputError(f"submission {team}: some jobs have no result yet; `medchallenge phase run` runs them")
    if fingerprint == stored_fingerprint(layout.evaluation_state(team)):
        log.info("submission %s: evaluation current", team)
        scored.setdefault(fingerprint, team)
        return
    layout.evaluation_state(team).unlink(missing_ok=True)
    source = scored.get(fingerprint)
    data = copy_evaluation(records, source, team) if source else evaluate(records, team)
    error = data["evaluation"]["error"]
    write_json_atomic(layout.evaluation_state(team), {"status": "failed" if error else "evaluated", "error": error,
                                                      "warnings": report_warnings(data), "fingerprint": fingerprint})
    scored.setdefault(fingerprint, team)
    log.info("submission %s: %d/%d jobs succeeded%s%s", team, data["summary"]["num_succeeded"],
             data["summary"]["num_jobs"], f"; the evaluator refused them: {error}" if error else "",
             f" (the evaluation of {source}, whose jobs are the same)" if source else "")


def main(argv: list[str] | None = None) -> int:
    """Evaluate each named submission (the submissions with the same jobs scored once); exit status 1 where one of
    them could not be (one `error:` line each, the others evaluated)."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        print("usage: python -m medchallenge.phase.evaluate OUT TEAM [TEAM ...]", file=sys.stderr)
        return 2
    setup_logging()
    records = PhaseRecords(PhaseLayout.of(Path(argv[0])))
    scored: dict[str, str] = {}
    status = 0
    for team in argv[1:]:
        status = max(status, report_errors(evaluate_team)(records, team, scored) or 0)
    return status


if __name__ == "__main__":
    sys.exit(main())
