"""RibFrac metric rules (docs/metrics/ribfrac.md), each with the expected value derived by hand."""

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import ndimage

from medchallenge.formats.ribfrac import GTRow, PredRow
from medchallenge.metrics import ribfrac as m

FIXTURES = Path(__file__).parent / "fixtures"
EPS = 1e-8


def volume(shape=(10, 10, 10)):
    return np.zeros(shape, dtype=np.uint8)


def row(pred_label, max_iou, hit_label, prob, pred_class="Displaced", gt_class="Displaced"):
    return {"pred_label": pred_label, "max_iou": max_iou, "hit_label": hit_label, "prob": prob,
            "pred_class": pred_class, "gt_class": gt_class}


# ---------------------------------------------------------------- §2 connected-component IoU

def test_iou_of_two_overlapping_boxes():
    gt, pred = volume(), volume()
    gt[0:4, 0:2, 0:2] = 1     # 16 voxels
    pred[2:6, 0:2, 0:2] = 1   # 16 voxels, overlap x=2..3: 8 voxels
    match = m.match_instances(gt, pred)
    # union component = x 0..5 -> 24 voxels; IoU = 8 / (24 + 1e-8)
    assert match.iou.tolist() == [[8 / (24 + EPS)]]
    assert match.max_iou.tolist() == [8 / (24 + EPS)] and match.hit_label.tolist() == [1]
    assert (match.inter, match.union, match.y_true, match.y_pred) == (8, 24, 16, 16)


def test_touching_predictions_share_one_component_first_voxel_wins():
    gt, pred = volume(), volume()
    gt[0:6, 0:2, 0:2] = 1                 # 24 voxels
    pred[0:2, 0:2, 0:2] = 2               # pred 2 owns the first intersection voxel (0,0,0)
    pred[2:4, 0:2, 0:2] = 1               # pred 1 lies inside GT 1, touching pred 2
    match = m.match_instances(gt, pred)
    # one intersection component of 16 voxels, anchor (0,0,0): g=1, p=2; union component = GT 1 = 24 voxels
    assert match.iou[0, 1] == 16 / (24 + EPS)
    assert match.iou[0, 0] == 0.0
    assert match.max_iou.tolist() == [0.0, 16 / (24 + EPS)]
    assert match.hit_label.tolist() == [0, 1]  # max_iou == 0 -> hit_label 0


def test_union_component_includes_chained_objects():
    gt, pred = volume(), volume()
    gt[0:2, 0:2, 0:2] = 1                 # 8 voxels
    pred[1:3, 0:2, 0:2] = 1               # overlap x=1: 4 voxels
    pred[3:5, 0:2, 0:2] = 2               # touches pred 1, no overlap with any GT: 8 voxels
    match = m.match_instances(gt, pred)
    # union component = x 0..4 = 20 voxels (pred 2 chained in): IoU 4/20, not the pair IoU 4/12
    assert match.iou[0, 0] == 4 / (20 + EPS)
    assert match.iou[0, 1] == 0.0


def test_diagonal_contact_is_connected_26():
    gt, pred = volume(), volume()
    gt[0, 0, 0] = 1
    pred[0, 0, 0] = 1
    pred[1, 1, 1] = 2                     # touches only at a corner: 26-connected to the union component
    match = m.match_instances(gt, pred)
    assert match.iou[0, 0] == 1 / (2 + EPS)


def test_same_pair_in_two_components_last_one_wins():
    gt, pred = volume(), volume()
    gt[0:8, 0, 0] = 1                     # one GT object, x = 0..7
    pred[0:2, 0, 0] = 1                   # component A: 2 voxels, anchor x=0
    pred[5:8, 0, 0] = 1                   # component B: 3 voxels, anchor x=5 (later in raster order)
    match = m.match_instances(gt, pred)
    # union = the whole GT line (8 voxels); B is assigned last: IoU 3/8 (not A's 2/8, not their sum)
    assert match.iou[0, 0] == 3 / (8 + EPS)


