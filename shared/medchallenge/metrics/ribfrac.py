"""RibFrac 2020 metrics as pure functions, number for number with the official evaluation.

Spec: docs/metrics/ribfrac.md (the rules of `M3DV/RibFrac-Challenge` `ribfrac/evaluation.py`, master afc4060 /
legacy b011e16); every function cites the section it implements.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# §1.3: label codes -> classes
LABEL_CODES = {0: "Background", 1: "Displaced", 2: "Nondisplaced", 3: "Buckle", 4: "Segmental", -1: "Ignore"}
# §4: rows = predicted class (+ FN), columns = ground-truth class (+ FP, Ignore)
MATRIX_ROWS = ("Buckle", "Displaced", "Nondisplaced", "Segmental", "FN")
MATRIX_COLUMNS = ("Buckle", "Displaced", "Nondisplaced", "Segmental", "FP", "Ignore")
# §3: the 100 thresholds exactly as numpy produces them, the hit criterion and the key FP levels
THRESHOLDS = np.arange(0, 1, 0.01)
HIT_IOU = 0.2
KEY_FPS = (0.5, 1, 2, 4, 8)
EPS = 1e-8
TIE_ORDERS = ("numpy122", "stable")


@dataclass
class InstanceMatch:
    """§2: the per-case quantities of `evaluate_single_prediction`.

    `iou[g-1, p-1]` is the official connected-component IoU (num_gt x num_pred); `max_iou`/`hit_label` per
    prediction label 1..num_pred; `gt_voxels`/`pred_voxels` per label; `overlap[g, p]` voxel counts of the joint
    label histogram (index 0 = background); `inter`, `union`, `y_true`, `y_pred` are the segmentation sums.
    """

    num_gt: int
    num_pred: int
    iou: np.ndarray
    max_iou: np.ndarray
    hit_label: np.ndarray
    gt_voxels: np.ndarray
    pred_voxels: np.ndarray
    overlap: np.ndarray
    inter: int
    union: int
    y_true: int
    y_pred: int


def _memory_view(volume: np.ndarray) -> tuple[np.ndarray, bool]:
    """A C-contiguous view of `volume` and whether its axes are reversed relative to `volume`."""
    if volume.flags.c_contiguous:
        return volume, False
    if volume.flags.f_contiguous:
        return volume.T, True
    return np.ascontiguousarray(volume), False


def match_instances(gt: np.ndarray, pred: np.ndarray) -> InstanceMatch:
    """§2.2: IoU by connected components of the overlap, as the official code computes it.

    `gt` and `pred` are uint8 instance-label volumes of equal shape in the official axis order (as nibabel
    returns them); "first voxel" means first in C order of these arrays, whatever their memory layout.
    Number of objects = max label (§1.2). For every 26-connected component R of (gt>0)&(pred>0), with anchor
    a = its first voxel: iou[gt[a]-1, pred[a]-1] = |R| / (|26-connected component of (gt>0)|(pred>0) at a| + 1e-8),
    later components (in anchor order = skimage's regionprops order) overwriting earlier ones. Per prediction
    j: max_iou = max_i iou[i, j], hit_label = first argmax + 1, or 0 where max_iou == 0. When either volume is
    empty no IoU is computed (§2.1 cases 1 and 2). Work is done on foreground voxels (joint bincount) and inside
    the foreground's bounding box (cc3d), never on float copies.

    Args:
        gt: ground-truth instance labels, uint8.
        pred: predicted instance labels, uint8, the same shape.

    Returns:
        The case's InstanceMatch (IoU matrix, max_iou and hit_label per prediction, voxel counts, segmentation sums).

    Raises:
        ValueError: the shapes differ, or a volume is not uint8.
    """
    if gt.shape != pred.shape:
        raise ValueError(f"shape mismatch: ground truth {gt.shape}, prediction {pred.shape}")
    if gt.dtype != np.uint8 or pred.dtype != np.uint8:
        raise ValueError("label volumes must be uint8 (the official code casts with astype(np.uint8))")
    gt_mem, reversed_axes = _memory_view(gt)
    pred_mem = pred.T if reversed_axes else pred
    if not pred_mem.flags.c_contiguous:
        pred_mem = np.ascontiguousarray(pred_mem)
    gt_flat, pred_flat = gt_mem.reshape(-1), pred_mem.reshape(-1)
    foreground = foreground_indices(gt_flat, pred_flat)
    g = gt_flat[foreground]
    p = pred_flat[foreground]
    num_gt = int(g.max()) if g.size else 0  # max over foreground = max(label) (§1.2)
    num_pred = int(p.max()) if p.size else 0
    overlap = np.bincount(g.astype(np.intp) * 256 + p, minlength=256 * 256).reshape(256, 256)
    overlap = overlap[: num_gt + 1, : num_pred + 1]
    iou = np.zeros((num_gt, num_pred))
    both = (g > 0) & (p > 0)
    inter = int(np.count_nonzero(both))
    match = InstanceMatch(
        num_gt=num_gt, num_pred=num_pred, iou=iou,
        max_iou=np.zeros(num_pred), hit_label=np.zeros(num_pred, dtype=np.int64),
        gt_voxels=overlap[1:, :].sum(axis=1), pred_voxels=overlap[:, 1:].sum(axis=0), overlap=overlap,
        inter=inter, union=int(foreground.size),
        y_true=int(overlap[1:, :].sum()), y_pred=int(overlap[:, 1:].sum()),
    )
    if num_gt == 0 or num_pred == 0 or inter == 0:
        return match

    shape = gt_mem.shape
    coords = np.stack(np.unravel_index(foreground, shape))
    # 26-connected components of gt>0 | pred>0 inside the foreground's bounding box, and their sizes
    union_at_fg = _components_in_box(coords)
    union_sizes = np.bincount(union_at_fg)
    # 26-connected components of the intersection inside its own (smaller) bounding box
    component = _components_in_box(coords[:, both])
    union_at_inter = union_at_fg[both]
    del coords

    # position of each intersection voxel in C order of the official (logical) array
    if reversed_axes:
        mem = np.unravel_index(foreground[both], shape)
        logical_key = np.ravel_multi_index(mem[::-1], shape[::-1])
    else:
        logical_key = foreground[both]
    by_key = np.argsort(logical_key, kind="stable")
    labels_in_key_order = component[by_key]
    component_ids, first = np.unique(labels_in_key_order, return_index=True)
    anchor = by_key[first]  # index (into the intersection voxels) of each component's first voxel
    area = np.bincount(component)[component_ids]
    anchor_key = logical_key[anchor]
    anchor_gt = g[both][anchor].astype(np.intp)
    anchor_pred = p[both][anchor].astype(np.intp)
    component_iou = area / (union_sizes[union_at_inter[anchor]] + EPS)

    # regionprops order = ascending anchor; assignment means the last component of a (g, p) pair wins
    in_order = np.argsort(anchor_key, kind="stable")[::-1]
    pair = anchor_gt[in_order] * 256 + anchor_pred[in_order]
    _, last = np.unique(pair, return_index=True)
    winners = in_order[last]
    iou[anchor_gt[winners] - 1, anchor_pred[winners] - 1] = component_iou[winners]

    match.max_iou = iou.max(axis=0)
    match.hit_label = np.where(match.max_iou == 0, 0, iou.argmax(axis=0) + 1)
    return match


def foreground_indices(a: np.ndarray, b: np.ndarray, chunk: int = 1 << 20) -> np.ndarray:
    """Sorted flat indices where either of two flat uint8 arrays is non-zero.

    Scans 8 voxels per 64-bit word in chunks (about 7x faster than np.flatnonzero on uint8, no full-size
    temporary), then checks the voxels of the non-zero words.
    """
    head = a.size - a.size % 8
    a_words, b_words = a[:head].view(np.uint64), b[:head].view(np.uint64)
    parts = []
    for start in range(0, a_words.size, chunk):
        words = np.flatnonzero(a_words[start:start + chunk] | b_words[start:start + chunk])
        if words.size:
            parts.append(((words + start)[:, None] * 8 + np.arange(8)).ravel())
    parts.append(np.arange(head, a.size))
    candidates = np.concatenate(parts)
    return candidates[(a[candidates] | b[candidates]) != 0]


def _components_in_box(coords: np.ndarray) -> np.ndarray:
    """26-connected components (cc3d, inside the set's bounding box) of a voxel set given as (3, n) coordinates:
    the component label of each voxel.

    The mask is uint8, never bool: connected-components-3d 4.1.1 sizes its union-find array for bool input from an
    estimate that is too small for isolated voxels (two voxels 2 apart along one axis: `RuntimeError: maximum length
    exception`), while its general (uint8) path sizes it by the voxels and labels as scipy/skimage do (§2.2;
    tests/ribfrac/test_ribfrac_metrics.py compares it with scipy.ndimage.label, tests/reference with skimage)."""
    import cc3d

    low = coords.min(axis=1)
    box_shape = tuple(int(v) for v in coords.max(axis=1) - low + 1)
    local = np.ravel_multi_index(tuple(coords - low[:, None]), box_shape)
    mask = np.zeros(box_shape, dtype=np.uint8)
    mask.reshape(-1)[local] = 1
    return cc3d.connected_components(mask, connectivity=26).reshape(-1)[local].astype(np.intp)


class MissingPredictionRow(ValueError):
    """A prediction mask label 1..max without a CSV/JSON row: the official code crashes (KeyError), §7."""

    def __init__(self, label: int) -> None:
        super().__init__(f"prediction mask label {label} has no row in the predictions "
                         f"(labels 1..max(mask) all need one; the official code crashes with KeyError)")
        self.label = label


class UnreadableRow(ValueError):
    """A CSV/JSON row that the official code reads and fails on (§4, §7): its label code maps to NaN where the
    confusion matrix looks its class up (KeyError), or pandas holds its confidence as text where the FROC
    compares it (TypeError). `row` is the GTRow/PredRow."""

    def __init__(self, row, problem: str) -> None:
        super().__init__(problem)
        self.row = row


class UnmergeableLabels(ValueError):
    """A case whose rows pandas 1.4.4 cannot merge with the mask labels (§2.3): the official code fails
    (ValueError). `side`: "ground-truth" or "prediction"."""

    def __init__(self, side: str, problem: str) -> None:
        super().__init__(problem)
        self.side = side


def unmergeable_labels(kind: str, labels: Sequence) -> bool:
    """§2.3: whether pandas 1.4.4 refuses the official left merge of the integer mask labels with a case's label_id
    cells (`ValueError: You are trying to merge on int64 and object columns`): only in a text (object) column, and
    only where the case's cells are text, or a mix of text, NaN and bools (`infer_dtype` "string" or "mixed"); no
    cells, only NaN or only bools merge (True is 1)."""
    if kind != "object":
        return False
    kinds = {"text" if isinstance(label, str) else "bool" if isinstance(label, bool) else "nan" for label in labels}
    return "text" in kinds or len(kinds) > 1


def _gt_class(code: int | None) -> str:
    """The merged ground-truth class of a hit: a code mapping to NaN becomes "FP" (`_get_gt_class`)."""
    return LABEL_CODES.get(code, "FP")


def json_probability(confidence: float) -> float | None:
    """A confidence as metrics.json can hold it, selected at the same FROC thresholds (all below 1) as the official
    comparison `prob >= t` selects it: NaN and -inf (never selected) -> None, +inf (always) -> 1.0."""
    if math.isfinite(confidence):
        return float(confidence)
    return 1.0 if confidence > 0 else None


def detection_rows(match: InstanceMatch, gt_rows: Sequence, pred_rows: Sequence, gt_label_kind: str = "int64",
                   pred_label_kind: str = "int64") -> list[dict]:
    """§2.3: `pred_metrics`, one row per prediction label 1..num_pred after the two left merges.

    `gt_rows` have `label_id`, `label_code`; `pred_rows` have `label_id`, `confidence`, `label_code`.
    Duplicate CSV rows duplicate predictions (pred CSV on pred_label, GT CSV on hit_label). Empty prediction
    volume: no rows. Empty ground truth: gt_class "FP" without the GT merge; otherwise a missing GT row, or one
    whose code maps to NaN, gives "FP" and a non-hit prediction takes the class of the GT label-0 row
    ("Background"). Prediction rows of labels 1..num_pred are read: a code mapping to NaN or a confidence held as
    text raises UnreadableRow; other prediction rows are never read.

    Labels are compared as the merges compare them (1.0 and True are 1; NaN and text never match); a text label_id
    column fails the merge where `unmergeable_labels` says so.

    Args:
        match: the case's `match_instances` result.
        gt_rows: the case's ground-truth CSV rows (GTRow).
        pred_rows: the case's prediction CSV or GC rows (PredRow).
        gt_label_kind, pred_label_kind: pandas' dtype of each file's label_id column.

    Returns:
        One dict per row: `pred_label`, `max_iou`, `hit_label`, `prob` (`json_probability`), `pred_class`,
        `gt_class`.

    Raises:
        MissingPredictionRow: a prediction label 1..num_pred has no row (the official code: KeyError).
        UnreadableRow: a row the official code reads has a NaN code or a confidence held as text.
        UnmergeableLabels: a merge of the official code fails.
    """
    if match.num_pred == 0:
        return []
    if unmergeable_labels(pred_label_kind, [row.label_id for row in pred_rows]):
        raise UnmergeableLabels("prediction", "the prediction label_id column holds text, and pandas cannot merge the case's "
                                "label_ids with the mask labels (the official code fails: ValueError)")
    if match.num_gt and unmergeable_labels(gt_label_kind, [row.label_id for row in gt_rows]):
        raise UnmergeableLabels("ground-truth", "the ground-truth label_id column holds text, and pandas cannot merge the case's "
                                "label_ids with the hit labels (the official code fails: ValueError)")
    preds_by_label: dict[int, list] = {}
    for row in pred_rows:
        preds_by_label.setdefault(row.label_id, []).append(row)
    gt_by_label: dict[int, list] = {}
    for row in gt_rows:
        gt_by_label.setdefault(row.label_id, []).append(row)
    rows = []
    for label in range(1, match.num_pred + 1):
        if label not in preds_by_label:
            raise MissingPredictionRow(label)
        max_iou = float(match.max_iou[label - 1])
        hit = int(match.hit_label[label - 1])
        if match.num_gt == 0:
            gt_classes = ["FP"]
        else:
            gt_classes = [_gt_class(r.label_code) for r in gt_by_label.get(hit, [])] or ["FP"]
        for pred in preds_by_label[label]:
            if pred.label_code is None:
                raise UnreadableRow(pred, f"prediction label {label}: label_code {pred.code_text!r} maps to NaN "
                                          "(not one of -1..4), on which the official confusion matrix fails (KeyError)")
            if pred.confidence_text is not None:
                raise UnreadableRow(pred, f"prediction label {label}: confidence {pred.confidence_text}: pandas "
                                          "reads the column as text, which the official FROC cannot compare with a "
                                          "threshold (TypeError)")
            for gt_class in gt_classes:
                rows.append({"pred_label": label, "max_iou": max_iou, "hit_label": hit,
                             "prob": json_probability(pred.confidence), "pred_class": LABEL_CODES[pred.label_code],
                             "gt_class": gt_class})
    return rows


def confusion_matrix(rows: Sequence[Mapping], gt_rows: Sequence) -> np.ndarray:
    """§4: the case's 5x6 matrix M[pred_class, gt_class] (rows MATRIX_ROWS, columns MATRIX_COLUMNS).

    Every row counts (no confidence or IoU threshold) unless its pred_class is Background or Ignore; gt_class
    Background counts as FP. Every non-Background GT CSV row whose label_id is not among the rows' hit_label
    values (or when there are no rows) is an FN of its class; if its code maps to NaN, the official lookup fails
    (UnreadableRow).

    Args:
        rows: the case's `detection_rows`.
        gt_rows: the case's ground-truth CSV rows.

    Returns:
        The int64 matrix, shape (5, 6).

    Raises:
        UnreadableRow: a ground-truth row counted as FN has a label code that maps to NaN.
    """
    matrix = np.zeros((len(MATRIX_ROWS), len(MATRIX_COLUMNS)), dtype=np.int64)
    for row in rows:
        if row["pred_class"] in ("Background", "Ignore"):
            continue
        gt_class = "FP" if row["gt_class"] == "Background" else row["gt_class"]
        matrix[MATRIX_ROWS.index(row["pred_class"]), MATRIX_COLUMNS.index(gt_class)] += 1
    hit_labels = {row["hit_label"] for row in rows}
    for gt in gt_rows:
        if rows and gt.label_id in hit_labels:
            continue
        if gt.label_code is None:
            why = ("the case has no prediction" if not rows else "no prediction misses (hit_label 0)"
                   if gt.label_id == 0 else "no prediction hits it")
            raise UnreadableRow(gt, f"ground-truth label {gt.label_id}: label_code {gt.code_text!r} maps to NaN (not "
                                    f"one of -1..4) and {why}, so the official code looks its class up for the FN "
                                    "count and fails (KeyError)")
        gt_class = LABEL_CODES[gt.label_code]
        if gt_class != "Background":
            matrix[MATRIX_ROWS.index("FN"), MATRIX_COLUMNS.index(gt_class)] += 1
    return matrix


def froc_points(cases: Iterable[Sequence[Mapping]], num_gt_total: int, num_cases: int,
                thresholds: np.ndarray = THRESHOLDS) -> tuple[np.ndarray, np.ndarray]:
    """§3.1, §3.2: (fp per scan, recall) at each threshold of `np.arange(0, 1, 0.01)`.

    Per case with rows: positives = rows with prob >= t (prob None: never); TP = distinct hit_label among positives with
    max_iou > 0.2; FP = positives with max_iou <= 0.2. fp = (sum FP + 1e-8) / (num_cases + 1e-8),
    recall = (sum TP + 1e-8) / (num_gt_total + 1e-8), num_gt_total = sum of max(gt label) over all cases.

    Args:
        cases: each case's `detection_rows` (empty for a case without predictions).
        num_gt_total: the sum of num_gt over all cases.
        num_cases: the number of cases, those without predictions included.
        thresholds: the confidence thresholds.

    Returns:
        (fp, recall), float64 arrays with one value per threshold.
    """
    fp = np.zeros(len(thresholds), dtype=np.int64)
    tp = np.zeros(len(thresholds), dtype=np.int64)
    for rows in cases:
        case_fp, case_tp = case_froc_counts(rows, thresholds)
        fp += case_fp
        tp += case_tp
    return froc_rates(fp, tp, num_gt_total, num_cases)


def case_froc_counts(rows: Sequence[Mapping], thresholds: np.ndarray = THRESHOLDS) -> tuple[np.ndarray, np.ndarray]:
    """§3.1 for one case: its FP and TP counts (int64) at each threshold; `froc_points` sums them over cases."""
    fp = np.zeros(len(thresholds), dtype=np.int64)
    tp = np.zeros(len(thresholds), dtype=np.int64)
    if not rows:
        return fp, tp
    prob = np.array([r["prob"] for r in rows], dtype=np.float64)
    hit_iou = np.array([r["max_iou"] for r in rows], dtype=np.float64) > HIT_IOU
    hit = np.array([r["hit_label"] for r in rows], dtype=np.int64)
    positive = prob[None, :] >= thresholds[:, None]
    fp += np.count_nonzero(positive & ~hit_iou, axis=1)
    for t, selected in enumerate(positive & hit_iou):
        tp[t] += np.unique(hit[selected]).size
    return fp, tp


def froc_rates(fp: np.ndarray, tp: np.ndarray, num_gt_total: int, num_cases: int) -> tuple[np.ndarray, np.ndarray]:
    """§3.2: (fp per scan, recall) from the summed counts."""
    return (fp + EPS) / (num_cases + EPS), (tp + EPS) / (num_gt_total + EPS)


def _numpy_less(a: float, b: float) -> bool:
    """numpy's float comparison for sorting: NaN sorts last."""
    return a < b or (b != b and a == a)


def _numpy_aheapsort(v: Sequence[float], order: list[int], start: int, count: int) -> None:
    """numpy's index heapsort (`np.argsort(kind="heapsort")`) of order[start:start+count] by the values v."""
    base = start - 1  # 1-based heap positions

    def sift(top: int, item: int, size: int) -> None:
        i, j = top, top * 2
        while j <= size:
            if j < size and _numpy_less(v[order[base + j]], v[order[base + j + 1]]):
                j += 1
            if _numpy_less(v[item], v[order[base + j]]):
                order[base + i] = order[base + j]
                i, j = j, j * 2
            else:
                break
        order[base + i] = item

    for top in range(count >> 1, 0, -1):
        sift(top, order[base + top], count)
    size = count
    while size > 1:
        item = order[base + size]
        order[base + size] = order[base + 1]
        size -= 1
        sift(1, item, size)


def numpy122_argsort(values: Sequence[float]) -> list[int]:
    """`np.argsort(values, kind="quicksort")` as numpy 1.22 computes it for float64 (introsort), in plain code.

    §3.4: the official FROC sorts the 100 (fp, recall) points with pandas' default (numpy quicksort, unstable);
    which of several points with equal fp comes last/first decides the interpolated recall. numpy 1.22 uses
    median-of-3 quicksort with a partition cut-off of 16 elements (insertion sort below), the larger partition
    pushed on a stack, and heapsort when the depth budget 2*floor(log2(n)) runs out. tests/reference compares it
    with numpy 1.22.4 on tie-heavy arrays and on arrays that reach the heapsort fallback.

    Args:
        values: the values to sort (float64; NaN sorts last).

    Returns:
        The permutation numpy 1.22's `np.argsort(values, kind="quicksort")` returns.
    """
    v = [float(x) for x in values]
    n = len(v)
    order = list(range(n))

    less = _numpy_less
    stack: list[tuple[int, int, int]] = []
    left, right = 0, n - 1
    depth = (n.bit_length() - 1) * 2 if n > 0 else 0
    while True:
        if depth < 0:
            _numpy_aheapsort(v, order, left, right - left + 1)
        else:
            while right - left > 15:
                mid = left + ((right - left) >> 1)
                if less(v[order[mid]], v[order[left]]):
                    order[mid], order[left] = order[left], order[mid]
                if less(v[order[right]], v[order[mid]]):
                    order[right], order[mid] = order[mid], order[right]
                if less(v[order[mid]], v[order[left]]):
                    order[mid], order[left] = order[left], order[mid]
                pivot = v[order[mid]]
                i, j = left, right - 1
                order[mid], order[j] = order[j], order[mid]
                while True:
                    i += 1
                    while less(v[order[i]], pivot):
                        i += 1
                    j -= 1
                    while less(pivot, v[order[j]]):
                        j -= 1
                    if i >= j:
                        break
                    order[i], order[j] = order[j], order[i]
                order[i], order[right - 1] = order[right - 1], order[i]
                depth -= 1
                if i - left < right - i:  # keep the smaller side, push the larger one
                    stack.append((i + 1, right, depth))
                    right = i - 1
                else:
                    stack.append((left, i - 1, depth))
                    left = i + 1
            for i in range(left + 1, right + 1):
                item = order[i]
                j = i
                while j > left and less(v[item], v[order[j - 1]]):
                    order[j] = order[j - 1]
                    j -= 1
                order[j] = item
        if not stack:
            return order
        left, right, depth = stack.pop()


def key_recalls(fp: Sequence[float], recall: Sequence[float], key_fps: Sequence[float] = KEY_FPS,
                tie_order: str = "numpy122") -> list[float]:
    """§3.3: the recall at each key FP level, interpolated as the official code does.

    Points sorted by fp (tie order: "numpy122" = numpy 1.22 quicksort as in the official run, "stable" = input
    order among equal fp). less = points with fp <= k, more = points with fp >= k (sorted order kept). No less:
    0; no more: max(recall); else between the last of less (fp0, r0) and the first of more (fp1, r1):
    r0 + (r1 - r0) * ((k - fp0) / (fp1 - fp0 + 1e-8)).

    Args:
        fp: FP per scan at each threshold (`froc_points`).
        recall: recall at each threshold.
        key_fps: the FP levels (default 0.5, 1, 2, 4, 8).
        tie_order: "numpy122" or "stable" (§3.4).

    Returns:
        One recall per key level; their mean is the detection score.

    Raises:
        ValueError: an unknown tie order.
    """
    fp = np.asarray(fp, dtype=np.float64)
    recall = np.asarray(recall, dtype=np.float64)
    if tie_order == "numpy122":
        order = np.array(numpy122_argsort(fp), dtype=np.intp)
    elif tie_order == "stable":
        order = np.argsort(fp, kind="stable")
    else:
        raise ValueError(f"tie order {tie_order!r}: expected one of {', '.join(TIE_ORDERS)}")
    fp_sorted, recall_sorted = fp[order], recall[order]
    result = []
    for k in key_fps:
        less = np.flatnonzero(fp_sorted <= k)
        more = np.flatnonzero(fp_sorted >= k)
        if less.size == 0:
            result.append(0.0)
        elif more.size == 0:
            result.append(float(recall.max()))
        else:
            fp0, r0 = fp_sorted[less[-1]], recall_sorted[less[-1]]
            fp1, r1 = fp_sorted[more[0]], recall_sorted[more[0]]
            result.append(float(r0 + (r1 - r0) * ((k - fp0) / (fp1 - fp0 + EPS))))
    return result


def f1_scores(matrix: np.ndarray) -> dict[str, float]:
    """§5: macro F1 over Buckle, Displaced, Nondisplaced, Segmental: overall, target-aware, prediction-aware.

    C = M[:, :5] (Ignore column dropped); tp = C[i,i], fp = row sum - tp, fn = column sum - tp.
    overall P = tp/(tp+fp+1e-8), R = tp/(tp+fn+1e-8); target-aware P drops the FP column
    (tp/(tp+(fp-C[i,4])+1e-8)); prediction-aware also R drops the FN row (tp/(tp+(fn-C[4,i])+1e-8));
    F1 = 2PR/(P+R+1e-8); the mean of the 4 classes.

    Args:
        matrix: the summed 5x6 confusion matrix (`confusion_matrix`).

    Returns:
        `{"macro_f1": ..., "target_aware_f1": ..., "prediction_aware_f1": ...}`.
    """
    c = np.asarray(matrix, dtype=np.float64)[:, :5]
    overall, target, prediction = [], [], []
    for i in range(4):
        tp = c[i, i]
        fp = c[i, :].sum() - tp
        fn = c[:, i].sum() - tp
        precision = tp / (tp + fp + EPS)
        recall = tp / (tp + fn + EPS)
        precision_targets = tp / (tp + (fp - c[i, 4]) + EPS)
        recall_predictions = tp / (tp + (fn - c[4, i]) + EPS)
        overall.append(2 * precision * recall / (precision + recall + EPS))
        target.append(2 * precision_targets * recall / (precision_targets + recall + EPS))
        prediction.append(2 * precision_targets * recall_predictions / (precision_targets + recall_predictions + EPS))
    return {"macro_f1": float(np.mean(overall)), "target_aware_f1": float(np.mean(target)),
            "prediction_aware_f1": float(np.mean(prediction))}


def segmentation_scores(inter: int, union: int, y_true: int, y_pred: int) -> dict[str, float]:
    """§6 (master only): dice = 2*inter/(y_true+y_pred+1e-8), iou = inter/(union+1e-8) over summed voxels.

    Args:
        inter: summed intersection voxels (§2.1).
        union: summed union voxels.
        y_true: summed ground-truth voxels.
        y_pred: summed prediction voxels.

    Returns:
        `{"dice": ..., "iou": ...}`.
    """
    inter, union, y_true, y_pred = int(inter), int(union), int(y_true), int(y_pred)
    return {"dice": 2 * inter / (y_true + y_pred + EPS), "iou": inter / (union + EPS)}
