"""RibFrac 2020 evaluator: the official FROC detection score, classification F1s and Dice/IoU, number for number.

Inputs (docs/metrics/ribfrac.md §1):
  ground truth  `<pid>-label.nii.gz` instance masks + one CSV `public_id,label_id,label_code`
  predictions   `<pid>.nii.gz` instance masks + one CSV `public_id,label_id,confidence,label_code` (official), or
                grand-challenge's `predictions.json` with, per job, an instance image in
                `images/rib-fracture-instances` and `rib-fracture-detections.json`.
Stage 1 turns each case into a JSON record (overlaps, IoUs, detection rows, confusion matrix, voxel sums), in
parallel; stage 2 aggregates the records into metrics.json, froc.png and confusion_matrix.png.
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import numpy as np

from ..contract import GC_LAYOUT, match_jobs, name_list, read_json_file, read_predictions_json
from ..errors import InputError, note_or_refuse
from ..evaluation import CaseRecord, Cases, Evaluator, Summary, resampled_ids
from ..formats import ribfrac as formats
from ..metrics import ribfrac as metrics
from ..sockets import CT_IMAGE, RIB_FRACTURE_DETECTIONS, RIB_FRACTURE_INSTANCES

DETECTIONS = RIB_FRACTURE_DETECTIONS.slug
BRANCHES = ("master", "legacy")
KEY_NAMES = ("recall_at_fp_0.5", "recall_at_fp_1", "recall_at_fp_2", "recall_at_fp_4", "recall_at_fp_8")
LEGACY_KEYS = ("froc_average", *KEY_NAMES, "macro_f1")


@dataclass(frozen=True)
class CaseSource:
    """Where one case's data is: both masks and the case's CSV/JSON rows (and where those rows came from).
    `pred_volume` None: no prediction (a GC case without a job), scored as an empty prediction volume."""

    gt_volume: Path
    pred_volume: Path | None
    gt_rows: tuple[formats.GTRow, ...]
    pred_rows: tuple[formats.PredRow, ...]
    pred_rows_source: str
    gt_rows_source: str = ""
    gt_label_kind: str = "int64"  # pandas' dtype of each CSV's label_id column (§1.4; GC detections: integers)
    pred_label_kind: str = "int64"
    gt_missing: str | None = None  # a column the official code reads for this case but the CSV lacks (CsvTable)
    pred_missing: str | None = None


class Detection(TypedDict):
    """One row of the official `pred_metrics` (§2) with the prediction's voxels and its overlap with the hit."""

    pred_label: int
    max_iou: float
    hit_label: int
    prob: float | None
    pred_class: str
    gt_class: str
    voxels: int
    overlap_voxels: int


class GroundTruthObject(TypedDict):
    label_id: int
    voxels: int
    max_iou: float
    hit: bool


@dataclass
class CaseMatch(CaseRecord):
    """Stage 1 for one case: detection rows (§2), ground-truth objects, confusion matrix (§4), voxel sums (§6)."""

    num_gt: int
    num_pred: int
    detections: list[Detection]
    ground_truth: list[GroundTruthObject]
    confusion_matrix: list[list[int]]
    inter: int
    union: int
    y_true: int
    y_pred: int


@dataclass(kw_only=True)
class VolumeCases(Cases):
    sources: dict[str, CaseSource]
    branch: str
    tie_order: str

    def options(self) -> dict[str, str]:
        return {"branch": self.branch, "tie_order": self.tie_order}