def test_anchor_is_first_voxel_in_official_xyz_order_whatever_the_memory_layout():
    gt, pred = volume((3, 3, 3)), volume((3, 3, 3))
    # one intersection component made of two pairs: voxel (0,2,0) is (g1,p1) and voxel (1,0,0) is (g2,p2);
    # (0,1,1) links them (g1,p1). First in C order of the (x,y,z) array: (0,1,1) -> pair (1,1).
    # In (z,y,x) order the first voxel would be (x=1,y=0,z=0) -> pair (2,2).
    for x, y, z, g, p in [(0, 2, 0, 1, 1), (0, 1, 1, 1, 1), (1, 0, 0, 2, 2)]:
        gt[x, y, z], pred[x, y, z] = g, p
    expected = np.zeros((2, 2))
    expected[0, 0] = 3 / (3 + EPS)
    for g_arr, p_arr in [(gt, pred), (np.asfortranarray(gt), np.asfortranarray(pred)),
                         (np.ascontiguousarray(gt.T).T, np.ascontiguousarray(pred.T).T)]:
        assert m.match_instances(g_arr, p_arr).iou.tolist() == expected.tolist()


def test_hit_label_ties_go_to_the_lowest_gt_label():
    gt, pred = volume(), volume()
    gt[0:2, 0, 0] = 1
    gt[6:8, 0, 0] = 2
    pred[1:7, 0, 0] = 1                   # overlaps GT1 at x=1 and GT2 at x=6; two separate components
    match = m.match_instances(gt, pred)
    # each component: area 1, union = the whole line x=0..7 = 8 voxels -> both 1/8; argmax -> GT 1
    assert match.iou[:, 0].tolist() == [1 / (8 + EPS), 1 / (8 + EPS)]
    assert match.hit_label.tolist() == [1]


def test_number_of_objects_is_the_max_label_not_the_count():
    gt, pred = volume(), volume()
    gt[0, 0, 0] = 1
    gt[5, 5, 5] = 3                       # label 2 missing
    pred[9, 9, 9] = 4                     # labels 1..3 missing
    match = m.match_instances(gt, pred)
    assert (match.num_gt, match.num_pred) == (3, 4)
    assert match.gt_voxels.tolist() == [1, 0, 1] and match.pred_voxels.tolist() == [0, 0, 0, 1]
    assert match.max_iou.tolist() == [0, 0, 0, 0] and match.hit_label.tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("gt_on,pred_on", [(True, False), (False, True), (False, False)])
def test_empty_volumes_give_no_iou_and_plain_voxel_sums(gt_on, pred_on):
    gt, pred = volume(), volume()
    if gt_on:
        gt[0:2, 0:2, 0:2] = 1
    if pred_on:
        pred[0:3, 0:3, 0:3] = 1
    match = m.match_instances(gt, pred)
    assert match.iou.size == 0
    # §2 case 1: union = #gt, case 2: union = #pred
    assert (match.inter, match.union, match.y_true, match.y_pred) == (0, 8 * gt_on + 27 * pred_on, 8 * gt_on,
                                                                      27 * pred_on)


def reference_iou(gt, pred):
    """Slow transcription of §2 with scipy: label, regionprops order by first voxel, assignment."""
    num_gt, num_pred = int(gt.max()), int(pred.max())
    iou = np.zeros((num_gt, num_pred))
    if num_gt == 0 or num_pred == 0:
        return iou
    full = np.ones((3, 3, 3))
    union, _ = ndimage.label((gt > 0) | (pred > 0), full)
    inter, count = ndimage.label((gt > 0) & (pred > 0), full)
    components = sorted((tuple(np.argwhere(inter == c)[0]), int((inter == c).sum())) for c in range(1, count + 1))
    for anchor, area in components:
        iou[gt[anchor] - 1, pred[anchor] - 1] = area / ((union == union[anchor]).sum() + 1e-8)
    return iou


def test_component_iou_matches_a_slow_transcription_on_random_blobs():
    rng = np.random.default_rng(3)
    for trial in range(40):
        shape = tuple(int(s) for s in rng.integers(4, 12, 3))
        gt, pred = np.zeros(shape, np.uint8), np.zeros(shape, np.uint8)
        for target, count in ((gt, rng.integers(0, 5)), (pred, rng.integers(0, 6))):
            for label in range(1, count + 1):
                low = rng.integers(0, shape)
                high = np.minimum(low + rng.integers(1, 4, 3), shape)
                target[low[0]:high[0], low[1]:high[1], low[2]:high[2]] = label
        layout = np.asfortranarray if trial % 2 else np.ascontiguousarray
        match = m.match_instances(layout(gt), layout(pred))
        assert match.iou.tolist() == reference_iou(gt, pred).tolist(), trial


