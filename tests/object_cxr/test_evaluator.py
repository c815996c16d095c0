"""object-CXR evaluator end to end: the official example outputs, synthetic cohorts in both layouts, bad input."""

import argparse
import json
import shutil
from pathlib import Path

import pytest

from medchallenge.evaluators.object_cxr import main
from medchallenge.synth import object_cxr as synth

FIXTURES = Path(__file__).parent / "fixtures"


def official_layout(tmp_path, localization="localization.csv"):
    (tmp_path / "gt").mkdir()
    (tmp_path / "pred").mkdir()
    shutil.copy(FIXTURES / "gt.csv", tmp_path / "gt" / "annotations.csv")
    shutil.copy(FIXTURES / "classification.csv", tmp_path / "pred" / "classification.csv")
    shutil.copy(FIXTURES / localization, tmp_path / "pred" / "localization.csv")
    return tmp_path / "pred", tmp_path / "gt"


def evaluate(pred, gt, out, *extra):
    assert main(["--input", str(pred), "--ground-truth", str(gt), "--output", str(out), "--no-progress", *extra]) == 0
    return json.loads((out / "metrics.json").read_text())


def expected(name):
    return json.loads((FIXTURES / name).read_text())


@pytest.mark.parametrize("rule, name", [("skimage-0.16.2", "expected_output_skimage0162.json"),
                                        ("skimage-0.19", "expected_output_skimage0193.json")])
def test_official_example_both_polygon_rules(tmp_path, rule, name):
    pred, gt = official_layout(tmp_path)
    metrics = evaluate(pred, gt, tmp_path / "out", "--polygon-rule", rule)
    reference = expected(name)
    levels = reference["localization"]["fps"]
    assert metrics["meta"]["options"]["fps"] == levels
    assert [metrics["aggregates"][f"sensitivity_at_fp_{f:g}"] for f in levels] == reference["localization"]["sensitivity"]
    assert metrics["aggregates"]["froc"] == reference["localization"]["froc"]
    assert metrics["aggregates"]["auc"] == reference["classification"]["auc_joined_on_image_path"]
    assert metrics["meta"]["notes"] == []
    assert (tmp_path / "out" / "froc.png").stat().st_size > 0 and (tmp_path / "out" / "roc.png").stat().st_size > 0


def test_official_example_seed_fp_levels(tmp_path):
    pred, gt = official_layout(tmp_path)
    metrics = evaluate(pred, gt, tmp_path / "out", "--fps", "1,2,4,8,16,32", "--no-plots")
    reference = expected("expected_output_fps_1_32.json")["localization"]
    assert [metrics["aggregates"][f"sensitivity_at_fp_{int(f)}"] for f in reference["fps"]] == reference["sensitivity"]
    assert metrics["aggregates"]["froc"] == reference["froc"]
    assert "sensitivity_at_fp_32" in metrics["aggregates"] and "sensitivity_at_fp_0.125" not in metrics["aggregates"]


def test_official_crash_case_gets_documented_value(tmp_path):
    # froc.py: IndexError (no FP at all). The single point (0.9 at 30,30) hits 1 of the 6 objects -> 1/6 everywhere
    assert "IndexError" in expected("expected_output_no_fp_crash.json")["localization"]["error"]
    pred, gt = official_layout(tmp_path, "localization_no_fp.csv")
    metrics = evaluate(pred, gt, tmp_path / "out")
    assert metrics["aggregates"]["froc"] == 1 / 6
    assert all(metrics["aggregates"][f"sensitivity_at_fp_{f}"] == 1 / 6 for f in ("0.125", "1", "8"))
    assert any("IndexError" in note for note in metrics["meta"]["notes"])
    assert [level["reached"] for level in metrics["meta"]["details"]["froc_levels"]] == [False] * 7


