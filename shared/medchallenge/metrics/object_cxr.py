"""object-CXR metrics as pure functions over arrays: hit tests, the official FROC walk, ROC AUC.

Spec: docs/metrics/object-cxr.md (the official `froc.py` of jfhealthcare/object-CXR and, for AUC, scikit-learn's
`roc_curve` + `auc`). Every function reimplements a rule of it and is vectorised over all (point, object) pairs, so
10,000 images with 30 points each take milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

DEFAULT_FPS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)  # released froc.py and README (§4 step 5)
SEED_FPS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)  # the challenge page and the first froc.py draft
POLYGON_RULES = ("skimage-0.16.2", "skimage-0.19")
VERTEX_EPS = 1e-12  # scikit-image 0.19 vertex tolerance


def inside_rectangles(x: np.ndarray, y: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """§3.1 rectangle: `x1 <= x <= x2 and y1 <= y <= y2` per (point, box) row; a reversed box contains nothing.

    Args:
        x: point x per row.
        y: point y per row.
        boxes: (n, 4) float64 `x1 y1 x2 y2` per row.

    Returns:
        Boolean per row: the point is inside its box.
    """
    return (boxes[:, 0] <= x) & (x <= boxes[:, 2]) & (boxes[:, 1] <= y) & (y <= boxes[:, 3])


def inside_ellipses(x: np.ndarray, y: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """§3.2 ellipse in its bounding box: `((x-xc)/ax)**2 + ((y-yc)/ay)**2 <= 1` in float64, per row.

    The official script squares numpy float64 scalars, which calls C `pow(v, 2)`; that differs from `v * v` in the
    last bit for about 1 value in 1,000, so the squares are taken with `np.float_power` (the same `pow`). A zero
    axis gives inf or nan and so `False`, as in the official script (§3.2, §7).

    Args:
        x: point x per row.
        y: point y per row.
        boxes: (n, 4) float64 bounding box `x1 y1 x2 y2` of the ellipse per row.

    Returns:
        Boolean per row: the point is inside its ellipse.
    """
    x1, y1, x2, y2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    x_center, y_center = (x1 + x2) / 2, (y1 + y2) / 2
    x_axis, y_axis = (x2 - x1) / 2, (y2 - y1) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.float_power((x - x_center) / x_axis, 2.0) + np.float_power((y - y_center) / y_axis, 2.0)
    return value <= 1


def _polygon_edges(polygon: np.ndarray, vertex_start: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For rows testing `polygon[r]`: (row of each edge, vertex i, vertex j = i - 1 cyclically)."""
    counts = vertex_start[polygon + 1] - vertex_start[polygon]
    row = np.repeat(np.arange(len(polygon)), counts)
    first = np.repeat(vertex_start[polygon], counts)
    local = np.arange(len(row)) - np.repeat(np.cumsum(counts) - counts, counts)
    vertex_i = first + local
    vertex_j = first + np.where(local == 0, np.repeat(counts, counts) - 1, local - 1)
    return row, vertex_i, vertex_j