def same_partition(labels: np.ndarray, reference: np.ndarray) -> bool:
    """Whether two labellings mark the same voxels and group them alike (the numbers themselves may differ)."""
    a, b = labels.ravel(), reference.ravel()
    if ((a == 0) != (b == 0)).any():
        return False
    pairs = set(zip(a[a > 0].tolist(), b[b > 0].tolist()))
    return len(pairs) == len({x for x, _ in pairs}) == len({y for _, y in pairs})


def sparse_and_checkerboard_masks(shape: tuple, rng) -> list:
    """Checkerboards (every parity), stripes, every third voxel and random masks from sparse to dense."""
    parity = np.indices(shape).sum(axis=0)
    masks = [parity % 2 == 0, parity % 2 == 1, parity % 3 == 0, np.indices(shape)[0] % 2 == 0]
    masks += [rng.random(shape) < p for p in (0.03, 0.1, 0.3, 0.6, 0.9) for _ in range(3)]
    return masks


def test_components_match_scipy_label_on_sparse_and_checkerboard_masks_of_every_shape():
    """§2.2: `_components_in_box` groups voxels as a full-connectivity (26) labelling does (scipy here, scikit-image
    in tests/reference), on every shape up to 6 x 6 x 6 and a few longer ones: cc3d 4.1.1 fails on bool masks of
    isolated voxels ('maximum length exception')."""
    rng = np.random.default_rng(40)
    full = np.ones((3, 3, 3), bool)
    shapes = [(x, y, z) for x in range(1, 7) for y in range(1, 7) for z in range(1, 7)]
    shapes += [(1, 1, 40), (40, 1, 1), (2, 33, 2), (17, 9, 5)]
    for shape in shapes:
        for mask in sparse_and_checkerboard_masks(shape, rng):
            if not mask.any():
                continue
            coords = np.stack(np.nonzero(mask))
            labels = np.zeros(shape, np.intp)
            labels[tuple(coords)] = m._components_in_box(coords)
            assert same_partition(labels, ndimage.label(mask, full)[0]), (shape, mask.astype(int).tolist())


def test_two_overlap_voxels_two_apart_are_scored():
    """A thin prediction touching a fracture at two points 2 voxels apart (the issue's simplest failing case)."""
    gt, pred = volume((5, 3, 3)), volume((5, 3, 3))
    gt[0:5, 0, 0] = 1
    pred[0, 0, 0] = pred[2, 0, 0] = 1
    match = m.match_instances(gt, pred)
    # two intersection components of one voxel, both (1, 1); the union component is GT 1's 5 voxels
    assert match.iou.tolist() == [[1 / (5 + EPS)]] and match.hit_label.tolist() == [1]


def test_foreground_indices_handles_sizes_not_divisible_by_8():
    a = np.zeros(37, np.uint8)
    b = np.zeros(37, np.uint8)
    a[[0, 9, 36]] = 1
    b[[9, 20, 35]] = 7
    assert m.foreground_indices(a, b, chunk=2).tolist() == [0, 9, 20, 35, 36]


# ---------------------------------------------------------------- §2 merges -> detection rows

def match_with(num_gt, max_iou, hit_label):
    n = len(max_iou)
    return m.InstanceMatch(num_gt=num_gt, num_pred=n, iou=np.zeros((num_gt, n)), max_iou=np.array(max_iou),
                           hit_label=np.array(hit_label), gt_voxels=np.zeros(num_gt), pred_voxels=np.zeros(n),
                           overlap=np.zeros((num_gt + 1, n + 1)), inter=0, union=0, y_true=0, y_pred=0)


