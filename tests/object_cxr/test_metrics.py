"""object-CXR metric rules (docs/metrics/object-cxr.md §3, §4, §6), each expected value derived by hand."""

import numpy as np
import pytest

from medchallenge.metrics import object_cxr as m

# The concave test polygon: a square with a V-shaped notch from the top edge down to (5, 5).
#   (0,10)      (10,10)
#     \  notch  /
#      \      /
#       (5,5)
#   (0,0) ---- (10,0)
NOTCHED = [(0, 0), (10, 0), (10, 10), (5, 5), (0, 10)]


def polygon_hit(x: float, y: float, vertices, rule: str) -> bool:
    vx = np.array([v[0] for v in vertices], dtype=float)
    vy = np.array([v[1] for v in vertices], dtype=float)
    return bool(m.inside_polygons(np.array([x], float), np.array([y], float), np.array([0]),
                                  np.array([0, len(vertices)]), vx, vy, rule)[0])


def box_hit(test, x: float, y: float, box) -> bool:
    return bool(test(np.array([x], float), np.array([y], float), np.array([box], float))[0])


@pytest.mark.parametrize("x, y, expected", [
    (0, 0, True), (10, 10, True), (10, 5, True), (0, 10, True),  # corners and edges: x1 <= x <= x2 inclusive
    (5.5, 9.5, True), (10.5, 5, False), (5, -0.5, False), (-0.5, -0.5, False),
])
def test_rectangle_is_inclusive(x, y, expected):
    assert box_hit(m.inside_rectangles, x, y, (0, 0, 10, 10)) is expected


def test_reversed_rectangle_contains_nothing():
    # x1 = 10 > x2 = 0: 10 <= 5 is false
    assert box_hit(m.inside_rectangles, 5, 5, (10, 0, 0, 10)) is False


@pytest.mark.parametrize("x, y, box, expected", [
    (10, 10, (0, 0, 10, 20), True),  # ((10-5)/5)^2 + 0 = 1 <= 1: the end of an axis is inside
    (5, 0, (0, 0, 10, 20), True),  # 0 + ((0-10)/10)^2 = 1
    (10, 20, (0, 0, 10, 20), False),  # bounding-box corner: 1 + 1 = 2
    (9.5, 10, (0, 0, 10, 20), True),  # 0.9^2 = 0.81
    (10.5, 10, (0, 0, 10, 20), False),  # 1.1^2 = 1.21
    (8, 9, (0, 0, 10, 10), True),  # 3-4-5: 0.6**2 + 0.8**2 evaluates to exactly 1.0 (§7)
    (18, 25, (0, 0, 26, 26), False),  # 5-12-13: (5/13)**2 + (12/13)**2 = 1.0000000000000002 (§7)
    (50, 81, (0, 0, 82, 82), True),  # 9-40-41: 0.9999999999999999 (§7)
    (5, 5, (5, 0, 5, 10), False),  # zero x axis: 0/0 = nan, nan <= 1 is false
    (5, 5, (10, 10, 0, 0), True),  # reversed box: negative axes squared, centre (5, 5)
])
def test_ellipse_rule(x, y, box, expected):
    assert box_hit(m.inside_ellipses, x, y, box) is expected


def test_ellipse_squares_like_numpy_scalars():
    # froc.py squares numpy float64 scalars (C pow); v * v differs in the last bit for some values
    rng = np.random.default_rng(1)
    values = rng.uniform(-1.5, 1.5, 20000)
    scalar = np.array([np.float64(v) ** 2 for v in values])
    assert np.array_equal(np.float_power(values, 2.0), scalar)
    assert not np.array_equal(values * values, scalar)  # why float_power is needed


@pytest.mark.parametrize("x, y, old, new", [
    (5, 2, True, True),  # interior
    (5, 8, False, False),  # inside the notch: 2 crossings to the right (x = 10 and x = 8)
    (0, 3, True, True),  # left edge: crossing at x = 10 only (0 < 0 is false) -> 1 -> inside
    (10, 3, False, True),  # right edge: 10 < 10 false -> 0 crossings under 0.16.2; an edge point under 0.19
    (5, 0, True, True),  # bottom edge: edge (10,10)-(10,0) crosses at 10 -> 1
    (2, 8, False, True),  # on edge (0,10)-(5,5): crossings at 10 and 8, not at 2 (2 < 2) -> 2
    (2.5, 7.5, False, True),  # same edge at half-integers: crossings at 10 and 7.5 -> 2
    (10, 10, False, True),  # top-right vertex: no edge straddles y = 10 under 0.16.2; a vertex under 0.19
    (0, 0, True, True),  # bottom-left vertex: crossing at x = 10 -> 1
    (5, 5, True, True),  # notch vertex: crossing at 10 only (5 < 5 false twice) -> 1
    (9.5, 9.5, True, True),  # on the notch edge y = x: crossing at 10, not at 9.5 -> 1
    (9.5, 9.0, True, True),  # below y = x: inside
    (9.0, 9.5, False, False),  # above y = x, in the notch: crossings at 10 and 9.5 -> 2
    (10.5, 3, False, False),
    (-0.5, 3, False, False),  # left of everything: crossings at 0 and 10 -> 2
])
def test_polygon_rules_on_concave_polygon(x, y, old, new):
    assert polygon_hit(x, y, NOTCHED, "skimage-0.16.2") is old
    assert polygon_hit(x, y, NOTCHED, "skimage-0.19") is new


