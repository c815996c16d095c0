"""RibFrac evaluator end to end: synthetic cohorts in both layouts, records/shards, bad inputs (one line, exit 1)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from medchallenge.evaluators.ribfrac import main
from medchallenge.synth.__main__ import main as synth_main
from medchallenge.synth.ribfrac import write_volume

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]
AGGREGATE_KEYS = ["froc_average", "recall_at_fp_0.5", "recall_at_fp_1", "recall_at_fp_2", "recall_at_fp_4",
                  "recall_at_fp_8", "max_recall", "average_fp_at_max_recall", "macro_f1", "target_aware_f1",
                  "prediction_aware_f1", "dice", "iou"]


def synth(out: Path, layout: str) -> Path:
    assert synth_main(["ribfrac", "--out", str(out), "--cases", "6", "--shape", "48", "40", "32", "--seed", "5",
                       "--layout", layout]) == 0
    return out


@pytest.fixture(scope="module")
def cohorts(tmp_path_factory):
    base = tmp_path_factory.mktemp("synth")
    return synth(base / "files", "files"), synth(base / "gc", "gc")


def evaluate(inputs: Path, gt: Path, out: Path, *extra: str) -> dict:
    assert main(["--input", str(inputs), "--ground-truth", str(gt), "--output", str(out), "--no-progress",
                 *extra]) == 0
    return json.loads((out / "metrics.json").read_text())


def test_synthetic_cohort_end_to_end(cohorts, tmp_path):
    files, _ = cohorts
    metrics = evaluate(files / "predictions", files / "ground_truth", tmp_path, "--workers", "2")
    assert list(metrics["aggregates"]) == AGGREGATE_KEYS
    assert all(np.isfinite(v) for v in metrics["aggregates"].values())
    assert 0 < metrics["aggregates"]["froc_average"] <= 1
    assert sorted(metrics["case"]) == [f"RibFrac{501 + i}" for i in range(6)]
    case = metrics["case"]["RibFrac501"]
    assert {"num_gt", "num_pred", "detections", "ground_truth", "confusion_matrix", "inter", "union"} <= set(case)
    assert metrics["meta"]["options"] == {"strict": False, "branch": "master", "tie_order": "numpy122"}
    assert metrics["meta"]["layout"] == "files"
    # the generator made an empty-GT case (index 4) and an empty-prediction case (index 5)
    assert metrics["case"]["RibFrac505"]["num_gt"] == 0 and metrics["case"]["RibFrac506"]["num_pred"] == 0
    assert (tmp_path / "froc.png").is_file() and (tmp_path / "confusion_matrix.png").is_file()


def test_grand_challenge_layout_gives_the_same_numbers(cohorts, tmp_path):
    files, gc = cohorts
    assert (gc / "predictions" / "predictions.json").is_file()
    from_files = evaluate(files / "predictions", files / "ground_truth", tmp_path / "a", "--workers", "1")
    from_gc = evaluate(gc / "predictions", gc / "ground_truth", tmp_path / "b", "--workers", "1")
    assert from_gc["aggregates"] == from_files["aggregates"]
    assert from_gc["case"] == from_files["case"]
    assert from_gc["meta"]["layout"] == "grand-challenge predictions.json"


def test_records_resume_and_shards_agree(cohorts, tmp_path):
    files, _ = cohorts
    args = (files / "predictions", files / "ground_truth")
    whole = evaluate(*args, tmp_path / "whole", "--workers", "1", "--no-plots")
    records = tmp_path / "records"
    for shard in ("1/2", "2/2"):
        assert main(["--input", str(args[0]), "--ground-truth", str(args[1]), "--output", str(tmp_path / "x"),
                     "--records", str(records), "--shard", shard, "--workers", "1", "--no-progress"]) == 0
    assert len(list(records.glob("*.json"))) == 6 and not (tmp_path / "x" / "metrics.json").exists()
    merged = evaluate(*args, tmp_path / "merged", "--records", str(records), "--workers", "1", "--no-plots")
    assert merged["aggregates"] == whole["aggregates"] and merged["case"] == whole["case"]


def test_empty_predictions_are_valid(tmp_path):
    gt = tmp_path / "gt"
    pred = tmp_path / "pred"
    shutil.copytree(FIXTURES / "gt", gt)
    pred.mkdir()
    for case in ("RibFrac901", "RibFrac902", "RibFrac903", "RibFrac904"):
        write_volume(pred / f"{case}.nii.gz", np.zeros((48, 48, 24), np.uint8))
    (pred / "pred.csv").write_text("public_id,label_id,confidence,label_code\n")
    aggregates = evaluate(pred, gt, tmp_path / "out", "--workers", "1")["aggregates"]
    # no rows anywhere: fp = 1e-8/(4+1e-8) < 0.5 everywhere and no point reaches 0.5 -> max recall 1e-8/(6+1e-8)
    assert aggregates["recall_at_fp_0.5"] == 1e-8 / (6 + 1e-8) and aggregates["macro_f1"] == 0.0
    assert aggregates["dice"] == 0.0 and aggregates["iou"] == 0.0


def test_evaluate_py_runs_as_a_script(tmp_path):
    result = subprocess.run([sys.executable, str(REPO / "evaluators" / "ribfrac" / "evaluate.py"), "--input",
                             str(FIXTURES / "pred"), "--ground-truth", str(FIXTURES / "gt"), "--output",
                             str(tmp_path), "--no-progress", "--no-plots", "--workers", "1"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "metrics.json").read_text())["aggregates"]["froc_average"] == 0.36666666772222223


# ---------------------------------------------------------------- bad input: one line, exit 1

@pytest.fixture
def example(tmp_path):
    shutil.copytree(FIXTURES / "gt", tmp_path / "gt")
    shutil.copytree(FIXTURES / "pred", tmp_path / "pred")
    return tmp_path


def fails(example, capsys, *extra) -> str:
    code = main(["--input", str(example / "pred"), "--ground-truth", str(example / "gt"), "--output",
                 str(example / "out"), "--no-progress", "--workers", "1", *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and err[0].startswith("error: "), err
    assert not (example / "out" / "metrics.json").exists()
    return err[0]


def edit_pred_csv(example, old: str, new: str) -> None:
    path = example / "pred" / "ribfrac-val-pred.csv"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_missing_and_extra_cases(example, capsys):
    (example / "pred" / "RibFrac904.nii.gz").unlink()
    shutil.copy(example / "pred" / "RibFrac901.nii.gz", example / "pred" / "RibFrac999.nii.gz")
    line = fails(example, capsys)
    assert "missing 1 case(s): RibFrac904" in line and "not in the ground truth: RibFrac999" in line


def test_shape_mismatch(example, capsys):
    write_volume(example / "pred" / "RibFrac903.nii.gz", np.zeros((48, 48, 23), np.uint8))
    line = fails(example, capsys)
    assert "case RibFrac903" in line and "shape" in line


def test_more_than_255_labels(example, capsys):
    labels = np.zeros((48, 48, 24), np.uint16)
    labels[0, 0, 0] = 300
    write_volume(example / "pred" / "RibFrac902.nii.gz", labels, np.uint16)
    line = fails(example, capsys)
    assert "RibFrac902.nii.gz" in line and "0..255" in line


def test_mask_label_without_a_row(example, capsys):
    edit_pred_csv(example, "RibFrac901,4,0.7,4\n", "")
    line = fails(example, capsys)
    assert "ribfrac-val-pred.csv" in line and "case RibFrac901" in line and "label 4" in line


def test_mask_label_without_a_row_from_a_worker_process(example, capsys):
    edit_pred_csv(example, "RibFrac904,1,0.5,4\n", "")
    line = fails(example, capsys, "--workers", "2")
    assert "case RibFrac904" in line and "label 1" in line


def test_unknown_label_code(example, capsys):
    edit_pred_csv(example, "RibFrac901,5,0.4,2", "RibFrac901,5,0.4,7")
    line = fails(example, capsys)
    assert "ribfrac-val-pred.csv: line 7" in line and "label_code '7'" in line


def edit_gt_csv(example, old: str, new: str) -> None:
    path = example / "gt" / "ribfrac-val-info.csv"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def example_metrics(example, name: str, *extra: str) -> dict:
    return evaluate(example / "pred", example / "gt", example / name, "--workers", "1", "--no-plots", *extra)


def test_label_codes_outside_the_official_mapping_on_rows_it_never_reads(example, capsys):
    # The official example (case: GT labels / prediction labels / hit_label of each prediction):
    # 901: 3 / 6 / 0,1,2,0,3,2; 902: 0 / 1 / 0; 903: 1 / 0 (empty prediction); 904: 2 / 1 / 1.
    # Prediction rows never merged: background rows, 904's label 2 > max 1, 903's (empty mask). GT background rows
    # read only as the class of predictions that hit nothing (901: NaN -> "FP" as "Background" -> "FP") or never
    # (902: no GT label, no merge; its only GT row is "detected" by the miss). Same numbers as the original.
    reference = example_metrics(example, "reference")
    edit_pred_csv(example, "RibFrac901,0,0.5,0", "RibFrac901,0,0.5,9")
    edit_pred_csv(example, "RibFrac904,1,0.5,4\n", "RibFrac904,1,0.5,4\nRibFrac904,2,0.5,-2\nRibFrac903,1,0.5,\n")
    edit_gt_csv(example, "RibFrac901,0,0", "RibFrac901,0,8")
    edit_gt_csv(example, "RibFrac902,0,0", "RibFrac902,0,NA")
    metrics = example_metrics(example, "accepted")
    assert metrics["aggregates"] == reference["aggregates"]
    assert [d["gt_class"] for d in metrics["case"]["RibFrac901"]["detections"] if d["hit_label"] == 0] == ["FP", "FP"]
    notes = metrics["meta"]["notes"]
    assert any(n.startswith("2 ground-truth row(s) with a label_code that maps to NaN") and "line 2 ('8')" in n
               for n in notes)
    assert any(n.startswith("3 prediction row(s) with a label_code that maps to NaN") and "line 2 ('9')" in n
               for n in notes)
    assert "line 2: label_code '8' maps to NaN" in fails(example, capsys, "--strict")


def test_ground_truth_code_of_a_hit_label_outside_the_mapping_is_fp_as_without_a_row(example):
    # 901's GT label 3 (Ignore) is hit by prediction 5 (Nondisplaced): with code 9 the official merge gives NaN ->
    # "FP", exactly as when the row is missing: M[Nondisplaced, Ignore] 1 -> M[Nondisplaced, FP] 1. Summed matrix,
    # classes B D N S: tp 0 0 1 1, fp 1 2 1 1 (N: 0 before), fn 1 1 0 1 -> F1 0, 0, N, S below.
    edit_gt_csv(example, "RibFrac901,3,-1", "RibFrac901,3,9")
    metrics = example_metrics(example, "code9")
    p_n, r_n, p_s = 1 / (1 + 1 + 1e-8), 1 / (1 + 0 + 1e-8), 1 / (1 + 1 + 1e-8)
    f1 = [0.0, 0.0, (2 * p_n * r_n) / (p_n + r_n + 1e-8), (2 * p_s * p_s) / (p_s + p_s + 1e-8)]
    assert metrics["aggregates"]["macro_f1"] == np.mean(f1)
    edit_gt_csv(example, "RibFrac901,3,9\n", "")
    assert example_metrics(example, "no-row")["aggregates"] == metrics["aggregates"]


@pytest.mark.parametrize("old, new, message", [
    # not hit by any prediction: the FN count looks the class up (KeyError)
    ("RibFrac904,2,4", "RibFrac904,2,9", "line 11: case RibFrac904: ground-truth label 2: label_code '9' maps to NaN"),
    # a label above the mask's maximum is never hit either, so the official code reads it too
    ("RibFrac904,2,4", "RibFrac904,2,4\nRibFrac904,7,", "line 12: case RibFrac904: ground-truth label 7"),
    # background rows: 903 has no prediction; no prediction of 904 misses (its hit_labels are {1})
    ("RibFrac903,0,0", "RibFrac903,0,5", "case RibFrac903: ground-truth label 0: label_code '5' maps to NaN (not one "
                                         "of -1..4) and the case has no prediction"),
    ("RibFrac904,0,0", "RibFrac904,0,5", "case RibFrac904: ground-truth label 0: label_code '5' maps to NaN (not one "
                                         "of -1..4) and no prediction misses (hit_label 0)"),
])
def test_ground_truth_codes_outside_the_mapping_that_the_official_code_reads(example, capsys, old, new, message):
    edit_gt_csv(example, old, new)
    assert message in fails(example, capsys)


def test_bad_confidence_and_missing_column(example, capsys):
    # 'high' makes pandas read the whole column as text: the first row the FROC compares (901, label 1) fails
    edit_pred_csv(example, "RibFrac902,1,0.95,1", "RibFrac902,1,high,1")
    assert ("line 3: case RibFrac901: prediction label 1: confidence '0.9' (held as text: line 10's confidence is no "
            "number for pandas)") in fails(example, capsys)
    (example / "gt" / "ribfrac-val-info.csv").write_text("public_id,label_id\nRibFrac901,0\n")
    assert "missing column(s) label_code" in fails(example, capsys)


def test_csv_count(example, capsys):
    shutil.copy(example / "pred" / "ribfrac-val-pred.csv", example / "pred" / "second.csv")
    assert "expected exactly one .csv file, found 2" in fails(example, capsys)
    for path in (example / "pred").glob("*.csv"):
        path.unlink()
    assert "found 0 (none)" in fails(example, capsys)


def gc_copy(cohorts, tmp_path) -> tuple[list[str], Path, list[dict]]:
    """A writable copy of the synthetic GC cohort: the evaluator arguments, the predictions folder, its jobs."""
    _, gc = cohorts
    shutil.copytree(gc, tmp_path / "gc")
    predictions = tmp_path / "gc" / "predictions"
    args = ["--input", str(predictions), "--ground-truth", str(tmp_path / "gc" / "ground_truth"), "--output",
            str(tmp_path / "out"), "--no-progress", "--workers", "1", "--no-plots"]
    return args, predictions, json.loads((predictions / "predictions.json").read_text())


def gc_metrics(args: list[str]) -> dict:
    assert main(args) == 0
    return json.loads((Path(args[args.index("--output") + 1]) / "metrics.json").read_text())


def test_gc_uploads_under_other_names_match_their_case(cohorts, tmp_path):
    args, predictions, jobs = gc_copy(cohorts, tmp_path)
    original = gc_metrics(args)
    names = ["RibFrac501.mha", "RibFrac502-image.NII.GZ", "RibFrac503.nii", "ribs/RibFrac504-image.mha"]
    for job, name in zip(jobs, names):
        job["inputs"][0]["image"]["name"] = name
    (predictions / "predictions.json").write_text(json.dumps(jobs))
    renamed = gc_metrics(args)
    assert renamed["aggregates"] == original["aggregates"] and renamed["case"] == original["case"]


def test_gc_case_without_a_job_is_an_empty_prediction(cohorts, tmp_path, capsys):
    args, predictions, jobs = gc_copy(cohorts, tmp_path)
    original = gc_metrics(args)
    assert [job["inputs"][0]["image"]["name"] for job in jobs][-1] == "RibFrac506-image.nii.gz"
    assert original["case"]["RibFrac506"]["num_pred"] == 0  # the generator's empty prediction
    (predictions / "predictions.json").write_text(json.dumps(jobs[:-1]))  # its job failed on grand-challenge
    missing = gc_metrics(args)
    assert missing["aggregates"] == original["aggregates"] and missing["case"] == original["case"]
    assert any("no successful job for 1 of 6 ground-truth case(s) (RibFrac506): scored as an empty prediction"
               in note for note in missing["meta"]["notes"])
    # a case with predictions: without its job every fracture of RibFrac501 is missed
    (predictions / "predictions.json").write_text(json.dumps(jobs[1:]))
    without_501 = gc_metrics(args)
    assert without_501["case"]["RibFrac501"]["num_pred"] == 0 and without_501["case"]["RibFrac501"]["detections"] == []
    assert without_501["aggregates"]["froc_average"] < original["aggregates"]["froc_average"]
    assert main([*args, "--strict"]) == 1
    assert "(RibFrac501); --strict refuses missing cases" in capsys.readouterr().err


def test_gc_layout_errors(cohorts, tmp_path, capsys):
    args, predictions, jobs = gc_copy(cohorts, tmp_path)
    (predictions / "predictions.json").write_text(json.dumps(jobs + [jobs[0]]))
    assert main(args) == 1
    assert f"jobs {jobs[0]['pk']} ('RibFrac501-image.nii.gz') and {jobs[0]['pk']} ('RibFrac501-image.nii.gz') " \
           "are both case 'RibFrac501'" in capsys.readouterr().err
    dicom = [dict(jobs[0], inputs=[dict(jobs[0]["inputs"][0], image={"pk": "x", "name": "1.3.12.2.1107-1"})]),
             *jobs[1:]]
    (predictions / "predictions.json").write_text(json.dumps(dicom))
    assert main(args) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"job {jobs[0]['pk']}: input image '1.3.12.2.1107-1' ('ct-image') matches no ground-truth case" in line
    assert "StudyInstanceUID" in line
    job = jobs[0]
    detections = predictions / job["pk"] / "output" / "rib-fracture-detections.json"
    detections.write_text('{"detections": [{"label_id": 1}]}')
    (predictions / "predictions.json").write_text(json.dumps(jobs))
    assert main(args) == 1
    err = capsys.readouterr().err.strip()
    assert "rib-fracture-detections.json: detections[0]" in err and len(err.splitlines()) == 1


def test_nan_and_infinite_confidences_score_as_in_the_official_code(example, tmp_path, capsys):
    # pandas reads a blank confidence as NaN (never >= a threshold, like -1) and inf as a number above all (like 1)
    runs = {}
    for name, (low, high) in {"non-finite": ("", "inf"), "finite": ("-1", "1")}.items():
        shutil.copytree(example, tmp_path / name)
        edit_pred_csv(tmp_path / name, "RibFrac902,1,0.95,1", f"RibFrac902,1,{low},1")
        edit_pred_csv(tmp_path / name, "RibFrac901,5,0.4,2", f"RibFrac901,5,{high},2")
        runs[name] = evaluate(tmp_path / name / "pred", example / "gt", tmp_path / f"out-{name}", "--workers", "1",
                              "--no-plots")
    assert runs["non-finite"]["aggregates"] == runs["finite"]["aggregates"]
    probabilities = {(case, row["pred_label"]): row["prob"] for case in ("RibFrac901", "RibFrac902")
                     for row in runs["non-finite"]["case"][case]["detections"]}
    assert probabilities[("RibFrac902", 1)] is None and probabilities[("RibFrac901", 5)] == 1.0
    assert any("2 prediction row(s) with a NaN" in note for note in runs["non-finite"]["meta"]["notes"])
    assert "--strict refuses them" in fails(tmp_path / "non-finite", capsys, "--strict")


def test_prediction_rows_of_other_public_ids_are_ignored_and_named(example, tmp_path, capsys):
    # the official code selects each case's rows by public_id: rows of other ids are never read
    original = evaluate(example / "pred", example / "gt", tmp_path / "a", "--workers", "1", "--no-plots")
    path = example / "pred" / "ribfrac-val-pred.csv"
    path.write_text(path.read_text() + "RibFrac999,0,0,0\nRibFrac999,1,0.9,1\n")
    extra = evaluate(example / "pred", example / "gt", tmp_path / "b", "--workers", "1", "--no-plots")
    assert extra["aggregates"] == original["aggregates"]
    assert any("2 row(s) for 1 public_id(s) that are not cases ('RibFrac999'): ignored" in note
               for note in extra["meta"]["notes"])
    line = fails(example, capsys, "--strict")
    assert "ribfrac-val-pred.csv: 2 row(s) for 1 public_id(s) that are not cases ('RibFrac999'); --strict" in line
