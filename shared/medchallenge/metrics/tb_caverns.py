"""ImageCLEF 2022 TB caverns detection: the official mAP over IoU 0.40-0.75, quirks included.

Spec: docs/metrics/tb-caverns-2022.md (official `evaluator.py`, SergeKo/clef2022-caverns-detection-metric @992723d).
Boxes are 6 integers (x1, y1, z1, x2, y2, z2).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

Box = Sequence[int]

# §3.1: the literal list; generated values (np.arange, 0.4 + 0.05 * i) differ in the last bit and flip `>=`.
IOU_THRESHOLDS: tuple[float, ...] = (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75)


def box_iou(a: Box, b: Box) -> float:
    """§2: continuous IoU without +1; touching, flat or reversed boxes give 0.

    Args:
        a: a box (x1, y1, z1, x2, y2, z2) in voxel coordinates.
        b: another box.

    Returns:
        intersection / (volume(a) + volume(b) - intersection), Python's true division; 0.0 when the intersection is
        empty in any axis.
    """
    xi1, yi1, zi1 = max(a[0], b[0]), max(a[1], b[1]), max(a[2], b[2])
    xi2, yi2, zi2 = min(a[3], b[3]), min(a[4], b[4]), min(a[5], b[5])
    if xi2 <= xi1 or yi2 <= yi1 or zi2 <= zi1:
        return 0.0
    inter = (xi2 - xi1) * (yi2 - yi1) * (zi2 - zi1)
    vol_a = (a[3] - a[0]) * (a[4] - a[1]) * (a[5] - a[2])
    vol_b = (b[3] - b[0]) * (b[4] - b[1]) * (b[5] - b[2])
    return inter / (vol_a + vol_b - inter)


def match_counts(gt: Sequence[Box], pred: Sequence[Box], threshold: float) -> tuple[int, int, int]:
    """§3.2: greedy first-come matching in file order with `>=`.

    Each ground-truth box, in order, takes the first unused prediction (in order) whose IoU >= threshold.

    Args:
        gt: the case's ground-truth boxes in file order.
        pred: the case's predicted boxes in file order.
        threshold: one of the IoU thresholds (§3.1).

    Returns:
        (tp, fp, fn): matched ground-truth boxes, unmatched predictions, unmatched ground-truth boxes.
    """
    matched_pred: set[int] = set()
    tp = fn = 0
    for g in gt:
        for j, p in enumerate(pred):
            if j not in matched_pred and box_iou(g, p) >= threshold:
                matched_pred.add(j)
                tp += 1
                break
        else:
            fn += 1
    return tp, len(pred) - len(matched_pred), fn


def sequential_mean(scores: Sequence[float]) -> float:
    """§3.3: the case score: the per-threshold scores summed in order, divided by their count."""
    total = 0.0
    for score in scores:
        total += score
    return total / len(scores)


def mean_average_precision(gt_case_scores: Iterable[float], n_true_negative: int, n_all_ids: int) -> float:
    """§4: the official aggregate.

    `gt_case_scores`: the score of every case that has ground truth, in ground-truth file order (0 for those without
    predictions, and including ground-truth ids missing from the id list); `n_true_negative`: ids of the id list with
    neither ground truth nor predictions (each adds 1); divided by the number of distinct ids in the id list.

    Args:
        gt_case_scores: case scores of the ground-truth cases, summed in this order.
        n_true_negative: the number of cases that add 1.
        n_all_ids: the size of the id list (the denominator).

    Returns:
        The aggregate; it can exceed 1 when ground-truth ids are missing from the id list.

    Raises:
        ValueError: the id list is empty (the official code divides by zero).
    """
    if n_all_ids == 0:
        raise ValueError("the id list is empty (the official code divides by zero)")
    total = 0
    for score in gt_case_scores:
        total += score
    for _ in range(n_true_negative):
        total += 1
    return total / n_all_ids


def case_record(gt_boxes: Sequence[Box], pred_boxes: Sequence[Box], *, in_all_ids: bool, has_ground_truth: bool,
                thresholds: Sequence[float] = IOU_THRESHOLDS) -> dict:
    """Stage 1 for one case: counts and score at each threshold, the case score, and the §4 rule that applied.

    Args:
        gt_boxes: the case's ground-truth boxes (empty: no cavern).
        pred_boxes: the case's predicted boxes (empty: absent from the run).
        in_all_ids: whether the case is in the id list (only such cases can add 1).
        has_ground_truth: whether the case has ground-truth rows.
        thresholds: the IoU thresholds (§3.1).

    Returns:
        A JSON-serialisable record: `n_gt`, `n_pred`, `rule`, `per_threshold` (tp, fp, fn, score) and `case_score`.
        Per threshold the score is tp / (tp + fp + fn), or 1.0 for a case with neither boxes nor predictions.
    """
    record = {"in_all_ids": in_all_ids, "has_ground_truth": has_ground_truth,
              "n_gt": len(gt_boxes), "n_pred": len(pred_boxes)}
    if gt_boxes and pred_boxes:
        counts = [match_counts(gt_boxes, pred_boxes, t) for t in thresholds]
        record["rule"] = "matched"
    elif gt_boxes:
        counts = [(0, 0, len(gt_boxes))] * len(thresholds)
        record["rule"] = "ground truth without predictions scores 0"
    elif pred_boxes:
        counts = [(0, len(pred_boxes), 0)] * len(thresholds)
        record["rule"] = "no ground truth but predictions scores 0"
    else:
        counts = [(0, 0, 0)] * len(thresholds)
        record["rule"] = "no ground truth and no predictions scores 1"
    record["per_threshold"] = [
        {"tp": tp, "fp": fp, "fn": fn, "score": tp / (tp + fp + fn) if tp + fp + fn else 1.0} for tp, fp, fn in counts
    ]
    record["case_score"] = sequential_mean([item["score"] for item in record["per_threshold"]])
    return record


def case_order(gt_ids: Sequence[str], all_ids: Sequence[str]) -> list[str]:
    """Every case that is scored: ground-truth ids in file order (§4 sums them in that order), then the id list."""
    seen = set(gt_ids)
    return list(gt_ids) + [i for i in all_ids if i not in seen]


def aggregate(records: Mapping[str, dict], n_all_ids: int, thresholds: Sequence[float] = IOU_THRESHOLDS) -> dict:
    """Stage 2: `map` (§4, summed exactly as the official code) and the same aggregate at each threshold.

    Args:
        records: `case_record` results by case id, in `case_order`.
        n_all_ids: the size of the id list.
        thresholds: the IoU thresholds (§3.1).

    Returns:
        `{"map": ..., "ap_at_iou_0.40": ..., ..., "ap_at_iou_0.75": ...}`.
    """
    gt_ids = [i for i, r in records.items() if r["has_ground_truth"]]
    n_tn = sum(1 for r in records.values()
               if r["in_all_ids"] and not r["has_ground_truth"] and r["n_pred"] == 0)
    result = {"map": mean_average_precision((records[i]["case_score"] for i in gt_ids), n_tn, n_all_ids)}
    for k, t in enumerate(thresholds):
        per_t = (records[i]["per_threshold"][k]["score"] for i in gt_ids)
        result[f"ap_at_iou_{t:.2f}"] = mean_average_precision(per_t, n_tn, n_all_ids)
    return result