def inside_polygons(x: np.ndarray, y: np.ndarray, polygon: np.ndarray, vertex_start: np.ndarray,
                    vertices_x: np.ndarray, vertices_y: np.ndarray, rule: str = "skimage-0.16.2") -> np.ndarray:
    """§3.3 polygon: `skimage.measure.points_in_poly([[x, y]], vertices)[0]` per row (point r in polygon[r]).

    `rule="skimage-0.16.2"` (the organisers' pin): W. R. Franklin's pnpoly, an edge (i, j) flips the parity when
    `(vy[i] > y) != (vy[j] > y)` and `x < (vx[j]-vx[i]) * (y-vy[i]) / (vy[j]-vy[i]) + vx[i]` (half-open: some
    boundary points are inside, others outside). `rule="skimage-0.19"`: O'Rourke's crossing test on coordinates
    relative to the point; a vertex within 1e-12 and every edge point count as inside. A polygon without vertices
    contains nothing. tests/reference compares the 0.16.2 rule with scikit-image 0.16.2 on vertices, edge points
    and grid points of convex, concave, rectilinear, self-crossing and degenerate polygons.

    Args:
        x: point x per row.
        y: point y per row.
        polygon: the polygon (index into `vertex_start`) each row tests.
        vertex_start: vertices of polygon k are `vertex_start[k]:vertex_start[k + 1]` of the vertex arrays.
        vertices_x: vertex x coordinates.
        vertices_y: vertex y coordinates.
        rule: "skimage-0.16.2" (default, the organisers' pin) or "skimage-0.19".

    Returns:
        Boolean per row: the point is inside its polygon.

    Raises:
        ValueError: an unknown rule.
    """
    if rule not in POLYGON_RULES:
        raise ValueError(f"unknown polygon rule {rule!r}; expected one of {POLYGON_RULES}")
    row, vertex_i, vertex_j = _polygon_edges(polygon, vertex_start)
    px, py = x[row], y[row]
    xi, yi = vertices_x[vertex_i], vertices_y[vertex_i]
    xj, yj = vertices_x[vertex_j], vertices_y[vertex_j]
    n = len(polygon)
    with np.errstate(divide="ignore", invalid="ignore"):
        if rule == "skimage-0.16.2":
            straddles = (yi > py) != (yj > py)
            crossing = straddles & (px < (xj - xi) * (py - yi) / (yj - yi) + xi)
            return np.bincount(row[crossing], minlength=n) % 2 == 1
        x0, y0 = xi - px, yi - py  # vertex i relative to the point
        x1, y1 = xj - px, yj - py  # vertex i - 1
        on_vertex = (-VERTEX_EPS < x0) & (x0 < VERTEX_EPS) & (-VERTEX_EPS < y0) & (y0 < VERTEX_EPS)
        intersection = (x0 * y1 - x1 * y0) / (y1 - y0)
        right = ((y0 > 0) != (y1 > 0)) & (intersection > 0)
        left = ((y0 < 0) != (y1 < 0)) & (intersection < 0)
    inside = np.bincount(row[on_vertex], minlength=n) > 0
    inside |= np.bincount(row[right], minlength=n) % 2 == 1  # inside (both parities odd) or on an edge
    inside |= np.bincount(row[left], minlength=n) % 2 == 1  # on an edge (parities differ)
    return inside


@dataclass
class Objects:
    """Ground-truth objects grouped by image: the objects of image i are rows object_start[i]:object_start[i+1]."""

    object_start: np.ndarray  # int64 (n_images + 1,)
    object_id: np.ndarray  # int64, global object number (file order)
    object_type: np.ndarray  # int8: 0 rectangle, 1 ellipse, 2 polygon, other: never hit
    boxes: np.ndarray  # float64 (n, 4)
    vertex_start: np.ndarray  # int64 (n + 1,), polygon vertices of row k: vertex_start[k]:vertex_start[k+1]
    vertices_x: np.ndarray
    vertices_y: np.ndarray
    polygon_box: np.ndarray  # float64 (n, 4): polygon vertex bounds widened by a margin, NaN for other rows


def _polygon_boxes(vertex_start: np.ndarray, vertices_x: np.ndarray, vertices_y: np.ndarray) -> np.ndarray:
    """Bounds of each polygon's vertices, widened by 1e-6 * (1 + |largest coordinate|).

    Only a prefilter: a point outside these bounds is outside under both rules (no edge straddles its y, or
    every crossing lies on one side of it, and no vertex is within 1e-12), far beyond any rounding of the
    crossing arithmetic; points inside the bounds get the exact test.
    """
    boxes = np.full((len(vertex_start) - 1, 4), np.nan)
    rows = np.flatnonzero(vertex_start[1:] > vertex_start[:-1])
    if len(rows):
        first = vertex_start[rows]
        boxes[rows] = np.column_stack([np.minimum.reduceat(vertices_x, first), np.minimum.reduceat(vertices_y, first),
                                       np.maximum.reduceat(vertices_x, first), np.maximum.reduceat(vertices_y, first)])
        margin = 1e-6 * (1 + np.abs(boxes[rows]).max(axis=1))
        boxes[rows] += margin[:, None] * np.array([-1, -1, 1, 1])
    return boxes


