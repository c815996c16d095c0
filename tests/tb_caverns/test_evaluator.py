"""The TB caverns evaluator end to end (main()): official example, GC layout, input checks, resume and shards."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from medchallenge.evaluators.tb_caverns import main

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def ground_truth(tmp_path: Path) -> Path:
    gt = tmp_path / "gt"
    gt.mkdir()
    shutil.copy(FIXTURES / "gt.csv", gt / "gt_boxes.csv")
    shutil.copy(FIXTURES / "all_ids.csv", gt / "all_ids.csv")
    return gt


def run(tmp_path: Path, ground_truth: Path, submission: str | None, *extra: str) -> tuple[int, dict | None]:
    pred = tmp_path / "pred"
    pred.mkdir(parents=True, exist_ok=True)
    if submission is not None:
        (pred / "submission.txt").write_text(submission)
    out = tmp_path / "out"
    code = main(["--input", str(pred), "--ground-truth", str(ground_truth), "--output", str(out),
                 "--no-progress", *extra])
    metrics = out / "metrics.json"
    return code, json.loads(metrics.read_text()) if metrics.exists() else None


def test_official_example_number_for_number(tmp_path, ground_truth):
    expected = json.loads((FIXTURES / "expected_output.json").read_text())
    code, metrics = run(tmp_path, ground_truth, (FIXTURES / "pred.csv").read_text())
    assert code == 0
    assert metrics["aggregates"]["map"] == expected["score"]  # bit for bit
    for case_id, case in expected["per_case"].items():
        assert metrics["case"][case_id]["case_score"] == case["case_score"]
        if "per_threshold" in case:
            assert [t["score"] for t in metrics["case"][case_id]["per_threshold"]] == case["per_threshold"]
    assert metrics["meta"]["details"]["ignored_prediction_ids"] == expected["ignored_prediction_ids"]
    assert metrics["meta"]["details"]["num_all_ids"] == expected["n_all_ids"]
    assert any("TST_999" in w for w in metrics["meta"]["warnings"])
    # 8 per-threshold aggregates average back to map (up to float rounding)
    per_t = [metrics["aggregates"][k] for k in metrics["aggregates"] if k.startswith("ap_at_iou_")]
    assert len(per_t) == 8 and sum(per_t) / 8 == pytest.approx(metrics["aggregates"]["map"])


def test_empty_submission_is_scored_and_explained(tmp_path, ground_truth):
    # the official code crashes; here: GT cases TST_001/002/003/006 score 0, TST_004/005 (no GT) score 1 -> 2/6
    code, metrics = run(tmp_path, ground_truth, "")
    assert code == 0
    assert metrics["aggregates"]["map"] == 2 / 6
    assert any("empty submission" in note for note in metrics["meta"]["notes"])


def gc_layout(tmp_path: Path, submission: str, cases: tuple[str, ...] = (), rename=lambda name: name) -> Path:
    """The run file re-expressed as GC's predictions.json with one job per CT (in reverse order); `cases` adds jobs
    without boxes, `rename` gives the upload name of a case's input image."""
    by_case: dict[str, list[list[int]]] = {name: [] for name in cases}
    for row in submission.splitlines():
        name, *coords = row.split(",")
        by_case.setdefault(name, []).append([int(c) for c in coords])
    eval_input = tmp_path / "gc"
    jobs = []
    for index, (case, boxes) in enumerate(reversed(list(by_case.items()))):
        name = rename(case)
        pk = f"job-{index}"
        document = {"version": 1, "image": name,
                    "boxes": [{"voxel_bbox": b, "probability": 0.9} for b in boxes]}
        out = eval_input / pk / "output"
        out.mkdir(parents=True)
        (out / "tb-cavern-boxes.json").write_text(json.dumps(document))
        interface = {"slug": "ct-image", "kind": "Image", "super_kind": "Image", "relative_path": "images/ct"}
        jobs.append({"pk": pk, "status": "Succeeded",
                     "inputs": [{"interface": interface, "value": None, "file": None,
                                 "image": {"pk": "x", "name": name}}],
                     "outputs": [{"interface": {"slug": "tb-cavern-boxes", "kind": "Anything", "super_kind": "Value",
                                                "relative_path": "tb-cavern-boxes.json"},
                                  "value": document, "file": None, "image": None}]})
    (eval_input / "predictions.json").write_text(json.dumps(jobs))
    return eval_input