def test_polygon_without_vertices_and_vertex_tolerance():
    assert polygon_hit(0, 0, [], "skimage-0.16.2") is False
    assert polygon_hit(0, 0, [], "skimage-0.19") is False
    # 0.19 counts a point within 1e-12 of a vertex as inside; 1e-9 away (outside the square) it is outside
    assert polygon_hit(10 + 1e-13, 10, NOTCHED, "skimage-0.19") is True
    assert polygon_hit(10 + 1e-9, 10 + 1e-9, NOTCHED, "skimage-0.19") is False


def test_vectorised_polygons_match_a_scalar_pnpoly():
    """Franklin's pnpoly written out per point (§3) against the vectorised version, random half-integer points."""
    rng = np.random.default_rng(2)
    vx, vy = np.array(NOTCHED, float).T
    xs, ys = rng.integers(-2, 24, 4000) / 2, rng.integers(-2, 24, 4000) / 2

    def pnpoly(x, y):
        inside, j = False, len(vx) - 1
        for i in range(len(vx)):
            if (vy[i] > y) != (vy[j] > y) and x < (vx[j] - vx[i]) * (y - vy[i]) / (vy[j] - vy[i]) + vx[i]:
                inside = not inside
            j = i
        return inside

    got = m.inside_polygons(xs, ys, np.zeros(len(xs), int), np.array([0, 5]), vx, vy, "skimage-0.16.2")
    assert got.tolist() == [pnpoly(x, y) for x, y in zip(xs, ys)]


def objects_of(rows, num_images):
    """rows: (image, type, coordinates) in file order -> grouped Objects."""
    boxes, starts, vx, vy = [], [0], [], []
    for _, kind, coords in rows:
        if kind == 2:
            vx += coords[0::2]
            vy += coords[1::2]
            boxes.append([np.nan] * 4)
        else:
            boxes.append(coords)
        starts.append(len(vx))
    return m.group_objects(np.array([r[0] for r in rows]), np.array([r[1] for r in rows], np.int8),
                           np.array(boxes, float).reshape(-1, 4), np.array(starts), np.array(vx, float),
                           np.array(vy, float), num_images)


def test_hit_pairs_overlapping_objects_and_images_without_ground_truth():
    # image 0: rectangles 0 (0 0 20 20) and 1 (15 15 30 30) overlap; image 1: ellipse 2; image 2: none
    objects = objects_of([(0, 0, [0, 0, 20, 20]), (1, 1, [0, 0, 10, 10]), (0, 0, [15, 15, 30, 30])], 3)
    point_image = np.array([0, 0, 1, 2, -1])
    x = np.array([18.0, 25.0, 5.0, 5.0, 5.0])
    y = np.array([18.0, 25.0, 5.0, 5.0, 5.0])
    points, ids = m.hit_pairs(point_image, x, y, objects)
    # point 0 at (18,18) is inside objects 0 and 2; point 1 only in object 2; point 2 in the ellipse (object 1);
    # point 3 is on an image without objects, point 4 on an image not in the ground truth
    assert sorted(zip(points.tolist(), ids.tolist())) == [(0, 0), (0, 2), (1, 2), (2, 1)]


def test_sort_is_descending_and_stable():
    assert m.sort_by_probability(np.array([0.1, 0.5, 0.5, 0.9, 0.5])).tolist() == [3, 1, 2, 4, 0]


def test_walk_counts_ignores_points_in_detected_objects():
    # sorted order = file order; p0 hits object 0; p1 hits object 0 again (neither TP nor FP);
    # p2 hits objects 0 and 1 (overlap: one new detection); p3 hits nothing (FP)
    fp, new = m.walk_counts(np.arange(4), np.array([0, 1, 2, 2]), np.array([0, 0, 0, 1]), num_object=2)
    assert fp.tolist() == [False, False, False, True]
    assert new.tolist() == [1, 0, 1, 0]