def group_objects(object_image: np.ndarray, object_type: np.ndarray, boxes: np.ndarray, vertex_start: np.ndarray,
                  vertices_x: np.ndarray, vertices_y: np.ndarray, num_images: int) -> Objects:
    """Reorder objects (file order) by image, keeping file order within an image (§2: object ids in file order)."""
    order = np.argsort(object_image, kind="stable")
    counts = (vertex_start[1:] - vertex_start[:-1])[order]
    new_start = np.concatenate(([0], np.cumsum(counts)))
    vertex_rows = np.repeat(vertex_start[:-1][order], counts) + (
        np.arange(new_start[-1]) - np.repeat(new_start[:-1], counts))
    return Objects(
        object_start=np.concatenate(([0], np.cumsum(np.bincount(object_image, minlength=num_images)))),
        object_id=order.astype(np.int64),
        object_type=object_type[order],
        boxes=boxes[order],
        vertex_start=new_start.astype(np.int64),
        vertices_x=vertices_x[vertex_rows],
        vertices_y=vertices_y[vertex_rows],
        polygon_box=_polygon_boxes(new_start, vertices_x[vertex_rows], vertices_y[vertex_rows]),
    )


def hit_pairs(point_image: np.ndarray, x: np.ndarray, y: np.ndarray, objects: Objects,
              polygon_rule: str = "skimage-0.16.2") -> tuple[np.ndarray, np.ndarray]:
    """§4 step 2: every (point, object) pair where the point lies inside an object of its own image.

    `point_image` indexes the images of `objects` (-1: an image without ground truth, never a hit). Returns the
    point positions and global object ids of the hits, by point then object.

    Args:
        point_image: per point, the index of its image in `objects` (-1: not in the ground truth).
        x: per point, its x.
        y: per point, its y.
        objects: the ground-truth objects grouped by image (`group_objects`).
        polygon_rule: the polygon boundary rule (`inside_polygons`).

    Returns:
        (point positions, global object ids) of every hit.
    """
    known = np.flatnonzero(point_image >= 0)
    image = point_image[known]
    counts = objects.object_start[image + 1] - objects.object_start[image]
    pair_point = np.repeat(known, counts)
    pair_row = np.repeat(objects.object_start[image], counts) + (
        np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts))
    px, py = x[pair_point], y[pair_point]
    kind = objects.object_type[pair_row]
    inside = np.zeros(len(pair_row), dtype=bool)
    for code, test in ((0, inside_rectangles), (1, inside_ellipses)):
        sel = np.flatnonzero(kind == code)
        inside[sel] = test(px[sel], py[sel], objects.boxes[pair_row[sel]])
    sel = np.flatnonzero(kind == 2)
    sel = sel[inside_rectangles(px[sel], py[sel], objects.polygon_box[pair_row[sel]])]
    inside[sel] = inside_polygons(px[sel], py[sel], pair_row[sel], objects.vertex_start,
                                  objects.vertices_x, objects.vertices_y, polygon_rule)
    return pair_point[inside], objects.object_id[pair_row[inside]]


def sort_by_probability(probability: np.ndarray) -> np.ndarray:
    """§4 step 1: order of predictions by probability, descending, ties in file order (Python's stable sort).

    With a NaN among them the order is whatever Python's `sorted(..., reverse=True)` makes of NaN's comparisons
    (all false), so Python's sort itself is used then.

    Args:
        probability: per prediction, its probability, in file order.

    Returns:
        The positions of the predictions in walk order.
    """
    probability = np.asarray(probability, dtype=np.float64)
    if np.isnan(probability).any():
        values = probability.tolist()
        return np.asarray(sorted(range(len(values)), key=values.__getitem__, reverse=True), dtype=np.int64)
    return np.argsort(-probability, kind="stable")


