"""The official TB caverns metric, rule by rule (docs/metrics/tb-caverns-2022.md), with hand-derived values."""

from __future__ import annotations

import numpy as np
import pytest

from medchallenge.evaluators.tb_caverns import aggregate_scores, case_record
from medchallenge.metrics.tb_caverns import IOU_THRESHOLDS, box_iou, case_order, match_counts, mean_average_precision


def line(x1: int, x2: int) -> tuple[int, ...]:
    """A box of extent 1 in y and z, so its IoU is the 1-D interval IoU along x."""
    return (x1, 0, 0, x2, 1, 1)


def test_iou_has_no_plus_one_and_is_continuous():
    # §2: vol = (x2-x1)(y2-y1)(z2-z1) = 1000 and 500; intersection 500; IoU = 500 / (1000 + 500 - 500) = 0.5
    assert box_iou((0, 0, 0, 10, 10, 10), (0, 0, 0, 10, 10, 5)) == 0.5
    # a unit box is a volume of 1 (with +1 it would be 8)
    assert box_iou((0, 0, 0, 1, 1, 1), (0, 0, 0, 1, 1, 1)) == 1.0


def test_touching_flat_and_reversed_boxes_score_zero():
    assert box_iou(line(0, 10), line(10, 20)) == 0.0  # touching faces
    assert box_iou(line(0, 10), line(5, 5)) == 0.0  # flat box
    assert box_iou(line(0, 10), line(8, 2)) == 0.0  # reversed box


def test_literal_thresholds_decide_equality():
    assert IOU_THRESHOLDS == (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75)
    # IoU 13/20 = 0.65 exactly: matched up to 0.65 (>=), not at 0.7, 0.75 -> 6 of 8 thresholds -> 0.75
    record = case_record([line(0, 20)], [line(0, 13)], in_all_ids=True, has_ground_truth=True)
    assert [t["tp"] for t in record.per_threshold] == [1, 1, 1, 1, 1, 1, 0, 0]
    assert record.case_score == 0.75
    # IoU 7/10 == 0.7 matches the literal 0.7; the generated 0.4 + 0.05 * 6 = 0.7000000000000001 would not
    assert 7 / 10 >= 0.7 and not 7 / 10 >= 0.4 + 0.05 * 6
    record = case_record([line(0, 10)], [line(0, 7)], in_all_ids=True, has_ground_truth=True)
    assert record.case_score == 0.875  # 7 of 8 thresholds
    # np.arange gives 0.6499999999999999 for 0.65: the literal list must not be generated
    assert np.arange(0.4, 0.8, 0.05)[5] != 0.65


def test_greedy_first_come_matching_in_file_order():
    # g1=[0,10], g2=[5,15]; p1=[2,12]: IoU(g1)=8/12=0.667, IoU(g2)=7/13=0.538; p2=[0,9]: IoU(g1)=0.9, IoU(g2)=4/15
    gt, pred = [line(0, 10), line(5, 15)], [line(2, 12), line(0, 9)]
    # at 0.5 g1 takes p1 (first in file order, not the best); g2 finds only p2 (0.267) -> tp 1, fp 1, fn 1
    assert match_counts(gt, pred, 0.5) == (1, 1, 1)
    # at 0.7 g1 skips p1 (0.667) and takes p2 (0.9); g2 has p1 at 0.538 -> still tp 1, fp 1, fn 1
    assert match_counts(gt, pred, 0.7) == (1, 1, 1)
    # swapping the prediction order lets both match at 0.5: g1 takes p2 (0.9), g2 takes p1 (0.538)
    assert match_counts(gt, pred[::-1], 0.5) == (2, 0, 0)


def test_duplicate_predictions_are_false_positives():
    # one GT, three identical perfect predictions: tp 1, fp 2 -> 1 / 3 at every threshold
    record = case_record([line(0, 10)], [line(0, 10)] * 3, in_all_ids=True, has_ground_truth=True)
    assert all((t["tp"], t["fp"], t["fn"]) == (1, 2, 0) for t in record.per_threshold)
    assert record.case_score == pytest.approx(1 / 3, abs=1e-15)


def test_case_rules_without_ground_truth_or_predictions():
    assert case_record([line(0, 1)], [], in_all_ids=True, has_ground_truth=True).case_score == 0.0
    assert case_record([], [line(0, 1)], in_all_ids=True, has_ground_truth=False).case_score == 0.0
    assert case_record([], [], in_all_ids=True, has_ground_truth=False).case_score == 1.0


def test_aggregate_rules():
    # ids A (GT, perfect), B (GT, no prediction), C (no GT, no prediction), D (no GT, a prediction)
    gt = {"A": [line(0, 10)], "B": [line(0, 10)]}
    pred = {"A": [line(0, 10)], "D": [line(0, 4)]}
    all_ids = ["A", "B", "C", "D"]
    records = {i: case_record(gt.get(i, []), pred.get(i, []), in_all_ids=True, has_ground_truth=i in gt)
               for i in case_order(list(gt), all_ids)}
    result = aggregate_scores(records, len(all_ids))
    # (A 1 + B 0 + C 1 + D 0) / 4 = 0.5, at every threshold too
    assert result["map"] == 0.5
    assert [result[f"ap_at_iou_{t:.2f}"] for t in IOU_THRESHOLDS] == [0.5] * 8
    assert list(result) == ["map"] + [f"ap_at_iou_{t}" for t in
                                      ("0.40", "0.45", "0.50", "0.55", "0.60", "0.65", "0.70", "0.75")]


def test_ground_truth_outside_the_id_list_still_counts():
    # GT for A and B, id list only A, both perfectly predicted: (1 + 1) / 1 = 2.0 as the official code gives
    records = {i: case_record([line(0, 10)], [line(0, 10)], in_all_ids=i == "A", has_ground_truth=True)
               for i in ("A", "B")}
    assert aggregate_scores(records, 1)["map"] == 2.0


def test_empty_id_list_is_an_error_not_a_division_by_zero():
    with pytest.raises(ValueError, match="empty"):
        mean_average_precision([], 0, 0)