def run_gc(eval_input: Path, ground_truth: Path, out: Path, *extra: str) -> tuple[int, dict | None]:
    code = main(["--input", str(eval_input), "--ground-truth", str(ground_truth), "--output", str(out),
                 "--no-progress", *extra])
    return code, json.loads((out / "metrics.json").read_text()) if (out / "metrics.json").exists() else None


def test_gc_predictions_json_gives_the_same_aggregates(tmp_path, ground_truth):
    # TST_999 is in neither ground-truth file: a job for it would match no case, so it is left out here
    submission = "".join(line for line in (FIXTURES / "pred.csv").read_text().splitlines(True) if "TST_999" not in line)
    _, batch = run(tmp_path, ground_truth, submission)
    eval_input = gc_layout(tmp_path, submission, cases=("TST_003.nii.gz", "TST_005.nii.gz"))
    _, gc = run_gc(eval_input, ground_truth, tmp_path / "gc-out")
    assert gc["aggregates"] == batch["aggregates"]
    assert gc["meta"]["layout"] == "grand-challenge predictions.json"
    assert not any("no successful job" in note for note in gc["meta"]["notes"])


@pytest.fixture
def three_cases(tmp_path: Path) -> tuple[Path, str]:
    """TST_001 and TST_002 with a cavern each, TST_003 without; the run finds TST_001 exactly (case score 1),
    TST_002 with IoU 1/2 (thresholds 0.40, 0.45, 0.50 of 8: 3/8) and nothing in TST_003 (1)."""
    gt = tmp_path / "gt3"
    gt.mkdir()
    (gt / "gt_boxes.csv").write_text("id,bbox_X1,bbox_Y1,bbox_Z1,bbox_X2,bbox_Y2,bbox_Z2\n"
                                     "TST_001,10,10,10,20,20,20\nTST_002,0,0,0,10,10,10\n")
    (gt / "all_ids.csv").write_text("TST_001.nii.gz\nTST_002.nii.gz\nTST_003.nii.gz\n")
    return gt, "TST_001.nii.gz,10,10,10,20,20,20\nTST_002.nii.gz,0,0,0,10,10,20\n"


@pytest.mark.parametrize("rename", [
    lambda case: case.replace(".nii.gz", ".mha"),
    lambda case: case.replace(".nii.gz", ".MHA"),
    lambda case: case.replace(".nii.gz", ".nii"),
    lambda case: case,
], ids=["mha", "upper-case", "nii", "nii.gz"])
def test_gc_uploads_under_any_image_suffix_score_as_the_run_file(tmp_path, three_cases, rename):
    gt, submission = three_cases
    _, batch = run(tmp_path, gt, submission)
    assert batch["aggregates"]["map"] == (1 + 3 / 8 + 1) / 3
    eval_input = gc_layout(tmp_path, submission, cases=("TST_003.nii.gz",), rename=rename)
    code, gc = run_gc(eval_input, gt, tmp_path / "gc-out")
    assert code == 0 and gc["aggregates"] == batch["aggregates"] and gc["case"] == batch["case"]


def test_gc_job_of_an_unknown_upload_name_is_one_error_line(tmp_path, three_cases, capsys):
    gt, submission = three_cases
    eval_input = gc_layout(tmp_path, submission, cases=("TST_003.nii.gz",),
                           rename=lambda case: "1.2.840.113619.2.55-1" if case == "TST_002.nii.gz" else case)
    code, metrics = run_gc(eval_input, gt, tmp_path / "gc-out")
    assert code == 1 and metrics is None
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: predictions.json: job job-0: input image '1.2.840.113619.2.55-1' ('ct-image') "
                           "matches no ground-truth case") and "StudyInstanceUID" in line


def test_gc_case_without_a_job_has_no_boxes_and_is_named(tmp_path, three_cases, capsys):
    gt, submission = three_cases
    eval_input = gc_layout(tmp_path, submission.splitlines()[0] + "\n", cases=("TST_003.nii.gz",))
    code, gc = run_gc(eval_input, gt, tmp_path / "gc-out")  # no job for TST_002 (failed on grand-challenge)
    assert code == 0 and gc["aggregates"]["map"] == (1 + 0 + 1) / 3
    assert gc["case"]["TST_002.nii.gz"]["rule"] == "ground truth without predictions scores 0"
    assert any("no successful job for 1 of 3 ground-truth case(s) (TST_002.nii.gz)" in note
               for note in gc["meta"]["notes"])
    code, _ = run_gc(eval_input, gt, tmp_path / "strict-out", "--strict")
    assert code == 1 and "--strict refuses missing cases" in capsys.readouterr().err