def test_per_image_records_of_the_example(tmp_path):
    pred, gt = official_layout(tmp_path)
    case = evaluate(pred, gt, tmp_path / "out", "--no-plots")["case"]
    assert len(case) == 8
    # /dev/00001.jpg: rectangle + ellipse; points (30,30), (31,31) in the rectangle, (140,110) on the ellipse's
    # right end ((140-120)/20)^2 = 1 -> both objects hit, no false positive
    assert case["/dev/00001.jpg"] == {"num_objects": 2, "probability": 0.9, "num_points": 3, "num_objects_hit": 2,
                                      "num_false_positives": 0}
    # /dev/00008.jpg: no object, four points -> four false positives
    assert case["/dev/00008.jpg"]["num_false_positives"] == 4


def test_tied_probabilities_keep_file_order(tmp_path):
    # 2 images, 1 object, level 0.5 FP/image is reached by the first FP (1/2).
    # TP line first: the TP precedes the FP in the stable sort -> sensitivity 1; FP line first -> 0
    (tmp_path / "gt").mkdir()
    (tmp_path / "gt" / "annotations.csv").write_text("image_path,annotation\na.jpg,0 0 0 10 10\nb.jpg,\n")
    for lines, sensitivity in ((["a.jpg,0.5 5 5", "b.jpg,0.5 1 1"], 1.0), (["b.jpg,0.5 1 1", "a.jpg,0.5 5 5"], 0.0)):
        pred = tmp_path / f"pred{sensitivity}"
        pred.mkdir()
        (pred / "localization.csv").write_text("image_path,prediction\n" + "\n".join(lines) + "\n")
        (pred / "classification.csv").write_text("image_path,prediction\na.jpg,0.9\nb.jpg,0.1\n")
        metrics = evaluate(pred, tmp_path / "gt", tmp_path / f"out{sensitivity}", "--fps", "0.5", "--no-plots")
        assert metrics["aggregates"]["sensitivity_at_fp_0.5"] == sensitivity


def synthetic(tmp_path, layout="run-files", images=40, points=8, seed=5):
    out = tmp_path / layout
    synth.run(argparse.Namespace(out=out, images=images, points=points, positive_fraction=0.5, layout=layout,
                                 seed=seed))
    return out / "predictions", out / "ground_truth"


def test_synthetic_end_to_end_and_gc_layout(tmp_path):
    pred, gt = synthetic(tmp_path)
    metrics = evaluate(pred, gt, tmp_path / "out-runs")
    assert set(metrics["aggregates"]) == {"auc", "froc", "sensitivity_at_fp_0.125", "sensitivity_at_fp_0.25",
                                          "sensitivity_at_fp_0.5", "sensitivity_at_fp_1", "sensitivity_at_fp_2",
                                          "sensitivity_at_fp_4", "sensitivity_at_fp_8"}
    assert 0 < metrics["aggregates"]["froc"] < 1 and 0.5 < metrics["aggregates"]["auc"] <= 1
    assert len(metrics["case"]) == 40 and metrics["meta"]["details"]["num_points"] == 320
    gc_pred, gc_gt = synthetic(tmp_path, "gc")
    assert (gc_pred / "predictions.json").is_file()
    gc_metrics = evaluate(gc_pred, gc_gt, tmp_path / "out-gc")
    assert gc_metrics["aggregates"] == metrics["aggregates"]
    assert gc_metrics["case"] == metrics["case"]
    assert gc_metrics["meta"]["layout"] == "grand-challenge predictions.json"
    sk = evaluate(pred, gt, tmp_path / "out-sk", "--sklearn-auc", "--no-plots")
    assert sk["aggregates"] == metrics["aggregates"]


