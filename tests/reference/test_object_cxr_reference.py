"""object-CXR pieces vs the libraries the organisers used: ROC curve and AUC vs scikit-learn 1.0.2 `roc_curve` + `auc`
(Python 3.9), polygon hit test (rule "skimage-0.16.2", alone and through `hit_pairs`) vs scikit-image 0.16.2
`points_in_poly` (Python 3.7), on tie-heavy scores and on points exactly on edges and vertices (fixed seeds)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from medchallenge.metrics import object_cxr as m

pytestmark = pytest.mark.reference


def roc_cases(count: int, seed: int) -> list[dict]:
    """Labels with both classes and scores: few levels (ties), uniform floats, neighbouring floats, ±0."""
    rng = random.Random(seed)
    cases = []
    while len(cases) < count:
        n = rng.choice([2, 3, 4, rng.randint(2, 20), rng.randint(2, 300), rng.randint(300, 3000)])
        y = [int(rng.random() < rng.choice([0.05, 0.3, 0.5, 0.9])) for _ in range(n)]
        if len(set(y)) < 2:
            continue
        kind = rng.randrange(5)
        if kind == 0:
            p = [rng.random() for _ in range(n)]
        elif kind == 1:
            levels = rng.randint(1, 6)
            p = [rng.randrange(levels) / levels for _ in range(n)]
        elif kind == 2:
            p = [math.nextafter(0.5, rng.choice([0.0, 1.0])) if rng.random() < 0.5 else 0.5 for _ in range(n)]
        elif kind == 3:
            p = [rng.choice([0.0, -0.0, 1.0, 1e-300, 5e-324]) for _ in range(n)]
        else:  # informative scores, ties from rounding
            p = [round(label * 0.3 + rng.random(), rng.randint(0, 3)) for label in y]
        cases.append({"y": y, "p": p})
    return cases


def test_roc_auc_matches_sklearn_1_0_2(py39, record):
    cases = roc_cases(3000, seed=821)
    reference = py39.run("roc_auc", cases)
    mismatches = []
    for case, expected in zip(cases, reference):
        ours = m.roc_auc(np.array(case["y"]), np.array(case["p"]))
        if (ours.auc != expected["auc"] or ours.fpr.tolist() != expected["fpr"]
                or ours.tpr.tolist() != expected["tpr"]):
            mismatches.append((case, ours.auc, expected["auc"]))
    record("object-CXR ROC AUC", py39, len(cases), mismatches)


def polygon(rng: random.Random) -> list[tuple[float, float]]:
    """Vertices on an integer or half-integer grid: convex, star (concave), rectilinear, random (self-crossing),
    degenerate (1-2 vertices, repeated vertices, collinear)."""
    step = rng.choice([1.0, 0.5])
    kind = rng.randrange(6)
    if kind == 0:  # convex: a regular polygon snapped to the grid
        n, r, cx, cy = rng.randint(3, 12), rng.randint(2, 12), rng.randint(0, 20), rng.randint(0, 20)
        angle = rng.random()
        points = [(cx + r * math.cos(angle + 2 * math.pi * k / n), cy + r * math.sin(angle + 2 * math.pi * k / n))
                  for k in range(n)]
    elif kind == 1:  # star, concave
        n, cx, cy = rng.randint(3, 10), rng.randint(0, 20), rng.randint(0, 20)
        points = [(cx + radius * math.cos(math.pi * k / n), cy + radius * math.sin(math.pi * k / n))
                  for k in range(2 * n) for radius in [rng.randint(6, 10) if k % 2 == 0 else rng.randint(1, 5)]]
    elif kind == 2:  # rectilinear staircase (axis-aligned edges, concave)
        x, y, points = 0, 0, [(0, 0)]
        for _ in range(rng.randint(2, 6)):
            x += rng.randint(1, 4)
            points.append((x, y))
            y += rng.randint(1, 4)
            points.append((x, y))
        points.append((0, y))
    elif kind == 3:  # random, may cross itself, many collinear edges
        points = [(rng.randint(0, 6), rng.randint(0, 6)) for _ in range(rng.randint(3, 12))]
    elif kind == 4:  # degenerate
        points = [(rng.randint(0, 4), rng.randint(0, 4)) for _ in range(rng.randint(1, 2))]
        points += points[:rng.randint(0, 2)]
    else:  # closed explicitly (first vertex repeated), as some writers do
        points = [(rng.randint(0, 8), rng.randint(0, 8)) for _ in range(rng.randint(3, 7))]
        points.append(points[0])
    return [(round(x / step) * step, round(y / step) * step) for x, y in points]


def probe_points(vertices: list[tuple[float, float]], rng: random.Random) -> list[tuple[float, float]]:
    """Every vertex, points on every edge at quarter steps, and integer / half-integer points around the box."""
    points = list(vertices)
    for (x0, y0), (x1, y1) in zip(vertices, vertices[1:] + vertices[:1]):
        points += [(x0 + (x1 - x0) * t, y0 + (y1 - y0) * t) for t in (0.25, 0.5, 0.75)]
    xs, ys = [x for x, _ in vertices], [y for _, y in vertices]
    for _ in range(20):
        points.append((rng.randint(int(2 * min(xs)) - 2, int(2 * max(xs)) + 2) / 2,
                       rng.randint(int(2 * min(ys)) - 2, int(2 * max(ys)) + 2) / 2))
    points += [(rng.uniform(min(xs) - 1, max(xs) + 1), rng.uniform(min(ys) - 1, max(ys) + 1)) for _ in range(3)]
    return points


def polygon_cases(count: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        vertices = polygon(rng)
        cases.append({"vertices": vertices, "points": probe_points(vertices, rng)})
    return cases


def project_inside(cases: list[dict]) -> list[list[bool]]:
    """All cases in one vectorised call of `inside_polygons` (row r: a point and the polygon of its case)."""
    counts = [len(case["vertices"]) for case in cases]
    vertex_start = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    vertices = np.array([v for case in cases for v in case["vertices"]], dtype=np.float64)
    polygon_of_row = np.repeat(np.arange(len(cases)), [len(case["points"]) for case in cases])
    points = np.array([p for case in cases for p in case["points"]], dtype=np.float64)
    inside = m.inside_polygons(points[:, 0], points[:, 1], polygon_of_row, vertex_start, vertices[:, 0],
                               vertices[:, 1], rule="skimage-0.16.2")
    ends = np.cumsum([len(case["points"]) for case in cases])
    return [part.tolist() for part in np.split(inside, ends[:-1])]


def project_hit_pairs(cases: list[dict]) -> list[list[bool]]:
    """The same through `group_objects` + `hit_pairs` (one image per case, one polygon object each)."""
    counts = [len(case["vertices"]) for case in cases]
    vertices = np.array([v for case in cases for v in case["vertices"]], dtype=np.float64)
    objects = m.group_objects(np.arange(len(cases)), np.full(len(cases), 2, dtype=np.int8),
                              np.full((len(cases), 4), np.nan), np.concatenate(([0], np.cumsum(counts))),
                              vertices[:, 0], vertices[:, 1], len(cases))
    point_image = np.repeat(np.arange(len(cases)), [len(case["points"]) for case in cases])
    points = np.array([p for case in cases for p in case["points"]], dtype=np.float64)
    hit_point, _ = m.hit_pairs(point_image, points[:, 0], points[:, 1], objects)
    inside = np.zeros(len(points), dtype=bool)
    inside[hit_point] = True
    ends = np.cumsum([len(case["points"]) for case in cases])
    return [part.tolist() for part in np.split(inside, ends[:-1])]


def test_polygon_hit_test_matches_skimage_0_16_2(py37, record):
    cases = polygon_cases(3000, seed=822)
    reference = py37.run("points_in_poly", cases)
    mismatches = []  # one per point where either path differs
    for case, direct, through_hits, expected in zip(cases, project_inside(cases), project_hit_pairs(cases), reference):
        mismatches += [(case["vertices"], point, a, b, want) for point, a, b, want
                       in zip(case["points"], direct, through_hits, expected) if not a == b == want]
    points = sum(len(case["points"]) for case in cases)
    inside = sum(sum(expected) for expected in reference)
    # boundary points on which the two scikit-image rules disagree: the half-open 0.16.2 rule was really probed
    counts = [len(case["vertices"]) for case in cases]
    vertices = np.array([v for case in cases for v in case["vertices"]], dtype=np.float64)
    all_points = np.array([p for case in cases for p in case["points"]], dtype=np.float64)
    rows = np.repeat(np.arange(len(cases)), [len(case["points"]) for case in cases])
    rule_019 = m.inside_polygons(all_points[:, 0], all_points[:, 1], rows, np.concatenate(([0], np.cumsum(counts))),
                                 vertices[:, 0], vertices[:, 1], rule="skimage-0.19")
    boundary = int(np.count_nonzero(rule_019 != np.concatenate([np.array(r, dtype=bool) for r in reference])))
    record("object-CXR polygon hits", py37, points, mismatches, polygons=len(cases), inside=inside,
           where_0_19_rule_differs=boundary, checked_through=["inside_polygons", "hit_pairs"])
    assert boundary > 1000