@pytest.mark.parametrize("submission, message", [
    ("file,X1,Y1,Z1,X2,Y2,Z2\n", "line 1: looks like a header"),
    ("TST_001.nii.gz,1,1,1,5,5,5\n\nTST_002.nii.gz,1,1,1,5,5,5\n", "line 2: blank line"),
    ("TST_001.nii.gz,1,1,1,5,5,5\nTST_002.nii.gz,1.5,1,1,5,5,5\n", "line 2: coordinates must be integers"),
    ("TST_001.nii.gz,1,1,1,5,5\n", "line 1: expected a file name and 6 coordinates"),
    # Python 3.9's csv module stops at a NUL ("line contains NUL"); 3.11's reads it
    ("TST_001.nii.gz,1,1,1,5,5,5\nTST_002.nii.gz,1,1,1,5,5,5\x00\n", "line 2: line contains NUL"),
    # Tangsa digits (Unicode 14.0): int() reads them on Python 3.11, not on the official Python 3.9
    ("TST_001.nii.gz,1,1,1,5,5,\U00016ac5\n", "line 1: coordinates must be integers"),
])
def test_bad_run_files_fail_with_one_line(tmp_path, ground_truth, capsys, submission, message):
    code, metrics = run(tmp_path, ground_truth, submission)
    assert code == 1 and metrics is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "submission.txt" in err[0] and message in err[0]


def test_coordinates_in_unicode_13_digits_are_read_as_python_3_9_reads_them(tmp_path, ground_truth):
    ascii_run = (FIXTURES / "pred.csv").read_text()
    digits = {ord(d): chr(0x0660 + int(d)) for d in "0123456789"}  # ARABIC-INDIC DIGIT ZERO.. (Unicode 1.1)
    arabic_indic = "".join(name + "," + coordinates.translate(digits) for name, coordinates in
                           (line.split(",", 1) for line in ascii_run.splitlines(keepends=True)))
    assert arabic_indic != ascii_run
    code, metrics = run(tmp_path, ground_truth, arabic_indic)
    _, expected = run(tmp_path / "ascii", ground_truth, ascii_run)
    assert code == 0 and metrics["aggregates"] == expected["aggregates"]


def test_nul_in_the_ground_truth_is_one_error_line(tmp_path, ground_truth, capsys):
    (ground_truth / "all_ids.csv").write_text("TST_001.nii.gz\n\x00\n")
    code, metrics = run(tmp_path, ground_truth, (FIXTURES / "pred.csv").read_text())
    assert code == 1 and metrics is None and "all_ids.csv: line 2: line contains NUL" in capsys.readouterr().err


def test_task_page_rules_warn_by_default_and_fail_when_strict(tmp_path, ground_truth, capsys):
    submission = "TST_001.nii.gz,20,10,10,10,20,20\n"  # X1 > X2
    code, metrics = run(tmp_path, ground_truth, submission)
    assert code == 0 and any("ordered" in w for w in metrics["meta"]["warnings"])
    assert metrics["case"]["TST_001.nii.gz"]["case_score"] == 0.0  # IoU 0 as in the official code
    shutil.rmtree(tmp_path / "out")
    code, metrics = run(tmp_path, ground_truth, submission, "--strict")
    assert code == 1 and metrics is None
    assert "line 1: corners must be ordered" in capsys.readouterr().err


def test_bad_ground_truth_names_the_line(tmp_path, ground_truth, capsys):
    (ground_truth / "gt_boxes.csv").write_text("id,a,b,c,d,e,f\nTST_001,1,1,1,10.0,5,5\n")
    code, _ = run(tmp_path, ground_truth, "")
    assert code == 1 and "gt_boxes.csv: line 2: coordinates must be integers" in capsys.readouterr().err
    (ground_truth / "gt_boxes.csv").write_text("id\n")
    (ground_truth / "all_ids.csv").write_text("")
    code, _ = run(tmp_path, ground_truth, "")
    assert code == 1 and "all_ids.csv: the id list is empty" in capsys.readouterr().err