def test_records_and_shards_give_the_same_result(tmp_path, monkeypatch):
    monkeypatch.setattr("medchallenge.evaluators.object_cxr.IMAGES_PER_RECORD", 16)  # 40 images -> 3 blocks
    pred, gt = synthetic(tmp_path)
    whole = evaluate(pred, gt, tmp_path / "whole", "--no-plots")
    records = tmp_path / "records"
    for shard in ("1/2", "2/2"):
        assert main(["--input", str(pred), "--ground-truth", str(gt), "--output", str(tmp_path / "x"),
                     "--records", str(records), "--shard", shard, "--no-progress"]) == 0
    assert len(list(records.glob("*.json"))) == 3
    resumed = evaluate(pred, gt, tmp_path / "resumed", "--records", str(records), "--no-plots")
    assert resumed["aggregates"] == whole["aggregates"] and resumed["case"] == whole["case"]
    two_workers = evaluate(pred, gt, tmp_path / "workers", "--workers", "2", "--no-plots")
    assert two_workers["aggregates"] == whole["aggregates"]


def test_empty_predictions_are_valid(tmp_path):
    pred, gt = official_layout(tmp_path)
    (pred / "localization.csv").write_text("image_path,prediction\n")
    metrics = evaluate(pred, gt, tmp_path / "out")
    assert metrics["aggregates"]["froc"] == 0.0 and metrics["meta"]["notes"]