def case_rows(source: CaseSource, match: metrics.InstanceMatch, case_id: str) -> tuple[list[dict], np.ndarray]:
    """§2.3, §4 for one case from its matching and its rows: the detection rows and the confusion matrix; one error
    line where the official code fails on what it reads of them (§7)."""
    if match.num_pred and source.pred_missing:
        raise InputError(f"{source.pred_missing}; case {case_id} has one")
    if match.num_pred and source.gt_missing and (match.num_gt or source.gt_rows):
        raise InputError(f"{source.gt_missing}; case {case_id} is one")
    try:
        rows = metrics.detection_rows(match, source.gt_rows, source.pred_rows, source.gt_label_kind,
                                      source.pred_label_kind)
        return rows, metrics.confusion_matrix(rows, source.gt_rows)
    except metrics.MissingPredictionRow as exc:
        raise InputError(f"{source.pred_rows_source}: case {case_id}: {exc}") from None
    except metrics.UnmergeableLabels as exc:
        where = source.gt_rows_source if exc.side == "ground-truth" else source.pred_rows_source
        raise InputError(f"{where}: case {case_id}: {exc}") from None
    except metrics.UnreadableRow as exc:
        raise InputError(f"{exc.row.where}: case {case_id}: {exc}") from None


def evaluate_case(sources: dict[str, CaseSource], case_id: str) -> CaseMatch:
    """Stage 1 for one case: a typed record (§2 matching, §4 confusion matrix, §6 voxel sums)."""
    source = sources[case_id]
    gt = formats.read_label_volume(source.gt_volume)
    pred = np.zeros_like(gt) if source.pred_volume is None else formats.read_label_volume(source.pred_volume)
    if gt.shape != pred.shape:
        raise InputError(f"case {case_id}: prediction {source.pred_volume.name} has shape {pred.shape}, ground truth "
                         f"{source.gt_volume.name} has {gt.shape} (the official code fails an assert)")
    match = metrics.match_instances(gt, pred)
    del gt, pred
    rows, matrix = case_rows(source, match, case_id)
    gt_max_iou = match.iou.max(axis=1) if match.num_pred else np.zeros(match.num_gt)
    hit_labels = {row["hit_label"] for row in rows}
    return CaseMatch(
        num_gt=match.num_gt,
        num_pred=match.num_pred,
        detections=[
            Detection(**row, voxels=int(match.pred_voxels[row["pred_label"] - 1]),
                      overlap_voxels=int(match.overlap[row["hit_label"], row["pred_label"]]) if row["hit_label"]
                      else 0)
            for row in rows
        ],
        ground_truth=[
            GroundTruthObject(label_id=label, voxels=int(match.gt_voxels[label - 1]),
                              max_iou=float(gt_max_iou[label - 1]), hit=label in hit_labels)
            for label in range(1, match.num_gt + 1)
        ],
        confusion_matrix=matrix.tolist(),
        inter=match.inter, union=match.union, y_true=match.y_true, y_pred=match.y_pred,
    )


NUM_THRESHOLDS = len(metrics.THRESHOLDS)
MATRIX_SHAPE = (len(metrics.MATRIX_ROWS), len(metrics.MATRIX_COLUMNS))


def case_statistics(record: CaseMatch) -> np.ndarray:
    """What stage 2 sums over cases, as one int64 vector: FP and TP counts per threshold (§3.1), num_gt, the
    confusion matrix (§4) and the voxel sums (§6). Every aggregate is a function of their sum and the case count."""
    fp, tp = metrics.case_froc_counts(record.detections)
    return np.concatenate([fp, tp, [record.num_gt], np.asarray(record.confusion_matrix, dtype=np.int64).ravel(),
                           [record.inter, record.union, record.y_true, record.y_pred]]).astype(np.int64)


@dataclass
class Totals:
    """Stage 2 from the summed case statistics: the aggregates and what details and figures show."""

    aggregates: dict[str, float]
    fp: np.ndarray
    recall: np.ndarray
    key_recall: list[float]
    matrix: np.ndarray