def test_rows_duplicate_with_duplicate_csv_rows_and_take_classes_from_the_merges():
    gt_rows = [GTRow(0, 0), GTRow(1, 1), GTRow(1, 4)]        # GT label 1 listed twice (Displaced, Segmental)
    pred_rows = [PredRow(0, 0.5, 0), PredRow(1, 0.9, 3), PredRow(1, 0.4, 2), PredRow(2, 0.7, 1),
                 PredRow(3, 0.6, 1)]
    match = match_with(2, [0.5, 0.0, 0.3], [1, 0, 2])
    rows = m.detection_rows(match, gt_rows, pred_rows)
    # pred 1: 2 CSV rows x 2 GT rows = 4 rows; pred 2: non-hit -> GT label-0 row "Background";
    # pred 3: hits GT 2 which has no CSV row -> "FP"
    assert [(r["pred_label"], r["prob"], r["pred_class"], r["gt_class"]) for r in rows] == [
        (1, 0.9, "Buckle", "Displaced"), (1, 0.9, "Buckle", "Segmental"),
        (1, 0.4, "Nondisplaced", "Displaced"), (1, 0.4, "Nondisplaced", "Segmental"),
        (2, 0.7, "Displaced", "Background"), (3, 0.6, "Displaced", "FP")]


def test_non_hit_without_background_row_is_fp_and_empty_gt_skips_the_gt_merge():
    rows = m.detection_rows(match_with(1, [0.0], [0]), [GTRow(1, 2)], [PredRow(1, 0.3, 2)])
    assert rows[0]["gt_class"] == "FP"
    rows = m.detection_rows(match_with(0, [0.0], [0]), [GTRow(0, 0), GTRow(0, 0)], [PredRow(1, 0.3, 2)])
    assert [r["gt_class"] for r in rows] == ["FP"]        # num_gt == 0: no merge, so no duplication


def test_empty_prediction_volume_has_no_rows_and_a_missing_row_is_an_error():
    assert m.detection_rows(match_with(2, [], []), [GTRow(1, 1)], [PredRow(1, 0.3, 2)]) == []
    with pytest.raises(m.MissingPredictionRow, match="label 2"):
        m.detection_rows(match_with(1, [0.0, 0.0], [0, 0]), [], [PredRow(1, 0.3, 2)])


def test_codes_mapping_to_nan_are_read_only_where_the_official_merges_read_them():
    # prediction rows of label 0 or above num_pred are never merged: their code (None = NaN) and text confidence
    # do not matter; a GT row of code NaN hit by a prediction gives "FP", as a label without a row would
    text = "'x' (no number)"
    pred_rows = [PredRow(0, 0.5, None, confidence_text=text), PredRow(1, 0.9, 3), PredRow(2, 0.4, 1),
                 PredRow(3, 0.1, None, confidence_text=text)]
    gt_rows = [GTRow(0, None), GTRow(1, None)]
    rows = m.detection_rows(match_with(1, [0.5, 0.0], [1, 0]), gt_rows, pred_rows)
    assert [(r["pred_label"], r["gt_class"]) for r in rows] == [(1, "FP"), (2, "FP")]
    assert m.confusion_matrix(rows, gt_rows).tolist() == m.confusion_matrix(rows, []).tolist()
    # a merged prediction row with code NaN or a confidence held as text: the official code fails
    with pytest.raises(m.UnreadableRow, match="prediction label 2: label_code '9' maps to NaN") as error:
        m.detection_rows(match_with(1, [0.5, 0.0], [1, 0]), gt_rows,
                         [PredRow(1, 0.9, 3), PredRow(2, 0.4, None, code_text="9")])
    assert error.value.row.label_id == 2
    with pytest.raises(m.UnreadableRow, match="prediction label 1: confidence 'x': .*TypeError"):
        m.detection_rows(match_with(1, [0.5], [1]), gt_rows, [PredRow(1, 0.9, 3, confidence_text="'x'")])


@pytest.mark.parametrize("hit_labels, label, why", [
    ([], 1, "the case has no prediction"),        # no prediction rows: every GT row is looked up
    ([1], 0, "no prediction misses"),             # the background row, label 0, is "detected" by a miss only
    ([0], 2, "no prediction hits it"),            # e.g. a label above the mask's maximum
])
def test_gt_code_nan_fails_where_the_fn_count_looks_it_up(hit_labels, label, why):
    rows = [row(k + 1, 0.5 if hit else 0.0, hit, 0.5, "Buckle", "Buckle") for k, hit in enumerate(hit_labels)]
    gt_rows = [GTRow(0, 0), GTRow(1, 1), GTRow(label, None, code_text="7")]
    with pytest.raises(m.UnreadableRow, match=f"ground-truth label {label}: label_code '7' maps to NaN .*{why}"):
        m.confusion_matrix(rows, gt_rows)