def walk_counts(order: np.ndarray, hit_point: np.ndarray, hit_object: np.ndarray,
                num_object: int) -> tuple[np.ndarray, np.ndarray]:
    """§4 step 2 over the sorted predictions: per rank, is it a false positive, and how many new objects it detects.

    A prediction inside any object is not a false positive; it detects the objects it is inside that no earlier
    prediction detected (one point may detect several overlapping objects). A point inside only already-detected
    objects is neither.

    Args:
        order: the walk order (`sort_by_probability`).
        hit_point: point positions of the hits (`hit_pairs`).
        hit_object: object ids of the hits.
        num_object: the number of ground-truth objects.

    Returns:
        (false_positive, new_hits) per rank of the walk: a boolean and the number of objects detected first there.
    """
    n = len(order)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    inside = np.zeros(n, dtype=bool)
    inside[hit_point] = True
    first_rank = np.full(num_object, n, dtype=np.int64)
    np.minimum.at(first_rank, hit_object, rank[hit_point])
    new_hits = np.bincount(first_rank[first_rank < n], minlength=n)[:n]
    return ~inside[order], new_hits


@dataclass
class FrocResult:
    """FROC per level: sensitivities, which were reached by the walk, the mean, how many predictions (in sorted
    order) the walk tested before it stopped, and notes on undefined cases."""

    fps: list[float]
    sensitivities: list[float]
    reached: list[bool]
    froc: float
    walked: int
    notes: list[str] = field(default_factory=list)


def froc_levels(false_positive: np.ndarray, new_hits: np.ndarray, num_image: int, num_object: int,
                fps: Sequence[float] = DEFAULT_FPS) -> FrocResult:
    """§4 steps 3-5: the official level walk over predictions in sorted order (and §8 where froc.py crashes).

    After each prediction, if `false_positives / num_image >= fps[next]`, record `hits / num_object` and move to the
    next level: at most one level per prediction, the triggering prediction included; the walk stops after the
    prediction that fills the last level. Levels never reached are padded with the last recorded sensitivity.
    FROC = mean over levels.

    Where the official script crashes, the result is defined instead (and said in `notes`):
    no image (ZeroDivisionError) or no object (ZeroDivisionError / IndexError): every sensitivity 0;
    no level reached (IndexError on `froc[-1]`): every level gets the sensitivity after all predictions, which
    is the sensitivity at any false-positive rate at or above the last one reached.

    Args:
        false_positive: per rank of the walk, whether the prediction is a false positive (`walk_counts`).
        new_hits: per rank, the number of objects detected first there.
        num_image: the number of ground-truth lines.
        num_object: the number of ground-truth objects.
        fps: the FP-per-image levels.

    Returns:
        FrocResult: per level the sensitivity and whether it was reached, the FROC, how far the walk went, notes.
    """
    fps = [float(f) for f in fps]
    notes: list[str] = []
    if num_image == 0 or num_object == 0:
        what = "no image" if num_image == 0 else "no object"
        notes.append(f"FROC: the ground truth has {what}; the official script crashes (division by zero or "
                     "IndexError); every sensitivity is reported as 0")
        return FrocResult(fps, [0.0] * len(fps), [False] * len(fps), 0.0, len(false_positive), notes)
    fp_rate = np.cumsum(false_positive, dtype=np.int64) / num_image
    hits = np.cumsum(new_hits, dtype=np.int64)
    n = len(fp_rate)
    recorded: list[float] = []
    start = 0
    for level in fps:
        k = start + int(np.searchsorted(fp_rate[start:], level, side="left"))
        if k >= n:
            break
        recorded.append(int(hits[k]) / num_object)
        start = k + 1
    walked = start if len(recorded) == len(fps) else n
    reached = [True] * len(recorded) + [False] * (len(fps) - len(recorded))
    if recorded:
        sensitivities = recorded + [recorded[-1]] * (len(fps) - len(recorded))
    else:
        final = int(hits[-1]) / num_object if n else 0.0
        sensitivities = [final] * len(fps)
        total_fp = int(np.count_nonzero(false_positive))
        notes.append(
            f"FROC: no false-positive level reached ({total_fp} false positives over {num_image} images < "
            f"{fps[0]:g} per image); the official script crashes (IndexError); every level gets the sensitivity "
            f"after all predictions ({final:.6g})"
        )
    froc = float(np.mean(np.asarray(sensitivities, dtype=np.float64)))
    return FrocResult(fps, sensitivities, reached, froc, walked, notes)


