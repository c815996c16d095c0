"""The official evaluation's outputs on the example (fixtures/, copied from the reference examples) reproduced
exactly: master branch (online evaluation) and legacy branch (MICCAI 2020 ranking)."""

import json
from pathlib import Path

import pytest

from medchallenge.evaluators.ribfrac import main

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    out = tmp_path_factory.mktemp("master")
    assert main(["--input", str(FIXTURES / "pred"), "--ground-truth", str(FIXTURES / "gt"), "--output", str(out),
                 "--workers", "1", "--no-progress"]) == 0
    return json.loads((out / "metrics.json").read_text()), out


def expected(branch):
    return json.loads((FIXTURES / f"expected_output_{branch}.json").read_text())


def test_master_aggregates_bit_for_bit(master):
    metrics, _ = master
    results = expected("master")["results"]
    detection, classification = results["detection"], results["classification"]
    assert metrics["aggregates"] == {
        "froc_average": detection["average_recall"],
        "recall_at_fp_0.5": detection["key_recall"][0],
        "recall_at_fp_1": detection["key_recall"][1],
        "recall_at_fp_2": detection["key_recall"][2],
        "recall_at_fp_4": detection["key_recall"][3],
        "recall_at_fp_8": detection["key_recall"][4],
        "max_recall": detection["max_recall"],
        "average_fp_at_max_recall": detection["average_fp_at_max_recall"],
        "macro_f1": classification["macro_average_F1"],
        "target_aware_f1": classification["target_aware_F1"],
        "prediction_aware_f1": classification["prediction_aware_F1"],
        "dice": results["segmentation"]["dice"],
        "iou": results["segmentation"]["iou"],
    }


def test_master_curve_and_confusion_matrix(master):
    metrics, out = master
    detection = expected("master")["results"]["detection"]
    froc = metrics["meta"]["details"]["froc"]
    assert froc["fp"] == detection["fp"] and froc["recall"] == detection["recall"]
    assert froc["key_recall"] == detection["key_recall"]
    official = expected("master")["results"]["classification"]["confusion_matrix"]
    matrix = metrics["meta"]["details"]["confusion_matrix"]
    assert (matrix["rows"], matrix["columns"]) == (official["index"], official["columns"])
    assert matrix["data"] == official["data"]
    assert (out / "froc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "confusion_matrix.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_master_per_case_rows(master):
    metrics, _ = master
    for official in expected("master")["per_case"]:
        case = metrics["case"][official["public_id"]]
        assert case["num_gt"] == official["num_gt"]
        assert case["confusion_matrix"] == official["confusion_matrix"]["data"]
        assert [case["inter"], case["union"], case["y_true"], case["y_pred"]] == [
            official["inter_sum"], official["union_sum"], official["y_true_sum"], official["y_pred_sum"]]
        keys = ("pred_label", "max_iou", "hit_label", "prob", "pred_class", "gt_class")
        assert [{k: row[k] for k in keys} for row in case["detections"]] == [
            {k: row[k] for k in keys} for row in official["pred_metrics"]]


def test_example_exercises_the_component_quirk(master):
    # RibFrac901 pred 1 lies inside GT 1 (its voxels overlap GT 1) but gets IoU 0: the touching pred 2 owns the
    # first voxel of their common intersection component (ribfrac.md §2.2).
    case = json.loads(json.dumps(master[0]["case"]["RibFrac901"]))
    pred1 = next(row for row in case["detections"] if row["pred_label"] == 1)
    assert pred1["max_iou"] == 0.0 and pred1["voxels"] > 0


def test_legacy_branch(tmp_path):
    assert main(["--input", str(FIXTURES / "pred"), "--ground-truth", str(FIXTURES / "gt"), "--output",
                 str(tmp_path), "--workers", "1", "--no-progress", "--branch", "legacy"]) == 0
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    results = expected("legacy")["results"]
    keys = results["detection"]["key_recall"]
    assert metrics["aggregates"] == {
        "froc_average": results["detection"]["average_recall"],
        "recall_at_fp_0.5": keys[0], "recall_at_fp_1": keys[1], "recall_at_fp_2": keys[2],
        "recall_at_fp_4": keys[3], "recall_at_fp_8": keys[4],
        "macro_f1": results["classification"]["macro_average_F1"],
    }
    details = metrics["meta"]["details"]
    assert details["froc"]["fp"] == results["detection"]["fp"]
    assert details["confusion_matrix"]["data"] == results["classification"]["confusion_matrix"]["data"]
    assert metrics["meta"]["options"]["branch"] == "legacy"


def test_stable_tie_order_differs_on_the_example(tmp_path):
    # The fp = 1.0 rows are thresholds 0.31..0.69; a stable sort keeps 0.69 (recall 1e-8/6) last among them,
    # numpy 1.22's quicksort puts a recall-1/3 row there (the official 0.33333333444444446).
    assert main(["--input", str(FIXTURES / "pred"), "--ground-truth", str(FIXTURES / "gt"), "--output",
                 str(tmp_path), "--workers", "1", "--no-progress", "--no-plots", "--tie-order", "stable"]) == 0
    aggregates = json.loads((tmp_path / "metrics.json").read_text())["aggregates"]
    assert aggregates["recall_at_fp_1"] == (0 + 1e-8) / (6 + 1e-8)
    assert not (tmp_path / "froc.png").exists()