def aggregate_totals(total: np.ndarray, num_cases: int, tie_order: str, branch: str) -> Totals:
    """The aggregates (§3 FROC, §5 F1s, §6 Dice/IoU) from the sum of `case_statistics` over `num_cases` cases."""
    t = NUM_THRESHOLDS
    matrix_end = 2 * t + 1 + MATRIX_SHAPE[0] * MATRIX_SHAPE[1]
    fp, recall = metrics.froc_rates(total[:t], total[t:2 * t], int(total[2 * t]), num_cases)
    key_recall = metrics.key_recalls(fp, recall, metrics.KEY_FPS, tie_order)
    matrix = total[2 * t + 1:matrix_end].reshape(MATRIX_SHAPE)
    aggregates = {
        "froc_average": float(np.mean(key_recall)),
        **dict(zip(KEY_NAMES, key_recall)),
        "max_recall": float(recall.max()),
        "average_fp_at_max_recall": float(fp.max()),
        **metrics.f1_scores(matrix),
        **metrics.segmentation_scores(*total[matrix_end:].tolist()),
    }
    if branch == "legacy":
        aggregates = {key: aggregates[key] for key in LEGACY_KEYS}
    return Totals(aggregates, fp, recall, key_recall, matrix)


def _statistics(records: dict[str, CaseMatch]) -> np.ndarray:
    size = 2 * NUM_THRESHOLDS + 1 + MATRIX_SHAPE[0] * MATRIX_SHAPE[1] + 4
    return np.array([case_statistics(r) for r in records.values()], dtype=np.int64).reshape(-1, size)


def aggregate(cases: VolumeCases, records: dict[str, CaseMatch]) -> Summary:
    """Stage 2: aggregates and details from all case records (§3 FROC, §5 F1s, §6 Dice/IoU)."""
    totals = aggregate_totals(_statistics(records).sum(axis=0), len(records), cases.tie_order, cases.branch)
    details = {
        "num_cases": len(records),
        "froc": {"thresholds": metrics.THRESHOLDS.tolist(), "fp": totals.fp.tolist(),
                 "recall": totals.recall.tolist(), "key_fps": list(metrics.KEY_FPS), "key_recall": totals.key_recall},
        "confusion_matrix": {"rows": list(metrics.MATRIX_ROWS), "columns": list(metrics.MATRIX_COLUMNS),
                             "data": totals.matrix.tolist()},
    }
    return Summary(aggregates=totals.aggregates, details=details)


def resample(cases: VolumeCases, records: dict[str, CaseMatch],
             draw: np.ndarray) -> tuple[VolumeCases, dict[str, CaseMatch]]:
    """The bootstrap's unit is a CT (a case): the drawn records, re-keyed (the aggregate reads nothing else)."""
    return cases, {new: records[old] for new, old in resampled_ids(cases.ids, draw)}


def fast_bootstrap(cases: VolumeCases, records: dict[str, CaseMatch], draws: np.ndarray) -> dict[str, np.ndarray]:
    """Every resample's aggregates at once: the summed statistics of each resample are one matrix product of the
    draw counts with the per-case statistics (integers, so exactly the sums the aggregate forms)."""
    statistics = _statistics({case_id: records[case_id] for case_id in cases.ids})
    num_resamples, num_cases = draws.shape
    counts = np.bincount((draws + num_cases * np.arange(num_resamples)[:, None]).ravel(),
                         minlength=num_resamples * num_cases).reshape(num_resamples, num_cases)
    totals = counts @ statistics
    values: dict[str, np.ndarray] = {}
    for row, total in enumerate(totals):
        for key, value in aggregate_totals(total, num_cases, cases.tie_order, cases.branch).aggregates.items():
            values.setdefault(key, np.empty(num_resamples))[row] = value
    return values