def test_byte_order_mark_is_read_as_officially_but_named(tmp_path, ground_truth):
    # the official code keeps the BOM in the first id: TST_001 (GT) then is missing from the id list, and the id
    # "\ufeffTST_001.nii.gz" has neither GT nor predictions (a true negative): same number, but a warning says why
    ids = (ground_truth / "all_ids.csv").read_text()
    (ground_truth / "all_ids.csv").write_text("\ufeff" + ids)
    code, metrics = run(tmp_path, ground_truth, (FIXTURES / "pred.csv").read_text())
    # TST_001 still adds its 1.0 (GT outside the list), the BOM id adds 1 as a true negative: 0.4583... + 1/6
    assert code == 0 and metrics["aggregates"]["map"] == (1.0 + 0.25 + 0 + 0.5 + 1 + 1) / 6
    assert any("byte-order mark" in w and "all_ids.csv" in w for w in metrics["meta"]["warnings"])


def test_empty_ground_truth_file_is_an_error(tmp_path, ground_truth, capsys):
    (ground_truth / "gt_boxes.csv").write_text("")
    code, metrics = run(tmp_path, ground_truth, "")
    assert code == 1 and metrics is None
    assert "gt_boxes.csv: empty file (expected the header line" in capsys.readouterr().err


def test_crlf_run_file_is_read_correctly(tmp_path, ground_truth):
    submission = (FIXTURES / "pred.csv").read_text()
    _, lf = run(tmp_path, ground_truth, submission)
    _, crlf = run(tmp_path, ground_truth, submission.replace("\n", "\r\n"))
    assert crlf["aggregates"] == lf["aggregates"]


def test_first_line_read_with_int_as_officially(tmp_path, ground_truth):
    # int() takes a sign and spaces: the first line is data, not a header
    submission = (FIXTURES / "pred.csv").read_text()
    _, plain = run(tmp_path / "plain", ground_truth, submission)
    first, rest = submission.split("\n", 1)
    name, *coords = first.split(",")
    code, signed = run(tmp_path / "signed", ground_truth, ",".join([name, *(f" +{c}" for c in coords)]) + "\n" + rest)
    assert code == 0 and signed["aggregates"] == plain["aggregates"]


def test_shards_and_resume_give_the_same_result(tmp_path, ground_truth):
    submission = (FIXTURES / "pred.csv").read_text()
    _, direct = run(tmp_path / "direct", ground_truth, submission)
    records = tmp_path / "records"
    for shard in ("1/2", "2/2"):
        code, metrics = run(tmp_path / shard[0], ground_truth, submission, "--records", str(records), "--shard", shard)
        assert code == 0 and metrics is None  # a shard writes records only
    assert len(list(records.glob("*.json"))) == 6
    _, combined = run(tmp_path / "combined", ground_truth, submission, "--records", str(records))
    assert combined["aggregates"] == direct["aggregates"] and combined["case"] == direct["case"]


def test_stored_records_are_reused_not_recomputed(tmp_path, ground_truth):
    submission = (FIXTURES / "pred.csv").read_text()
    records = tmp_path / "records"
    run(tmp_path / "first", ground_truth, submission, "--records", str(records))
    # mark TST_003 (GT, no prediction: 0) as perfect in its stored record: the next run must take it as it is
    path = records / "TST_003.nii.gz.json"
    record = json.loads(path.read_text())
    record["case_score"] = 1.0
    path.write_text(json.dumps(record))
    _, resumed = run(tmp_path / "second", ground_truth, submission, "--records", str(records))
    assert resumed["aggregates"]["map"] == (1.0 + 0.25 + 1.0 + 0.5 + 0 + 1) / 6


def test_records_of_other_inputs_are_refused(tmp_path, ground_truth, capsys):
    records = tmp_path / "records"
    submission = "".join(line for line in (FIXTURES / "pred.csv").read_text().splitlines(True) if "TST_999" not in line)
    assert run(tmp_path / "first", ground_truth, submission, "--records", str(records))[0] == 0
    # another submission with the same records folder would silently reuse stale records: refused
    code, metrics = run(tmp_path / "second", ground_truth, submission.replace(",19\n", ",20\n"),
                        "--records", str(records))
    assert code == 1 and metrics is None
    assert "holds records of other inputs or options" in capsys.readouterr().err
    # options that change numbers count too; the same inputs elsewhere (another machine's copy) do not
    assert run(tmp_path / "third", ground_truth, submission, "--records", str(records), "--strict")[0] == 1
    copy = tmp_path / "copy-of-gt"
    shutil.copytree(ground_truth, copy)
    assert run(tmp_path / "fourth", copy, submission, "--records", str(records))[0] == 0
