"""The shared core: atomic outputs, strict JSON, path defaults, GC layouts, record computation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from medchallenge.contract import (
    GCJob, SocketValue, case_key, default_path, match_jobs, read_inputs_json, read_predictions_json,
    strip_image_suffix,
)
from medchallenge.errors import InputError
from medchallenge.evaluation.records import compute_records, parse_shard
from medchallenge.io import atomic_output, write_json_atomic, write_metrics


def test_atomic_output_keeps_the_old_file_when_writing_fails(tmp_path):
    target = tmp_path / "metrics.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_output(target) as handle:
            handle.write("half")
            raise RuntimeError("boom")
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]  # no temporary file left behind


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_refused_and_nothing_is_written(tmp_path, bad):
    with pytest.raises(ValueError, match=r"\$.aggregates.score"):
        write_metrics(tmp_path / "metrics.json", {"score": bad}, {}, {})
    assert not (tmp_path / "metrics.json").exists()


def test_metrics_json_shape(tmp_path):
    write_metrics(tmp_path / "m.json", {"a": 1.5}, {"c1": {"x": 1}}, {"challenge": "t"})
    assert json.loads((tmp_path / "m.json").read_text()) == {
        "aggregates": {"a": 1.5}, "case": {"c1": {"x": 1}}, "meta": {"challenge": "t"}}
    with pytest.raises(TypeError):
        write_json_atomic(tmp_path / "x.json", {"a": object()})


def test_paths_default_to_grand_challenge_and_env_overrides(monkeypatch):
    monkeypatch.delenv("INPUT_DIR", raising=False)
    monkeypatch.delenv("HOLOSCAN_INPUT_PATH", raising=False)
    assert default_path("input") == Path("/input")
    assert default_path("ground_truth") == Path("/opt/ml/input/data/ground_truth")
    monkeypatch.setenv("HOLOSCAN_INPUT_PATH", "/holoscan")
    assert default_path("input") == Path("/holoscan")
    monkeypatch.setenv("INPUT_DIR", "/data/in")
    assert default_path("input") == Path("/data/in")


@pytest.mark.parametrize("name, stem", [
    ("TST_001.nii.gz", "TST_001"), ("TST_001.nii", "TST_001"), ("TST_001.mha", "TST_001"), ("TST_001.MHA", "TST_001"),
    ("08001.JPG", "08001"), ("case.01.nii.gz", "case.01"), ("case.01.NII.GZ", "case.01"), ("scan.mha.gz", "scan"),
    ("series.tar.gz", "series"), ("slide.tiff", "slide"), ("x.dcm", "x"), ("notes.txt", "notes.txt"),
    ("1.2.840.10008-1", "1.2.840.10008-1"), (".mha", ".mha"),
])
def test_image_suffixes_are_stripped(name, stem):
    assert strip_image_suffix(name) == stem


def test_case_key_drops_folders_and_suffix():
    assert case_key("test/08001.jpg") == case_key("08001.PNG") == case_key("C:\\x\\08001.jpeg") == "08001"


def _jobs(*names: str) -> list[GCJob]:
    """Jobs `p0`, `p1`, ... whose `ct-image` input was uploaded as `names`."""
    return [GCJob(pk=f"p{i}", inputs={"ct-image": SocketValue("ct-image", "images/ct", "Image", Path("x"), name)})
            for i, name in enumerate(names)]


def test_jobs_match_cases_whatever_the_upload_suffix():
    cases = ["TST_001.nii.gz", "TST_002.nii.gz", "case.01.nii.gz", "TST_004.nii.gz"]
    match = match_jobs(_jobs("TST_001.mha", "TST_002.NII", "case.01.tif"), "ct-image", cases)
    assert {case: job.pk for case, job in match.jobs.items()} == {"TST_001.nii.gz": "p0", "TST_002.nii.gz": "p1",
                                                                 "case.01.nii.gz": "p2"}
    assert list(match.jobs) == cases[:3]  # ground-truth order, not job order
    assert match.missing == ["TST_004.nii.gz"]
    (note,) = match.missing_notes("scored as empty")
    assert "no successful job for 1 of 4 ground-truth case(s) (TST_004.nii.gz): scored as empty" in note
    assert match_jobs(_jobs("TST_001.mha"), "ct-image", ["TST_001.nii.gz"]).missing_notes("x") == []
    with pytest.raises(InputError, match=r"no successful job for 1 ground-truth case\(s\) \(TST_004.nii.gz\); --strict"):
        match_jobs(_jobs("TST_001.mha"), "ct-image", ["TST_001.nii.gz", "TST_004.nii.gz"], strict=True)


def test_unmatched_duplicate_and_ambiguous_jobs_are_one_line_errors():
    with pytest.raises(InputError, match=r"^predictions.json: jobs p0 \('A.nii.gz'\) and p1 \('A.mha'\) are both case 'A'$"):
        match_jobs(_jobs("A.nii.gz", "A.mha"), "ct-image", ["A"])
    with pytest.raises(InputError) as error:
        match_jobs(_jobs("A.mha", "1.2.826.0.1.3680043-1"), "ct-image", ["A", "B"])
    message = str(error.value)
    assert message.startswith("predictions.json: job p1: input image '1.2.826.0.1.3680043-1' ('ct-image') matches "
                              "no ground-truth case")
    assert "DICOM uploads to '<StudyInstanceUID>-<index>'" in message and "\n" not in message
    with pytest.raises(InputError, match="gt.csv: cases 'a/X.jpg' and 'b/X.jpg' are both named 'X'"):
        match_jobs(_jobs("X.jpg"), "ct-image", ["a/X.jpg", "b/X.jpg"], ground_truth="gt.csv")


def test_inputs_json_absent_means_batch_mode(tmp_path):
    assert read_inputs_json(tmp_path) is None
    (tmp_path / "inputs.json").write_text(json.dumps([{"interface": {"slug": "ct-image", "relative_path": "images/ct",
                                                                     "super_kind": "Image"},
                                                       "image": {"name": "TST_001.nii.gz"}}]))
    (tmp_path / "images" / "ct").mkdir(parents=True)
    (tmp_path / "images" / "ct" / "a.mha").write_bytes(b"")
    sockets = read_inputs_json(tmp_path)
    assert sockets["ct-image"].image_name == "TST_001.nii.gz"
    assert sockets["ct-image"].image_file() == tmp_path / "images" / "ct" / "a.mha"


def test_predictions_json_duplicates_and_bad_json_are_errors(tmp_path):
    interface = {"slug": "ct-image", "relative_path": "images/ct"}
    job = {"status": "Succeeded", "inputs": [{"interface": interface, "image": {"name": "A.nii.gz"}}], "outputs": []}
    (tmp_path / "predictions.json").write_text(json.dumps([dict(job, pk="p1"), dict(job, pk="p2"),
                                                           dict(job, pk="p3", status="Failed")]))
    jobs = read_predictions_json(tmp_path)
    assert [j.pk for j in jobs] == ["p1", "p2"]  # failed jobs are not predictions
    with pytest.raises(InputError, match="jobs p1 .'A.nii.gz'. and p2 .'A.nii.gz'. are both case 'A.nii.gz'"):
        match_jobs(jobs, "ct-image", ["A.nii.gz"])
    for bad, message in (({"pk": "p", "inputs": None}, "job p: 'inputs' must be a list"),
                         ({"pk": "p", "outputs": [{"interface": {"slug": "x", "relative_path": 5}}]},
                          r"\[0\].outputs\[0\]: socket value without a string interface.slug")):
        (tmp_path / "predictions.json").write_text(json.dumps([bad]))
        with pytest.raises(InputError, match=message):
            read_predictions_json(tmp_path)
    (tmp_path / "predictions.json").write_text(json.dumps([{"pk": "p", "inputs": [
        {"interface": {"slug": "ct-image", "relative_path": "images/ct"}, "image": {"name": 5}}]}]))
    with pytest.raises(InputError, match="image.name of socket 'ct-image' must be a string"):
        read_predictions_json(tmp_path)
    (tmp_path / "predictions.json").write_bytes(b"\xff\xfe[]")
    with pytest.raises(InputError, match="predictions.json: not UTF-8 text"):
        read_predictions_json(tmp_path)
    (tmp_path / "predictions.json").write_text("[{]")
    with pytest.raises(InputError, match=r"predictions.json: line 1: not valid JSON"):
        read_predictions_json(tmp_path)


def test_case_ids_that_sanitise_alike_get_their_own_record_files(tmp_path):
    ids = ["A B", "A_B", "A/B"]
    records = compute_records(ids, echo, workers=1, records=tmp_path, progress=False)
    assert len(list(tmp_path.glob("*.json"))) == 3
    assert compute_records(ids, echo, workers=1, records=tmp_path, progress=False) == records == {
        i: {"id": i} for i in ids}


def echo(case_id: str) -> dict:
    return {"id": case_id}


def square(case_id: str) -> dict:
    return {"value": int(case_id) ** 2}


def test_records_in_parallel_equal_serial_and_keep_order():
    ids = [str(i) for i in range(7)]
    serial = compute_records(ids, square, workers=1, progress=False)
    parallel = compute_records(ids, square, workers=2, progress=False)
    assert serial == parallel and list(parallel) == ids
    assert compute_records(ids, square, workers=1, shard=(2, 3), progress=False) == {"1": {"value": 1},
                                                                                     "4": {"value": 16}}
    assert parse_shard("2/3", Path("records")) == (2, 3)
    assert parse_shard(None, None) is None
    with pytest.raises(InputError, match="K/N"):
        parse_shard("4/3", Path("records"))
    with pytest.raises(InputError, match="--shard needs --records"):
        parse_shard("1/3", None)