def _check_same_cases(gt_ids: list[str], pred_ids: list[str], where: str) -> None:
    """§1.1: both sides must hold the same cases in the same order of their sorted file names (the official code
    fails an assert)."""
    missing = sorted(set(gt_ids) - set(pred_ids))
    extra = sorted(set(pred_ids) - set(gt_ids))
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {len(missing)} case(s): {', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}")
        if extra:
            parts.append(f"{len(extra)} case(s) not in the ground truth: {', '.join(extra[:10])}"
                         f"{' ...' if len(extra) > 10 else ''}")
        raise InputError(f"{where}: expected {len(gt_ids)} cases; " + "; ".join(parts))
    if len(gt_ids) != len(pred_ids):  # the same ids, one of them named by more volumes on one side
        gt_counts, pred_counts = Counter(gt_ids), Counter(pred_ids)
        differ = [f"{case_id} ({pred_counts[case_id]} here, {count} in the ground truth)"
                  for case_id, count in gt_counts.items() if pred_counts[case_id] != count]
        raise InputError(f"{where}: {len(pred_ids)} volumes where the ground truth has {len(gt_ids)} (case ids named "
                         f"by another number of volumes: {name_list(differ)}): the official code fails its assert "
                         "that the counts are equal")
    if gt_ids != pred_ids:  # each folder's ids in the order of its sorted file names (`RibFrac1-label.nii.gz` and
        # `RibFrac1-rescan-label.nii.gz` sort one way, `RibFrac1.nii.gz` and `RibFrac1-rescan.nii.gz` the other)
        first = next(k for k, (a, b) in enumerate(zip(gt_ids, pred_ids)) if a != b)
        raise InputError(f"{where}: the case ids in the order of the sorted file names differ from the ground "
                         f"truth's (position {first + 1}: {pred_ids[first]} where the ground truth has "
                         f"{gt_ids[first]}): the official code fails its assert that the sorted lists are equal; "
                         "rename the files so that both folders sort alike")


def _case_keys(gt_files: list[tuple[str, Path]], pred_files: list[tuple[str, Path]]) -> list[str]:
    """Each pair's key (§1.1, §7): its case id, or where one id names several pairs, `<id>/<prediction file name>`
    (no case id holds a `/`, no two prediction files share a name: the keys are unique)."""
    counts = Counter(case_id for case_id, _ in gt_files)
    return [case_id if counts[case_id] == 1 else f"{case_id}/{pred.name}"
            for (case_id, _), (_, pred) in zip(gt_files, pred_files)]


def _repeated_id_notes(gt_files: list[tuple[str, Path]], pred_files: list[tuple[str, Path]],
                       strict: bool) -> list[str]:
    """Case ids named by several volumes in both folders alike (§7: `RibFrac1.nii` and `RibFrac1.nii.gz`): the
    official code pairs the sorted lists by position and scores each pair as a case with all the id's CSV rows."""
    counts = Counter(case_id for case_id, _ in gt_files)
    pairs = [f"{gt.name} with {pred.name}" for (case_id, gt), (_, pred) in zip(gt_files, pred_files)
             if counts[case_id] > 1]
    if not pairs:
        return []
    repeated = [case_id for case_id, count in counts.items() if count > 1]
    message = (f"{len(repeated)} case id(s) named by several volumes in both folders ({name_list(repeated)}; "
               f"paired by position in the sorted file lists: {name_list(pairs)})")
    return note_or_refuse(message, strict, "each pair scored as a case of its own, keyed '<case id>/<prediction "
                          "file>', with all the CSV rows of its id and counted in the number of cases, as the "
                          "official code does")


def _gc_detections(job, where: str) -> list[formats.PredRow]:
    socket = job.output(DETECTIONS)
    if socket.path.is_file():
        return formats.parse_detections(read_json_file(socket.path), str(socket.path))
    if socket.value is not None:
        return formats.parse_detections(socket.value, f"{where}: job {job.pk} {DETECTIONS}")
    raise InputError(f"{socket.path}: not found (job {job.pk}, output '{DETECTIONS}')")


def _unused_rows_notes(table: formats.CsvTable, case_ids: list[str], path: Path, strict: bool,
                       what: str) -> list[str]:
    """CSV rows whose public_id is no case (compared exactly), or blank or NA: the official code selects rows by
    public_id and never reads them."""
    known = set(case_ids)
    unused = [public_id for public_id in table.rows if public_id not in known]
    if not unused and not table.unnamed_rows:
        return []
    unnamed = (f" and {table.unnamed_rows} row(s) whose public_id no case id can equal (blank, NA, a bool or, in the "
               "ground truth, a number for pandas)" if table.unnamed_rows else "")
    message = (f"{path}: {sum(len(table.rows[i]) for i in unused)} row(s) for {len(unused)} public_id(s) that are "
               f"not cases ({name_list([repr(i) for i in unused])}){unnamed}")
    return note_or_refuse(message, strict, f"ignored, as the official code does ({what})")


def _official_failure_notes(table: formats.CsvTable, strict: bool) -> list[str]:
    """What makes the official code fail although the intent is plain (§7): header names written with spaces,
    public_ids pandas reads as numbers; scored as the names and ids read as text, or refused with --strict."""
    return [note for failure, scored_as in table.official_failures
            for note in note_or_refuse(failure, strict, scored_as)]


def collect_sources(input_dir: Path, gt_dir: Path,
                    strict: bool = False) -> tuple[list[str], dict[str, CaseSource], str, list[str]]:
    """Case keys in the order of the sorted file names (the case ids, §1.1; `<id>/<prediction file>` for an id of
    several pairs, §7), each case's source, the layout found ("files" or GC_LAYOUT), and notes."""
    gt_files = formats.list_volume_files(gt_dir)
    gt_csv_path = formats.find_csv(gt_dir)
    gt_table = formats.read_gt_csv(gt_csv_path)
    gt_csv = gt_table.rows
    if not gt_files:
        raise InputError(f"{gt_dir}: no ground-truth volumes (*-label.nii.gz)")
    gt_ids = [case_id for case_id, _ in gt_files]
    notes = _unused_rows_notes(gt_table, gt_ids, gt_csv_path, False, "ground truth")
    notes += _official_failure_notes(gt_table, strict)
    jobs = read_predictions_json(input_dir)
    sources: dict[str, CaseSource] = {}
    pred_text_code = None
    if jobs is None:
        layout = "files"
        pred_files = formats.list_volume_files(input_dir)
        pred_csv_path = formats.find_csv(input_dir)
        pred_table = formats.read_pred_csv(pred_csv_path)
        pred_csv, pred_text_code = pred_table.rows, pred_table.text_code
        _check_same_cases(gt_ids, [case_id for case_id, _ in pred_files], str(input_dir))
        notes += _repeated_id_notes(gt_files, pred_files, strict)
        notes += _unused_rows_notes(pred_table, gt_ids, pred_csv_path, strict, "predictions")
        notes += _official_failure_notes(pred_table, strict)
        case_ids = _case_keys(gt_files, pred_files)
        for key, (case_id, gt_volume), (_, pred_volume) in zip(case_ids, gt_files, pred_files):
            sources[key] = CaseSource(gt_volume, pred_volume, tuple(gt_csv.get(case_id, ())),
                                      tuple(pred_csv.get(case_id, ())), str(pred_csv_path), str(gt_csv_path),
                                      gt_table.label_id_kind, pred_table.label_id_kind, gt_table.missing,
                                      pred_table.missing)
    else:
        layout = GC_LAYOUT
        gt_volumes = formats.list_volumes(gt_dir)  # one volume per case id: no official code to follow here (§9)
        case_ids = list(gt_volumes)
        where = str(input_dir / "predictions.json")
        match = match_jobs(jobs, CT_IMAGE.slug, case_ids, strict=strict, key=formats.case_id_from_gc_image_name,
                           ground_truth=str(gt_dir))
        notes += match.missing_notes("scored as an empty prediction volume (every ground-truth fracture missed); "
                                     "the official code fails an assert when a prediction file is missing")
        for case_id in case_ids:
            job = match.jobs.get(case_id)
            gt_rows = tuple(gt_csv.get(case_id, ()))
            gt_side = {"gt_rows_source": str(gt_csv_path), "gt_label_kind": gt_table.label_id_kind,
                       "gt_missing": gt_table.missing}
            if job is None:
                sources[case_id] = CaseSource(gt_volumes[case_id], None, gt_rows, (), "no job", **gt_side)
                continue
            detections = _gc_detections(job, where)
            instances, detections_path = job.output(RIB_FRACTURE_INSTANCES.slug), job.output(DETECTIONS).path
            sources[case_id] = CaseSource(gt_volumes[case_id], instances.image_file(), gt_rows, tuple(detections),
                                          str(detections_path), **gt_side)
    notes += _non_finite_notes(sources, strict)
    notes += _non_finite_voxel_notes(sources, strict)
    notes += _nan_code_notes(sources, strict, gt_table.text_code, pred_text_code)
    notes += _text_confidence_notes(sources, strict)
    return case_ids, sources, layout, notes


def _nan_code_notes(sources: dict[str, CaseSource], strict: bool, gt_text: str | None,
                    pred_text: str | None) -> list[str]:
    """Rows of cases whose label_code the official `map(label_code_dict)` turns into NaN (§1). Whether the official
    code fails depends on whether it reads the row, which stage 1 decides per case (metrics.UnreadableRow)."""
    notes = []
    for side, text_cell, rule in (
        ("ground-truth", gt_text,
         "the official code reads such a row as the class of the predictions that hit its label ('FP', as for a "
         "label without a row; for the background row, label 0, the predictions that hit nothing: 'FP', as with "
         "code 0) and, where no prediction hits its label, for the FN count, where it fails (KeyError): scored so "
         "where read as a class, an error otherwise"),
        ("prediction", pred_text,
         "never read by the official code for a background row (label_id 0), a label above the maximum of the "
         "case's prediction mask, or a case whose prediction mask is empty: ignored there; a row of a label "
         "1..max is read and is an error (KeyError)"),
    ):
        rows = [row for source in sources.values()
                for row in (source.gt_rows if side == "ground-truth" else source.pred_rows) if row.label_code is None]
        if not rows:
            continue
        if strict:
            raise InputError(f"{rows[0].where}: label_code {rows[0].code_text!r} maps to NaN in the official code "
                             "(not one of -1..4); --strict refuses it")
        column = (f"; the column holds the text {text_cell!r}, so pandas reads every code of the file as text"
                  if text_cell is not None else "")
        listed = name_list([f"{row.where} ({row.code_text!r})" for row in rows])
        notes.append(f"{len(rows)} {side} row(s) with a label_code that maps to NaN (not one of -1..4{column}: "
                     f"{listed}): {rule}")
    return notes


def _text_confidence_notes(sources: dict[str, CaseSource], strict: bool) -> list[str]:
    """A confidence column with text that is no number: pandas reads every confidence of it as text, which the
    official FROC comparison fails on for every row it reads (stage 1 raises then)."""
    rows = [row for source in sources.values() for row in source.pred_rows if row.confidence_text is not None]
    if not rows:
        return []
    if strict:
        raise InputError(f"{rows[0].where}: the confidence column holds text that is no number; --strict refuses it")
    return [f"{len(rows)} prediction row(s) whose confidence pandas holds as text (the column holds text that is no "
            f"number; {name_list([row.where for row in rows])}): accepted because the official FROC compares none of "
            "them here (only rows of labels 1..max of a prediction mask are compared)"]


def _non_finite_notes(sources: dict[str, CaseSource], strict: bool) -> list[str]:
    """NaN or infinite confidences: pandas reads them and the official FROC compares them like any number."""
    counts = {case_id: formats.non_finite_confidences(source.pred_rows) for case_id, source in sources.items()}
    cases = [case_id for case_id, count in counts.items() if count]
    if not cases:
        return []
    message = (f"{sum(counts.values())} prediction row(s) with a NaN (blank, 'nan', 'NA', null) or infinite "
               f"confidence in {len(cases)} case(s) ({name_list(cases)})")
    return note_or_refuse(message, strict, "NaN and -inf are above no FROC threshold and +inf above every one, as "
                          "in the official code (pandas); the detection records show them as null and 1.0")


def _non_finite_voxel_notes(sources: dict[str, CaseSource], strict: bool) -> list[str]:
    """NaN or infinite voxels of NIfTI masks (floating-point ones, as nibabel writes a float array): the official
    code casts nibabel's values to uint8, which makes them 0; the project reads them as 0 too."""
    volumes = [path for source in sources.values() for path in (source.gt_volume, source.pred_volume)
               if path is not None and path.name.lower().endswith((".nii", ".nii.gz"))]
    counts = {path: formats.nifti_non_finite_labels(path) for path in volumes}
    bad = [path for path, count in counts.items() if count]
    if not bad:
        return []
    message = (f"{sum(counts.values())} NaN or infinite voxel(s) in {len(bad)} mask(s) "
               f"({name_list([p.name for p in bad])})")
    return note_or_refuse(message, strict, "read as label 0 (background), as the official code's uint8 cast of "
                          "nibabel's values reads them")


NOTES = [
    "IoU per prediction is the official connected-component IoU (§2): touching objects share one component.",
    "FROC points are sorted by fp with the tie order named in options.tie_order; numpy122 reproduces the "
    "official run (numpy 1.22 quicksort), whatever numpy is installed.",
    "Labels must be 0..255, every prediction mask label 1..max needs a row, a label code the official code reads "
    "must be -1..4 and a folder must hold exactly one CSV: where the official code crashes, wraps or picks "
    "arbitrarily, this evaluator stops with one error line instead.",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--branch", choices=BRANCHES, default=os.environ.get("RIBFRAC_BRANCH", "master"),
                        help="official code version: master (online evaluation, default: all metrics) or legacy "
                             "(MICCAI 2020 ranking: FROC and overall macro F1 only; same numbers); default "
                             "$RIBFRAC_BRANCH or master (baked into the ribfrac-legacy-evaluator image)")
    parser.add_argument("--tie-order", choices=metrics.TIE_ORDERS, default="numpy122",
                        help="order of FROC points with equal fp: numpy122 (official, default) or stable")


def read(args: argparse.Namespace) -> VolumeCases:
    """The cases (ground-truth volumes, sorted) with their masks and rows, and notes on what was accepted."""
    case_ids, sources, layout, notes = collect_sources(args.input, args.ground_truth, args.strict)
    return VolumeCases(ids=case_ids, sources=sources, layout=layout, notes=NOTES + notes, branch=args.branch,
                       tie_order=args.tie_order)


def write_figures(folder: Path, cases: VolumeCases, records: dict[str, CaseMatch], summary: Summary) -> None:
    """froc.png (sensitivity vs FP per scan, log x, key points) and confusion_matrix.png beside metrics.json."""
    from ..plots import plot_confusion_matrix, plot_froc

    froc = summary.details["froc"]
    # points with no false positive at all sit at fp = 1e-8/(n+1e-8): leave them off the log axis
    order = [i for i in np.lexsort((froc["recall"], froc["fp"])) if froc["fp"][i] > 1e-6]
    plot_froc(folder / "froc.png", [froc["fp"][i] for i in order], [froc["recall"][i] for i in order],
              froc["key_fps"], froc["key_recall"], title="RibFrac FROC (detection)", interpolation="linear")
    matrix = summary.details["confusion_matrix"]
    plot_confusion_matrix(folder / "confusion_matrix.png", matrix["data"], matrix["rows"], matrix["columns"],
                          title="RibFrac classification", xlabel="ground truth", ylabel="prediction")


EVALUATOR = Evaluator(
    challenge="ribfrac",
    description=__doc__,
    strict_help="refuse what the official code accepts but a careful submission would not have: prediction rows "
                "for unknown public_ids, NaN or infinite confidences, GC cases without a successful job, label "
                "codes outside -1..4, confidences held as text where the official code does not read them, CSV "
                "column names written with spaces, public_ids pandas reads as numbers and a case id named by several "
                "volumes in both folders",
    record=CaseMatch,
    read=read,
    evaluate_case=evaluate_case,
    aggregate=aggregate,
    add_arguments=add_arguments,
    write_figures=write_figures,
    figures=("froc.png", "confusion_matrix.png"),
    resample=resample,
    fast_bootstrap=fast_bootstrap,
    ranking=("froc_average", "macro_f1"),
)
main = EVALUATOR.main
