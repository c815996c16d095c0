"""ImageCLEF 2022 TB caverns detection evaluator: the official mAP@IoU[0.40:0.75], number for number.

Predictions: `submission.txt` (official run file) in the input folder, or GC's `predictions.json` layout (one job
per CT, output socket `tb-cavern-boxes`). Ground truth: `gt_boxes.csv` (official CSV with header) and `all_ids.csv`.
"""

from __future__ import annotations

import argparse
import functools
import logging
from pathlib import Path

from .. import __version__
from ..contract import add_path_arguments, match_jobs, read_predictions_json
from ..errors import InputError, report_errors
from ..evaluation import add_evaluation_arguments, compute_records, input_fingerprint, parse_shard
from ..formats.tb_caverns import (
    RunFile, byte_order_mark_warning, read_all_ids, read_box_json, read_gt_boxes, read_run_file,
)
from ..io import write_metrics
from ..metrics.tb_caverns import IOU_THRESHOLDS, aggregate, case_order, case_record
from ..logs import setup_logging

log = logging.getLogger("medchallenge.tb_caverns")

RUN_FILE = "submission.txt"
INPUT_SOCKET = "ct-image"
OUTPUT_SOCKET = "tb-cavern-boxes"
EMPTY_SUBMISSION_NOTE = (
    "empty submission: the official code crashes here (AttributeError); scored as no predictions for every case "
    "(ground-truth cases 0, cases without ground truth 1)"
)


def read_predictions(input_dir: Path, gt: dict, all_ids: list[str], strict: bool) -> tuple[RunFile, str, list[str]]:
    """The run file or the GC layout in `input_dir`, which layout it was, and notes on missing GC jobs."""
    jobs = read_predictions_json(input_dir)
    if jobs is not None:
        match = match_jobs(jobs, INPUT_SOCKET, case_order(list(gt), all_ids), strict=strict,
                           ground_truth="gt_boxes.csv/all_ids.csv")
        run = RunFile()
        for case_id, job in match.jobs.items():
            read_box_json(job.output(OUTPUT_SOCKET).path, case_id, None, strict, run)
        notes = match.missing_notes("scored as cases without boxes, as the official code scores a case absent from "
                                    "the run file (ground-truth cases 0, the others 1)")
        return run, "grand-challenge predictions.json", notes
    path = input_dir / RUN_FILE
    if not path.is_file():
        candidates = sorted(p.name for p in input_dir.glob("*.txt")) + sorted(p.name for p in input_dir.glob("*.csv"))
        if len(candidates) != 1:
            raise InputError(f"{input_dir}: no {RUN_FILE} or predictions.json (found {candidates or 'nothing'})")
        path = input_dir / candidates[0]
    return read_run_file(path, set(all_ids) | set(gt), strict), f"run file {path.name}", []


def _case_record(gt: dict, pred: dict, all_ids: frozenset, case_id: str) -> dict:
    return case_record(gt.get(case_id, []), pred.get(case_id, []),
                       in_all_ids=case_id in all_ids, has_ground_truth=case_id in gt)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_path_arguments(parser, "input", "output", "ground_truth")
    parser.add_argument("--strict", action="store_true",
                        help="fail on task-page rules the official metric did not check (corner order, unknown "
                             "names) and, in the grand-challenge layout, on cases without a successful job")
    add_evaluation_arguments(parser)
    parser.set_defaults(workers=1)  # a case costs microseconds: processes would only add start-up time
    return parser


@report_errors
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging()
    gt = read_gt_boxes(args.ground_truth / "gt_boxes.csv")
    all_ids = read_all_ids(args.ground_truth / "all_ids.csv")
    run, layout, missing_notes = read_predictions(args.input, gt, all_ids, args.strict)
    run.warnings[:0] = filter(None, (byte_order_mark_warning(p) for p in
                                     (args.ground_truth / "all_ids.csv", args.input / RUN_FILE)))
    for warning in run.warnings:
        log.warning("warning: %s", warning)

    case_ids = case_order(list(gt), all_ids)
    per_case = functools.partial(_case_record, gt, run.boxes, frozenset(all_ids))
    records = compute_records(case_ids, per_case, workers=args.workers, records=args.records,
                              shard=parse_shard(args.shard, args.records), progress=not args.no_progress,
                              description="cases", fingerprint=input_fingerprint(args))
    if args.shard:
        log.info("shard %s: %d case records written to %s", args.shard, len(records), args.records)
        return 0

    notes = ["IoU without +1; greedy first-come matching in file order with >=; literal thresholds",
             "a ground-truth id missing from all_ids.csv still adds its score (denominator unchanged)",
             *missing_notes]
    if not any(run.boxes.values()):
        notes.append(EMPTY_SUBMISSION_NOTE)
    ignored = sorted(set(run.boxes) - set(gt) - set(all_ids))
    meta = {
        "challenge": "ImageCLEF 2022 Tuberculosis - Caverns Detection",
        "edition": 2022,
        "evaluator": "medchallenge.evaluators.tb_caverns",
        "evaluator_version": __version__,
        "predictions": layout,
        "n_all_ids": len(all_ids),
        "n_cases_with_ground_truth": len(gt),
        "iou_thresholds": list(IOU_THRESHOLDS),
        "ignored_prediction_ids": ignored,
        "warnings": run.warnings,
        "notes": notes,
    }
    metrics = write_metrics(args.output / "metrics.json", aggregate(records, len(all_ids)), records, meta)
    log.info("map = %.6f over %d ids -> %s", metrics["aggregates"]["map"], len(all_ids), args.output / "metrics.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