def run_failing(capsys, pred, gt, tmp_path, *extra):
    assert main(["--input", str(pred), "--ground-truth", str(gt), "--output", str(tmp_path / "out"),
                 "--no-progress", *extra]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")
    return err[0]


def test_bad_inputs_exit_1_with_one_line(tmp_path, capsys):
    pred, gt = official_layout(tmp_path)
    (pred / "localization.csv").write_text("image_path,prediction\n/dev/00001.jpg,0.9  30 30\n")
    assert "localization.csv: line 2: empty field" in run_failing(capsys, pred, gt, tmp_path)
    shutil.copy(FIXTURES / "localization.csv", pred / "localization.csv")
    (pred / "classification.csv").write_text("image_path,prediction\n/dev/00001.jpg,0.9\n")
    assert "no probability for 7 of 8 ground-truth images (/dev/00002.jpg" in run_failing(capsys, pred, gt, tmp_path)
    (pred / "classification.csv").unlink()
    assert "no classification.csv" in run_failing(capsys, pred, gt, tmp_path)
    assert "annotations.csv: file not found" in run_failing(capsys, pred, tmp_path / "nowhere", tmp_path)


def test_images_not_in_the_ground_truth_are_scored_as_froc_py_does(tmp_path, capsys):
    # froc.py: points on an image absent from the ground truth are false positives and the image does not add to
    # num_image; so they score exactly like the same points on an object-free ground-truth image (/dev/00005.jpg,
    # empty in the example). The AUC is over the ground-truth images: an extra probability changes nothing.
    pred, gt = official_layout(tmp_path)
    extra = "0.55 1 1;0.02 3 3"
    localization = (FIXTURES / "localization.csv").read_text()
    (pred / "localization.csv").write_text(localization + f"/dev/00099.jpg,{extra}\n/dev/00098.jpg,\n")
    (pred / "classification.csv").write_text((FIXTURES / "classification.csv").read_text() + "/dev/00099.jpg,0.99\n")
    metrics = evaluate(pred, gt, tmp_path / "out", "--no-plots")
    same = tmp_path / "same"
    same.mkdir()
    shutil.copy(FIXTURES / "classification.csv", same / "classification.csv")
    (same / "localization.csv").write_text(localization.replace("/dev/00005.jpg,\n", f"/dev/00005.jpg,{extra}\n"))
    reference = evaluate(same, gt, tmp_path / "out-same", "--no-plots")
    assert metrics["aggregates"] == reference["aggregates"]
    assert metrics["aggregates"]["auc"] == expected("expected_output_skimage0162.json")["classification"][
        "auc_joined_on_image_path"]
    assert metrics["meta"]["details"]["num_false_positives"] == reference["meta"]["details"]["num_false_positives"]
    assert "/dev/00099.jpg" not in metrics["case"] and len(metrics["case"]) == 8
    notes = metrics["meta"]["notes"]
    assert ("localization.csv: 2 line(s) for images not in the ground truth (/dev/00099.jpg (line 10), "
            "/dev/00098.jpg (line 11)): their 2 point(s) count as false positives") in notes[1]
    assert "classification.csv: 1 row(s) for images not in the ground truth (/dev/00099.jpg (line 10)): left out " \
           "of the AUC" in notes[0]
    assert "--strict refuses them" in run_failing(capsys, pred, gt, tmp_path, "--strict")
    (pred / "localization.csv").write_text(localization)
    assert "classification.csv: 1 row(s) for images not in the ground truth" in \
        run_failing(capsys, pred, gt, tmp_path, "--strict")


@pytest.mark.parametrize("lines", [
    # froc.py's sorted(..., reverse=True) leaves [0.2, nan, 0.9] in file order (NaN compares false), so the false
    # positive 0.2 comes first and reaches the level with no hit; a NaN-last order would put the hit 0.9 first
    ["b.jpg,0.2 50 50", "a.jpg,nan 5 5;0.9 5 5"],
    # a point with an infinite coordinate is inside nothing: the first point is a false positive
    ["a.jpg,0.95 inf 5;0.9 5 5", "b.jpg,"],
], ids=["nan-probability", "infinite-coordinate"])
def test_nan_and_infinite_localization_values_score_as_froc_py(tmp_path, capsys, lines):
    (tmp_path / "gt").mkdir()
    (tmp_path / "gt" / "annotations.csv").write_text("image_path,annotation\na.jpg,0 0 0 10 10\nb.jpg,\n")
    pred = tmp_path / "pred"
    pred.mkdir()
    (pred / "localization.csv").write_text("image_path,prediction\n" + "\n".join(lines) + "\n")
    (pred / "classification.csv").write_text("image_path,prediction\na.jpg,0.9\nb.jpg,0.1\n")
    metrics = evaluate(pred, tmp_path / "gt", tmp_path / "out", "--fps", "0.5", "--no-plots")
    assert metrics["aggregates"]["sensitivity_at_fp_0.5"] == 0.0
    assert any("1 point(s) with a NaN or infinite value" in note for note in metrics["meta"]["notes"])
    assert "--strict refuses them" in run_failing(capsys, pred, tmp_path / "gt", tmp_path, "--strict")


def small_case(tmp_path, annotations, localization, name="case"):
    """A ground truth and a submission from their data lines (the classification is a fixed 0.5 per image)."""
    root = tmp_path / name
    (root / "gt").mkdir(parents=True)
    (root / "pred").mkdir()
    (root / "gt" / "annotations.csv").write_text("image_path,annotation\n" + "\n".join(annotations) + "\n")
    (root / "pred" / "localization.csv").write_text("image_path,prediction\n" + "\n".join(localization) + "\n")
    images = dict.fromkeys(line.split(",")[0] for line in annotations)
    (root / "pred" / "classification.csv").write_text("image_path,prediction\n" + "".join(f"{i},0.5\n" for i in images))
    return root / "pred", root / "gt"


def test_empty_ground_truth_objects_count_and_are_never_hit(tmp_path, capsys):
    # a.jpg: '0 0 0 10 10' (hit by 0.9 at 5,5); ' 0 20 20 30 30' (leading space: type '', so 0.8 at 25,25 inside
    # its box is a false positive); '' after the trailing ';'. num_object 3, num_image 2.
    # Walk: 0.9 hit (1 hit, 0 FP); 0.8 FP -> 1/2 >= 0.5: 1/3; 0.1 FP -> 2/2 >= 1: 1/3. FROC 1/3 (1.0 without them)
    pred, gt = small_case(tmp_path, ["a.jpg,0 0 0 10 10; 0 20 20 30 30;", "b.jpg,"],
                          ["a.jpg,0.9 5 5;0.8 25 25", "b.jpg,0.1 1 1"])
    metrics = evaluate(pred, gt, tmp_path / "out", "--fps", "0.5,1", "--no-plots")
    assert [metrics["aggregates"][k] for k in ("sensitivity_at_fp_0.5", "sensitivity_at_fp_1", "froc")] == [1 / 3] * 3
    assert metrics["meta"]["details"]["num_objects"] == 3 and metrics["meta"]["details"]["num_false_positives"] == 2
    assert metrics["case"]["a.jpg"]["num_objects"] == 3 and metrics["case"]["a.jpg"]["num_false_positives"] == 1
    assert any("2 empty object(s)" in note and "(a.jpg)" in note for note in metrics["meta"]["notes"])
    assert "line 2: object 2 is empty or starts with a space" in run_failing(capsys, pred, gt, tmp_path, "--strict")


def test_malformed_object_is_an_error_only_if_the_walk_tests_it(tmp_path, capsys):
    # b.jpg's ellipse has 3 coordinates: froc.py's `x1, y1, x2, y2 = obj.coordinates` fails when a point of b.jpg is
    # tested, and its walk stops once the last level is filled. --fps 0.3, 3 images: 0.9 hits a.jpg's box, 0.8 on
    # c.jpg is the first FP (1/3 >= 0.3) -> sensitivity 1/2 and the walk stops before b.jpg's point (0.1).
    annotations = ["a.jpg,0 0 0 10 10", "b.jpg,1 0 0 10", "c.jpg,"]
    pred, gt = small_case(tmp_path, annotations, ["a.jpg,0.9 5 5", "b.jpg,0.1 5 5", "c.jpg,0.8 1 1"])
    metrics = evaluate(pred, gt, tmp_path / "out", "--fps", "0.3", "--no-plots")
    assert metrics["aggregates"]["froc"] == 0.5 and metrics["meta"]["details"]["num_objects"] == 2
    assert any("1 malformed object(s) (line 3: object 1 (ellipse) needs 4 coordinates x1 y1 x2 y2, found 3)" in note
               for note in metrics["meta"]["notes"])
    assert "line 3: object 1 (ellipse) needs 4 coordinates" in run_failing(capsys, pred, gt, tmp_path, "--strict")
    # b.jpg's point ranked before the level is filled: froc.py fails
    pred, gt = small_case(tmp_path, annotations, ["a.jpg,0.9 5 5", "b.jpg,0.85 50 50", "c.jpg,0.8 1 1"], "tested")
    assert ("annotations.csv: line 3: object 1 (ellipse) needs 4 coordinates x1 y1 x2 y2, found 3; froc.py fails when "
            "it tests a point against it, as its walk does here (the point ranked 2 of 3 by probability, on 'b.jpg')"
            in run_failing(capsys, pred, gt, tmp_path, "--fps", "0.3"))


def test_bad_fps_option(tmp_path, capsys):
    pred, gt = official_layout(tmp_path)
    assert main(["--input", str(pred), "--ground-truth", str(gt), "--output", str(tmp_path / "o"), "--fps", "1,x"]) == 1
    assert "--fps '1,x': 'x' is not a number" in capsys.readouterr().err


def rename_uploads(pred, names):
    """Give the input images of the first jobs of predictions.json the upload names `names`."""
    jobs = json.loads((pred / "predictions.json").read_text())
    for job, name in zip(jobs, names):
        job["inputs"][0]["image"]["name"] = name
    (pred / "predictions.json").write_text(json.dumps(jobs))


def test_gc_uploads_under_other_names_match_their_image(tmp_path):
    pred, gt = synthetic(tmp_path, "gc", images=5, points=2)
    original = evaluate(pred, gt, tmp_path / "original", "--no-plots")
    rename_uploads(pred, ["08001.PNG", "08002.png", "08003.jpeg", "test/08004.JPG", "08005"])  # (.mha: refused)
    renamed = evaluate(pred, gt, tmp_path / "renamed", "--no-plots")
    assert renamed["aggregates"] == original["aggregates"] and renamed["case"] == original["case"]


def test_gc_image_without_a_job_gets_probability_0_and_no_points(tmp_path, capsys):
    pred, gt = synthetic(tmp_path, "gc", images=5, points=2)
    jobs = json.loads((pred / "predictions.json").read_text())
    (pred / "predictions.json").write_text(json.dumps(jobs[1:]))  # test/08001.jpg's job failed on grand-challenge
    metrics = evaluate(pred, gt, tmp_path / "out", "--no-plots")
    # the same in the run-file layout: probability 0 and an empty localization line for test/08001.jpg
    runs, _ = synthetic(tmp_path, "run-files", images=5, points=2)
    for name, empty in (("classification.csv", "test/08001.jpg,0\n"), ("localization.csv", "test/08001.jpg,\n")):
        lines = (runs / name).read_text().splitlines(True)
        (runs / name).write_text("".join([lines[0], empty, *lines[2:]]))
    reference = evaluate(runs, gt, tmp_path / "reference", "--no-plots")
    assert metrics["aggregates"] == reference["aggregates"] and metrics["case"] == reference["case"]
    missing = metrics["case"]["test/08001.jpg"]
    assert missing["probability"] == 0 and missing["num_points"] == 0
    assert any("no successful job for 1 of 5 ground-truth case(s) (test/08001.jpg): scored as probability 0" in note
               for note in metrics["meta"]["notes"])
    assert "--strict refuses missing cases" in run_failing(capsys, pred, gt, tmp_path, "--strict")


def test_gc_layout_errors(tmp_path, capsys):
    pred, gt = synthetic(tmp_path, "gc", images=5, points=2)
    jobs = json.loads((pred / "predictions.json").read_text())
    rename_uploads(pred, ["1.2.840.113619.2.55.3-1"])  # a DICOM upload, renamed by grand-challenge
    error = run_failing(capsys, pred, gt, tmp_path)
    assert "job job-000001: input image '1.2.840.113619.2.55.3-1' ('chest-x-ray') matches no ground-truth case" \
        in error and "StudyInstanceUID" in error
    rename_uploads(pred, ["08001.jpg", "08001.png"])
    assert "jobs job-000001 ('08001.jpg') and job-000002 ('08001.png') are both case 'test/08001.jpg'" in \
        run_failing(capsys, pred, gt, tmp_path)
    (pred / "predictions.json").write_text(json.dumps(jobs))
    points = pred / jobs[0]["pk"] / "output" / "foreign-objects.json"
    document = json.loads(points.read_text())
    del document["points"][0]["probability"]
    points.write_text(json.dumps(document))
    assert "points[0]: no probability" in run_failing(capsys, pred, gt, tmp_path)
    (pred / jobs[0]["pk"] / "output" / "foreign-object-likelihood.json").write_text("true")
    assert "expected a finite number, got True" in run_failing(capsys, pred, gt, tmp_path)


def test_ground_truth_without_images_gets_the_documented_values(tmp_path):
    # the official script crashes (no image, no object); here every level is 0 with a note, and no traceback
    (tmp_path / "gt").mkdir()
    (tmp_path / "pred").mkdir()
    (tmp_path / "gt" / "annotations.csv").write_text("image_path,annotation\n")
    (tmp_path / "pred" / "classification.csv").write_text("image_path,prediction\n")
    (tmp_path / "pred" / "localization.csv").write_text("image_path,prediction\n")
    metrics = evaluate(tmp_path / "pred", tmp_path / "gt", tmp_path / "out", "--no-plots")
    assert metrics["aggregates"]["froc"] == 0.0
    assert all(v == 0.0 for k, v in metrics["aggregates"].items() if k.startswith("sensitivity_at_fp_"))
    assert metrics["meta"]["notes"]
