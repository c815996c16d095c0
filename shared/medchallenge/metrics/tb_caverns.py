"""ImageCLEF 2022 TB caverns detection: the official mAP over IoU 0.40-0.75, quirks included.

Spec: docs/metrics/tb-caverns-2022.md (official `evaluator.py`, SergeKo/clef2022-caverns-detection-metric @992723d).
Boxes are 6 integers (x1, y1, z1, x2, y2, z2).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Box = Sequence[int]

# §3: the literal list; generated values (np.arange, 0.4 + 0.05 * i) differ in the last bit and flip `>=`.
IOU_THRESHOLDS: tuple[float, ...] = (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75)


def box_iou(a: Box, b: Box) -> float:
    """§2: continuous IoU without +1; touching, flat or reversed boxes give 0."""
    xi1, yi1, zi1 = max(a[0], b[0]), max(a[1], b[1]), max(a[2], b[2])
    xi2, yi2, zi2 = min(a[3], b[3]), min(a[4], b[4]), min(a[5], b[5])
    if xi2 <= xi1 or yi2 <= yi1 or zi2 <= zi1:
        return 0.0
    inter = (xi2 - xi1) * (yi2 - yi1) * (zi2 - zi1)
    vol_a = (a[3] - a[0]) * (a[4] - a[1]) * (a[5] - a[2])
    vol_b = (b[3] - b[0]) * (b[4] - b[1]) * (b[5] - b[2])
    return inter / (vol_a + vol_b - inter)


def match_counts(gt: Sequence[Box], pred: Sequence[Box], threshold: float) -> tuple[int, int, int]:
    """§3: greedy first-come matching in file order with `>=`; returns (tp, fp, fn).

    Each ground-truth box, in order, takes the first unused prediction (in order) whose IoU >= threshold.
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
    """§3: the case score: the per-threshold scores summed in order, divided by their count."""
    total = 0.0
    for score in scores:
        total += score
    return total / len(scores)


def mean_average_precision(gt_case_scores: Iterable[float], n_true_negative: int, n_all_ids: int) -> float:
    """§4: the official aggregate.

    `gt_case_scores`: the score of every case that has ground truth, in ground-truth file order (0 for those without
    predictions, and including ground-truth ids missing from the id list); `n_true_negative`: ids of the id list with
    neither ground truth nor predictions (each adds 1); divided by the number of distinct ids in the id list.
    """
    if n_all_ids == 0:
        raise ValueError("the id list is empty (the official code divides by zero)")
    total = 0
    for score in gt_case_scores:
        total += score
    for _ in range(n_true_negative):
        total += 1
    return total / n_all_ids


def case_counts(gt_boxes: Sequence[Box], pred_boxes: Sequence[Box],
                thresholds: Sequence[float] = IOU_THRESHOLDS) -> tuple[str, list[tuple[int, int, int]]]:
    """§4 for one case: the rule that applies and (tp, fp, fn) at each threshold."""
    if gt_boxes and pred_boxes:
        return "matched", [match_counts(gt_boxes, pred_boxes, t) for t in thresholds]
    if gt_boxes:
        return "ground truth without predictions scores 0", [(0, 0, len(gt_boxes))] * len(thresholds)
    if pred_boxes:
        return "no ground truth but predictions scores 0", [(0, len(pred_boxes), 0)] * len(thresholds)
    return "no ground truth and no predictions scores 1", [(0, 0, 0)] * len(thresholds)


def threshold_score(tp: int, fp: int, fn: int) -> float:
    """§3: a case's score at one threshold, tp / (tp + fp + fn); 1 where all are 0."""
    return tp / (tp + fp + fn) if tp + fp + fn else 1.0


def case_order(gt_ids: Sequence[str], all_ids: Sequence[str]) -> list[str]:
    """Every case that is scored: ground-truth ids in file order (§4 sums them in that order), then the id list."""
    seen = set(gt_ids)
    return list(gt_ids) + [i for i in all_ids if i not in seen]