def froc_curve(false_positive: np.ndarray, new_hits: np.ndarray, num_image: int, num_object: int,
               max_points: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """The full FROC curve for plotting: (false positives per image, sensitivity) after each false-positive count.

    Keeps, for each number of false positives, the sensitivity just before the next one; thinned to about
    `max_points` points on a log grid of the false-positive rate.
    """
    if num_image == 0 or num_object == 0 or len(false_positive) == 0:
        return np.zeros(1), np.zeros(1)
    fp = np.cumsum(false_positive, dtype=np.int64)
    hits = np.cumsum(new_hits, dtype=np.int64)
    last = np.flatnonzero(np.r_[fp[1:] != fp[:-1], True])
    rate, sensitivity = fp[last] / num_image, hits[last] / num_object
    if len(rate) > max_points:
        keep = np.unique(np.searchsorted(rate, np.geomspace(max(rate[0], 1 / num_image), rate[-1], max_points)))
        keep = np.unique(np.r_[0, keep[keep < len(rate)], len(rate) - 1])
        rate, sensitivity = rate[keep], sensitivity[keep]
    return rate, sensitivity


@dataclass
class RocResult:
    """ROC curve points (after scikit-learn's drop_intermediate) and its area."""

    fpr: np.ndarray
    tpr: np.ndarray
    auc: float
    notes: list[str] = field(default_factory=list)


def roc_auc(has_object: np.ndarray, probability: np.ndarray) -> RocResult:
    """§6: scikit-learn's `roc_curve(y, p)` (drop_intermediate=True) and `auc(fpr, tpr)`, reproduced bit for bit.

    Distinct scores sorted descending; cumulative true/false positives at the last position of each score;
    collinear points dropped where the second differences of both counts are 0; (0, 0) prepended; rates
    divided by the totals; trapezoids summed with numpy's pairwise sum. With only one class present the AUC is
    undefined (scikit-learn returns nan): reported as 0.5 with a note (§8). tests/reference compares curve and area
    with scikit-learn 1.0.2.

    Args:
        has_object: per ground-truth image, whether it has at least one object (the label).
        probability: per ground-truth image, its classification probability (the score).

    Returns:
        RocResult: the curve (fpr, tpr), the area and notes.
    """
    y = np.asarray(has_object, dtype=np.float64)
    score = np.asarray(probability, dtype=np.float64)
    positives = int(np.count_nonzero(y))
    if positives == 0 or positives == len(y):
        what = "no image with" if positives == 0 else "no image without"
        note = f"AUC: the ground truth has {what} objects; ROC AUC is undefined (scikit-learn: nan); reported as 0.5"
        return RocResult(np.array([0.0, 1.0]), np.array([0.0, 1.0]), 0.5, [note])
    order = np.argsort(-score, kind="stable")
    score, y = score[order], y[order]
    threshold_index = np.r_[np.flatnonzero(np.diff(score)), len(y) - 1]
    tps = np.cumsum(y, dtype=np.float64)[threshold_index]
    fps = 1 + threshold_index.astype(np.float64) - tps
    if len(fps) > 2:
        keep = np.flatnonzero(np.r_[True, np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), True])
        fps, tps = fps[keep], tps[keep]
    fps, tps = np.r_[0.0, fps], np.r_[0.0, tps]
    fpr, tpr = fps / fps[-1], tps / tps[-1]
    area = float(np.sum((fpr[1:] - fpr[:-1]) * (tpr[1:] + tpr[:-1]) / 2.0, dtype=np.float64))
    return RocResult(fpr, tpr, area)