# ---------------------------------------------------------------- §4 confusion matrix

def test_confusion_matrix_rules():
    gt_rows = [GTRow(0, 0), GTRow(1, 1), GTRow(2, 2), GTRow(3, -1), GTRow(4, 3), GTRow(5, 4), GTRow(6, 1)]
    rows = [
        row(1, 0.5, 1, 0.9, "Buckle", "Displaced"),        # M[Buckle, Displaced]
        row(2, 0.01, 1, 0.1, "Displaced", "Displaced"),    # any overlap counts, no confidence threshold
        row(3, 0.0, 0, 0.8, "Segmental", "Background"),    # -> M[Segmental, FP]
        row(4, 0.4, 3, 0.7, "Nondisplaced", "Ignore"),     # -> M[Nondisplaced, Ignore]
        row(5, 0.4, 2, 0.7, "Background", "Nondisplaced"),  # skipped, but GT 2 counts as detected
        row(6, 0.4, 5, 0.7, "Ignore", "Segmental"),         # skipped, GT 5 detected
    ]
    matrix = m.confusion_matrix(rows, gt_rows)
    expected = np.zeros((5, 6), int)
    expected[0, 1] = 1
    expected[1, 1] = 1
    expected[3, 4] = 1
    expected[2, 5] = 1
    expected[4, 0] = 1   # GT 4 (Buckle) not hit -> FN
    expected[4, 1] = 1   # GT 6 (Displaced) in the CSV but hit by nobody -> FN
    assert matrix.tolist() == expected.tolist()


def test_no_prediction_rows_makes_every_non_background_gt_row_a_false_negative():
    gt_rows = [GTRow(0, 0), GTRow(1, 4), GTRow(2, 4), GTRow(3, -1)]
    matrix = m.confusion_matrix([], gt_rows)
    assert matrix[4].tolist() == [0, 0, 0, 2, 0, 1] and matrix[:4].sum() == 0


# ---------------------------------------------------------------- §3 FROC

def test_froc_counts_per_threshold():
    case_a = [row(1, 0.5, 1, 0.07),     # TP at t <= 0.06 only: 0.07 < np.arange's 0.07000000000000001
              row(2, 0.3, 1, 0.9),      # second hit on GT 1: distinct hit labels -> still 1 TP
              row(3, 0.2, 2, 0.5),      # max_iou == 0.2 is not a hit -> FP
              row(4, 0.0, 0, -0.5)]     # negative confidence: never selected
    case_b = []                         # no rows: counts in N only
    fp, recall = m.froc_points([case_a, case_b], num_gt_total=4, num_cases=2)
    assert m.THRESHOLDS[7] == 0.07000000000000001
    # t = 0.00 .. 0.07: TP = {1} (rows 1, 2), FP = 1 (row 3)
    assert fp[0] == (1 + EPS) / (2 + EPS) and recall[0] == (1 + EPS) / (4 + EPS)
    assert fp[7] == (1 + EPS) / (2 + EPS) and recall[7] == (1 + EPS) / (4 + EPS)
    # t = 0.51: only row 2 (TP of GT 1), no FP
    assert fp[51] == EPS / (2 + EPS) and recall[51] == (1 + EPS) / (4 + EPS)
    # t = 0.91 .. 0.99: nothing: recall = 1e-8 / (4 + 1e-8), not 0
    assert recall[99] == EPS / (4 + EPS)


def test_froc_without_any_ground_truth_has_recall_one():
    fp, recall = m.froc_points([[row(1, 0.0, 0, 0.5)]], num_gt_total=0, num_cases=1)
    assert recall[0] == 1.0 and fp[0] == (1 + EPS) / (1 + EPS)


