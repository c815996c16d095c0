"""ImageCLEF 2022 TB caverns detection evaluator: the official mAP@IoU[0.40:0.75], number for number.

Predictions: `submission.txt` (official run file) in the input folder, or GC's `predictions.json` layout (one job
per CT, output socket `tb-cavern-boxes`). Ground truth: `gt_boxes.csv` (official CSV with header) and `all_ids.csv`.
Spec: docs/metrics/tb-caverns-2022.md.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import numpy as np

from ..contract import GC_LAYOUT, match_jobs, read_predictions_json
from ..errors import InputError
from ..evaluation import CaseRecord, Cases, Evaluator, Summary, resampled_ids
from ..formats.tb_caverns import (
    Box, RunFile, byte_order_mark_warning, read_all_ids, read_box_json, read_gt_boxes, read_run_file,
)
from ..metrics.tb_caverns import (
    IOU_THRESHOLDS, case_counts, case_order, mean_average_precision, sequential_mean, threshold_score,
)
from ..sockets import CT_IMAGE, TB_CAVERN_BOXES

RUN_FILE = "submission.txt"
NOTES = ["IoU without +1; greedy first-come matching in file order with >=; literal thresholds",
         "a ground-truth id missing from all_ids.csv still adds its score (denominator unchanged)"]
EMPTY_SUBMISSION_NOTE = (
    "empty submission: the official code crashes here (AttributeError); scored as no predictions for every case "
    "(ground-truth cases 0, cases without ground truth 1)"
)


class ThresholdScore(TypedDict):
    tp: int
    fp: int
    fn: int
    score: float


@dataclass
class CaseScore(CaseRecord):
    """Stage 1 for one case: counts and score at each threshold, the case score, and the §4 rule that applied."""

    in_all_ids: bool
    has_ground_truth: bool
    num_gt: int
    num_pred: int
    rule: str
    per_threshold: list[ThresholdScore]
    case_score: float


@dataclass(frozen=True)
class Boxes:
    """Ground-truth and predicted boxes by case id, and the id list (what stage 1 reads)."""

    ground_truth: dict[str, list[Box]]
    predictions: dict[str, list[Box]]
    all_ids: frozenset[str]


@dataclass(kw_only=True)
class BoxCases(Cases):
    sources: Boxes


def read_predictions(input_dir: Path, gt: dict, all_ids: list[str], strict: bool) -> tuple[RunFile, str, list[str]]:
    """The run file or the GC layout in `input_dir`, which layout it was, and notes on missing GC jobs."""
    jobs = read_predictions_json(input_dir)
    if jobs is not None:
        match = match_jobs(jobs, CT_IMAGE.slug, case_order(list(gt), all_ids), strict=strict,
                           ground_truth="gt_boxes.csv/all_ids.csv")
        run = RunFile()
        for case_id, job in match.jobs.items():
            read_box_json(job.output(TB_CAVERN_BOXES.slug).path, case_id, None, strict, run)
        notes = match.missing_notes("scored as cases without boxes, as the official code scores a case absent from "
                                    "the run file (ground-truth cases 0, the others 1)")
        return run, GC_LAYOUT, notes
    path = input_dir / RUN_FILE
    if not path.is_file():
        candidates = sorted(p.name for p in input_dir.glob("*.txt")) + sorted(p.name for p in input_dir.glob("*.csv"))
        if len(candidates) != 1:
            raise InputError(f"{input_dir}: no {RUN_FILE} or predictions.json (found {candidates or 'nothing'})")
        path = input_dir / candidates[0]
    return read_run_file(path, set(all_ids) | set(gt), strict), f"run file {path.name}", []


def read(args: argparse.Namespace) -> BoxCases:
    """Ground truth, id list and predictions; every case of either list, ground-truth ids first (§4's order)."""
    gt = read_gt_boxes(args.ground_truth / "gt_boxes.csv")
    all_ids = read_all_ids(args.ground_truth / "all_ids.csv")
    run, layout, missing_notes = read_predictions(args.input, gt, all_ids, args.strict)
    bom_warnings = filter(None, (byte_order_mark_warning(p) for p in
                                 (args.ground_truth / "all_ids.csv", args.input / RUN_FILE)))
    return BoxCases(ids=case_order(list(gt), all_ids), sources=Boxes(gt, run.boxes, frozenset(all_ids)),
                    layout=layout, notes=NOTES + missing_notes, warnings=[*bom_warnings, *run.warnings])


def case_record(gt_boxes: Sequence[Box], pred_boxes: Sequence[Box], *, in_all_ids: bool, has_ground_truth: bool,
                thresholds: Sequence[float] = IOU_THRESHOLDS) -> CaseScore:
    """The per-case step on one case's boxes (§3, §4)."""
    rule, counts = case_counts(gt_boxes, pred_boxes, thresholds)
    per_threshold = [ThresholdScore(tp=tp, fp=fp, fn=fn, score=threshold_score(tp, fp, fn)) for tp, fp, fn in counts]
    return CaseScore(in_all_ids, has_ground_truth, len(gt_boxes), len(pred_boxes), rule, per_threshold,
                     sequential_mean([item["score"] for item in per_threshold]))


def evaluate_case(boxes: Boxes, case_id: str) -> CaseScore:
    """Stage 1 for one case."""
    return case_record(boxes.ground_truth.get(case_id, []), boxes.predictions.get(case_id, []),
                       in_all_ids=case_id in boxes.all_ids, has_ground_truth=case_id in boxes.ground_truth)


def aggregate_scores(records: Mapping[str, CaseScore], num_all_ids: int,
                     thresholds: Sequence[float] = IOU_THRESHOLDS) -> dict[str, float]:
    """Stage 2: `map` (§4, summed exactly as the official code) and the same aggregate at each threshold."""
    gt_ids = [i for i, r in records.items() if r.has_ground_truth]
    n_tn = sum(1 for r in records.values() if r.in_all_ids and not r.has_ground_truth and r.num_pred == 0)
    result = {"map": mean_average_precision((records[i].case_score for i in gt_ids), n_tn, num_all_ids)}
    for k, t in enumerate(thresholds):
        per_t = (records[i].per_threshold[k]["score"] for i in gt_ids)
        result[f"ap_at_iou_{t:.2f}"] = mean_average_precision(per_t, n_tn, num_all_ids)
    return result


def aggregate(cases: BoxCases, records: dict[str, CaseScore]) -> Summary:
    """Stage 2 with the id counts and the prediction ids that are no case."""
    boxes = cases.sources
    details = {
        "num_all_ids": len(boxes.all_ids),
        "num_cases_with_ground_truth": len(boxes.ground_truth),
        "iou_thresholds": list(IOU_THRESHOLDS),
        "ignored_prediction_ids": sorted(set(boxes.predictions) - set(boxes.ground_truth) - boxes.all_ids),
    }
    notes = [] if any(boxes.predictions.values()) else [EMPTY_SUBMISSION_NOTE]
    return Summary(aggregates=aggregate_scores(records, len(boxes.all_ids)), details=details, notes=notes)


def resample(cases: BoxCases, records: dict[str, CaseScore],
             draw: np.ndarray) -> tuple[BoxCases, dict[str, CaseScore]]:
    """The bootstrap's unit is a CT (an id of either list): the drawn cases re-keyed, with the id list, ground truth
    and predictions of the drawn ids, so that §4's denominator is the number of drawn ids of the id list."""
    boxes = cases.sources
    drawn = resampled_ids(cases.ids, draw)
    resampled = Boxes(ground_truth={new: boxes.ground_truth[old] for new, old in drawn if old in boxes.ground_truth},
                      predictions={new: boxes.predictions[old] for new, old in drawn if old in boxes.predictions},
                      all_ids=frozenset(new for new, old in drawn if old in boxes.all_ids))
    return (dataclasses.replace(cases, ids=[new for new, _ in drawn], sources=resampled),
            {new: records[old] for new, old in drawn})


def unit_scores(cases: BoxCases, records: dict[str, CaseScore], metric: str) -> dict[str, float] | None:
    """Per CT, what it adds to `map` (§4): its case score with ground truth, 1 or 0 without (no predictions or
    some)."""
    if metric != "map":
        return None
    return {case_id: record.case_score if record.has_ground_truth else float(record.num_pred == 0)
            for case_id, record in records.items()}


EVALUATOR = Evaluator(
    challenge="tb-caverns",
    description=__doc__,
    strict_help="fail on task-page rules the official metric did not check (corner order, unknown names) and, in "
                "the grand-challenge layout, on cases without a successful job",
    record=CaseScore,
    read=read,
    evaluate_case=evaluate_case,
    aggregate=aggregate,
    cheap_cases=True,
    resample=resample,
    ranking=("map",),
    unit_scores=unit_scores,
)
main = EVALUATOR.main