def test_levels_jumped_by_one_false_positive():
    # 1 image, 2 objects, levels 0.5, 1, 2; sorted predictions: FP, TP, FP, TP
    # after p0: 1 FP/image >= 0.5 -> record 0/2; level 1 is also passed but only one level per prediction:
    # after p1: 1 >= 1 -> record 1/2 (the TP after the FP counts); after p2: 2 >= 2 -> record 1/2
    result = m.froc_levels(np.array([1, 0, 1, 0], bool), np.array([0, 1, 0, 1]), 1, 2, [0.5, 1, 2])
    assert result.sensitivities == [0.0, 0.5, 0.5]
    assert result.reached == [True, True, True]
    assert result.froc == np.mean([0.0, 0.5, 0.5])  # 1/3
    assert result.walked == 3  # stopped after the prediction that filled the last level; p3 is never tested


def test_padding_uses_last_recorded_sensitivity():
    # 2 images, 4 objects, levels 0.5, 1, 2; TP, FP, TP, TP, TP: level 0.5 at p1 (1/2 FP per image) -> 1/4;
    # levels 1 and 2 never reached -> padded with 0.25, although the final sensitivity is 4/4
    result = m.froc_levels(np.array([0, 1, 0, 0, 0], bool), np.array([1, 0, 1, 1, 1]), 2, 4, [0.5, 1, 2])
    assert result.sensitivities == [0.25, 0.25, 0.25]
    assert result.reached == [True, False, False]
    assert result.froc == 0.25 and result.walked == 5  # levels left unfilled: every prediction is tested
    assert result.notes == []


def test_no_level_reached_gives_final_sensitivity_with_note():
    # 10 images, 4 objects, two TPs and no FP: official IndexError; documented value 2/4 at every level
    result = m.froc_levels(np.array([0, 0], bool), np.array([1, 1]), 10, 4)
    assert result.sensitivities == [0.5] * 7
    assert result.froc == 0.5
    assert "IndexError" in result.notes[0]
    empty = m.froc_levels(np.zeros(0, bool), np.zeros(0, int), 10, 4)
    assert empty.sensitivities == [0.0] * 7 and empty.notes


@pytest.mark.parametrize("num_image, num_object", [(0, 0), (3, 0)])
def test_no_images_or_objects(num_image, num_object):
    result = m.froc_levels(np.array([1], bool), np.array([0]), num_image, num_object, [1, 2])
    assert result.sensitivities == [0.0, 0.0] and result.froc == 0.0
    assert "crashes" in result.notes[0]


def test_level_zero_is_reached_by_the_first_prediction():
    # 0 FP/image >= 0 after p0 (a TP): records 1/1
    assert m.froc_levels(np.array([0], bool), np.array([1]), 1, 1, [0]).sensitivities == [1.0]


def test_auc_by_hand():
    # positives 0.9 and 0.7, negatives 0.8 and 0.1: 3 of 4 pairs ordered correctly
    assert m.roc_auc(np.array([1, 0, 1, 0]), np.array([0.9, 0.8, 0.7, 0.1])).auc == 0.75
    # a tie between a positive and a negative counts one half
    assert m.roc_auc(np.array([1, 0]), np.array([0.5, 0.5])).auc == 0.5


def test_auc_single_class_is_documented():
    result = m.roc_auc(np.array([0, 0, 0]), np.array([0.1, 0.2, 0.3]))
    assert result.auc == 0.5 and "undefined" in result.notes[0]


def test_auc_identical_to_scikit_learn():
    from sklearn.metrics import auc, roc_auc_score, roc_curve

    rng = np.random.default_rng(3)
    for n in (2, 3, 7, 50, 1000):
        for levels in (3, 20, 10**6):
            y = rng.integers(0, 2, n)
            y[0], y[-1] = 0, 1
            score = rng.integers(0, levels, n) / levels
            result = m.roc_auc(y, score)
            fpr, tpr, _ = roc_curve(y, score)
            assert result.auc == auc(fpr, tpr) == roc_auc_score(y, score)
            assert np.array_equal(result.fpr, fpr) and np.array_equal(result.tpr, tpr)


def test_froc_curve_is_thinned_and_ends_at_the_last_point():
    fp = np.tile([True, False], 5000)
    new = np.tile([0, 1], 5000)
    rate, sens = m.froc_curve(fp, new, 100, 5000, max_points=200)
    assert len(rate) <= 202 and rate[-1] == 50.0 and sens[-1] == 1.0
