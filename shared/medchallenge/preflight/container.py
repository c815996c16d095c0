"""Jobs scored by an organiser's evaluation container (a challenge defined by a file), as pre-flight and a phase's
evaluation score them: the evaluation input grand-challenge lays out, the container run through the one job runner
(evaluation.container.run_evaluation_container), its checked metrics.json kept, the leaderboard's columns read from
it, and the figures drawn from the sockets' kinds (worst cases first where the score column has per-case values)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..challenges.definition import ChallengeDefinition
from ..evaluation.container import evaluation_limits, run_evaluation_container
from ..grand_challenge.emulator import CaseJob, write_evaluation_input
from ..io import write_text_atomic
from ..leaderboard.case_values import per_case_values
from ..leaderboard.gc_ranking import number_at
from ..review import write_figures
from ..review.kinds import kind_review, worst_first

REVIEW_FOLDER = "review"  # the figures of the review (medchallenge.review), embedded in the report's page
CONTAINER_WORK = "evaluation-job"  # beside the evaluation folder: the container's job folder and ground truth


def column_values(definition: ChallengeDefinition, metrics: dict) -> dict[str, float]:
    """The leaderboard's columns that metrics.json holds as numbers, by title."""
    values = {}
    for column in definition.leaderboard.columns:
        value = number_at(metrics, column.path)
        if isinstance(value, float):
            values[column.title] = value
    return values


def case_order(definition: ChallengeDefinition, metrics: dict) -> tuple[list[str] | None, dict[str, str]]:
    """The cases worst first by the score column's per-case values, and each case's caption with its value, where
    the column declares them and metrics.json has them; else (None, {}): the cases drawn in their order."""
    score = definition.leaderboard.score
    found = per_case_values(metrics, score.case_path) if score.case_path is not None else "no per-case path"
    if isinstance(found, str):
        return None, {}
    captions = {case: f"{score.title} {value:.{score.decimal_places}f}" for case, value in found.values.items()}
    return worst_first(found.values, higher_is_better=score.order == "desc"), captions


def score_jobs_by_container(definition: ChallengeDefinition, image: str, jobs: Sequence[CaseJob],
                            ground_truth: Path, eval_input: Path, evaluation: Path,
                            engine: str = "docker") -> dict[str, Any]:
    """The jobs scored by the evaluation container `image` (a tag or image ID) on `ground_truth`: its input written
    to `eval_input`, its metrics.json to `evaluation`; the report's `evaluation` section."""
    write_evaluation_input([job.result for job in jobs], eval_input, 1_000_000 + 1_000 * len(jobs))
    failed = [job.case.name for job in jobs if not job.result.succeeded]
    result = run_evaluation_container(image, eval_input, ground_truth, evaluation.parent / CONTAINER_WORK,
                                      engine=engine, limits=evaluation_limits(definition.limits))
    section: dict[str, Any] = {"evaluator": "the challenge's evaluation container", "edition": None,
                               "scored_as_missing": failed, "error": result.error, "container": result.to_json()}
    if result.metrics is None:
        return section
    evaluation.mkdir(parents=True, exist_ok=True)
    write_text_atomic(evaluation / "metrics.json", json.dumps(result.metrics, indent=2, allow_nan=False))
    order, captions = case_order(definition, result.metrics)
    review = kind_review(jobs, definition.interface.inputs, definition.interface.outputs, order, captions)
    section["review"] = review.to_json(REVIEW_FOLDER)
    (evaluation.parent / REVIEW_FOLDER).mkdir(exist_ok=True)
    write_figures(evaluation.parent, section["review"]["figures"], review.figures)
    notes = list(result.notes)
    if failed:
        notes.insert(0, f"{len(failed)} failed job(s) left out of predictions.json, as grand-challenge leaves "
                        "them out: " + ", ".join(failed))
    cases = result.metrics.get("case")
    section.update(aggregates=column_values(definition, result.metrics), intervals={},
                   num_cases=len(cases) if isinstance(cases, (dict, list)) else len(jobs) - len(failed),
                   notes=notes, warnings=[], metrics="evaluation/metrics.json")
    return section