def test_key_recall_boundaries_and_interpolation():
    fp = [3.0, 1.0, 0.25]
    recall = [0.9, 0.6, 0.3]
    # k=0.5: less -> (0.25, 0.3), more -> (1.0, 0.6): 0.3 + 0.3 * (0.25 / (0.75 + 1e-8))
    # k=1: fp0 = fp1 = 1 -> 0.6; k=2: between 1 and 3: 0.6 + 0.3 * (1 / (2 + 1e-8)); k=4, 8: no "more" -> max recall
    assert m.key_recalls(fp, recall) == [0.3 + 0.3 * (0.25 / (0.75 + EPS)), 0.6, 0.6 + 0.3 * (1 / (2 + EPS)), 0.9, 0.9]
    assert m.key_recalls([0.6, 0.7], [0.1, 0.2], (0.5,)) == [0.0]   # nothing at fp <= k -> 0


def test_numpy122_introsort_on_seventeen_equal_values():
    # n = 17 > 16 -> one partition. Pivot = middle (index 8), moved to position 15; the scans stop at every
    # element (equal values) and swap positions (1,14) (2,13) ... (6,9), then (7,8) where index 15 sits; they
    # cross at 8 and the pivot returns there; both halves (8 elements each) are then insertion-sorted (no moves).
    assert m.numpy122_argsort([1.0] * 17) == [0, 14, 13, 12, 11, 10, 9, 15, 8, 6, 5, 4, 3, 2, 1, 7, 16]


def test_tie_order_changes_the_key_recall():
    fp = [2.0] * 8 + [1.0] * 9
    recall = [(17 - i) / 20 for i in range(17)]
    # Median of 3 swaps indices 0, 8, 16 (values 2, 1, 1) to positions 16, 0, 8; the partition then gives the
    # order [8, 14, 13, 12, 11, 10, 9, 15, 16 | 6, 5, 4, 3, 2, 1, 7, 0] (fp 1 group, then the fp 2 group).
    assert m.numpy122_argsort(fp) == [8, 14, 13, 12, 11, 10, 9, 15, 16, 6, 5, 4, 3, 2, 1, 7, 0]
    # k = 2: last point with fp <= 2 is index 0 (recall 0.85); a stable sort puts index 7 last (recall 0.5).
    # k = 1.5: between the last fp-1 point (index 16, 0.05) and the first fp-2 point: index 6 (0.55) vs 0 (0.85).
    assert m.key_recalls(fp, recall, (1.5, 2)) == [0.05 + (0.55 - 0.05) * (0.5 / (1 + EPS)), 0.85]
    assert m.key_recalls(fp, recall, (1.5, 2), "stable") == [0.05 + (0.85 - 0.05) * (0.5 / (1 + EPS)), 0.5]


def test_numpy122_argsort_reproduces_numpy_quicksort_orders():
    cases = json.loads((FIXTURES / "numpy122_argsort_cases.json").read_text())["cases"]
    assert len(cases) == 27
    for case in cases:
        assert m.numpy122_argsort(case["values"]) == case["order"]


# ---------------------------------------------------------------- §5 F1, §6 Dice/IoU

def test_f1_scores_by_hand():
    matrix = np.zeros((5, 6))
    matrix[0, 0] = 2      # Buckle: tp 2
    matrix[0, 4] = 2      # Buckle predicted on 2 detection FPs
    matrix[4, 0] = 1      # one Buckle missed
    matrix[1, 2] = 1      # Displaced predicted on a Nondisplaced GT
    matrix[2, 5] = 3      # Ignore column is dropped
    f1 = m.f1_scores(matrix)
    # Buckle: tp 2, fp 2 (FP column), fn 1 (FN row). Others: tp 0 -> F1 0.
    p, r = 2 / (4 + EPS), 2 / (3 + EPS)
    assert f1["macro_f1"] == np.mean([2 * p * r / (p + r + EPS), 0.0, 0.0, 0.0])
    pt = 2 / (2 + EPS)                      # target-aware: FP column removed
    assert f1["target_aware_f1"] == np.mean([2 * pt * r / (pt + r + EPS), 0.0, 0.0, 0.0])
    rp = 2 / (2 + EPS)                      # prediction-aware: FN row removed too
    assert f1["prediction_aware_f1"] == np.mean([2 * pt * rp / (pt + rp + EPS), 0.0, 0.0, 0.0])


def test_segmentation_scores():
    assert m.segmentation_scores(3, 10, 5, 8) == {"dice": 6 / (13 + EPS), "iou": 3 / (10 + EPS)}
    assert m.segmentation_scores(0, 0, 0, 0) == {"dice": 0.0, "iou": 0.0}
