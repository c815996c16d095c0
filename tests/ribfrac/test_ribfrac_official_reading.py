"""RibFrac inputs read as the official code reads them (docs/metrics/ribfrac.md §1.2, §1.4) and what it fails on,
scored with a note or refused (§7, §8): pandas 1.4.4's decimals, scaled NIfTI labels, (X, Y, Z, 1) volumes, column
names with spaces, numeric public_ids, confidences pandas holds as text although Python's float() reads them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from medchallenge.errors import InputError
from medchallenge.evaluators.ribfrac import main
from medchallenge.formats import ribfrac as formats
from medchallenge.synth.ribfrac import write_stored_nifti, write_volume

FIXTURES = Path(__file__).parent / "fixtures"


def run(pred: Path, gt: Path, out: Path, *extra: str) -> dict:
    assert main(["--input", str(pred), "--ground-truth", str(gt), "--output", str(out), "--no-progress",
                 "--no-plots", "--workers", "1", *extra]) == 0
    return json.loads((out / "metrics.json").read_text())


def refused(pred: Path, gt: Path, out: Path, capsys, *extra: str) -> str:
    assert main(["--input", str(pred), "--ground-truth", str(gt), "--output", str(out), "--no-progress",
                 "--no-plots", "--workers", "1", *extra]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def one_fracture_case(tmp_path: Path, hit_confidence: str, fp_confidence: str) -> tuple[Path, Path]:
    """One case, one fracture: prediction 1 covers it (IoU 1), prediction 2 lies elsewhere."""
    gt, pred = np.zeros((20, 20, 10), np.uint8), np.zeros((20, 20, 10), np.uint8)
    gt[2:6, 2:6, 2:6] = 1
    pred[2:6, 2:6, 2:6] = 1
    pred[12:16, 12:16, 2:6] = 2
    write_volume(tmp_path / "gt" / "RibFrac1-label.nii.gz", gt)
    write_volume(tmp_path / "pred" / "RibFrac1.nii.gz", pred)
    (tmp_path / "gt" / "info.csv").write_text("public_id,label_id,label_code\nRibFrac1,0,0\nRibFrac1,1,1\n")
    (tmp_path / "pred" / "pred.csv").write_text("public_id,label_id,confidence,label_code\nRibFrac1,0,0.5,0\n"
                                               f"RibFrac1,1,{hit_confidence},1\nRibFrac1,2,{fp_confidence},1\n")
    return tmp_path / "pred", tmp_path / "gt"


def test_a_decimal_on_a_threshold_is_read_as_pandas_reads_it(tmp_path):
    # pandas 1.4.4 reads 0.41000000000000003 as 0.41 (Python: the next double up): the hit is no longer above the
    # threshold 0.41, where the false positive at 0.2 still is
    metrics = run(*one_fracture_case(tmp_path, "0.41000000000000003", "0.2"), tmp_path / "out")
    assert metrics["case"]["RibFrac1"]["detections"][0]["prob"] == 0.41
    assert metrics["aggregates"]["froc_average"] == 0.8999999989999999
    # with Python's float() (0.41000000000000003 > 0.41) the fracture would be found at every key FP rate: 1.0
    assert float("0.41000000000000003") > 0.41


@pytest.mark.parametrize("confidence", ["None", "1e999", "nAn", "+nan", "NAN", "\uff10.\uff19", "\u0660\u066b\u0669",
                                        " +inf", "inf ", "1_0"])
def test_confidences_pandas_holds_as_text_fail_where_the_official_code_compares_them(tmp_path, capsys, confidence):
    # Python's float() reads every one of these; pandas 1.4.4 keeps the whole column as text, and the official FROC
    # comparison fails (TypeError) on the first row it compares
    line = refused(*one_fracture_case(tmp_path, "0.9", confidence), tmp_path / "out", capsys)
    assert "pred.csv: line 3: case RibFrac1: prediction label 1: confidence '0.9' (held as text: line 4's" in line


def test_a_label_map_saved_with_a_ct_header_truncates_as_nibabel_does(tmp_path):
    labels = np.zeros((6, 5, 4), np.float64)
    labels[1:3, 1:3, 1:3], labels[4, 3, 2], labels[0, 4, 3] = 1, 2, 3
    # a writer's slope for a CT range, intercept -1024: stored int16 values that read back a hair below the labels
    slope = next(s for s in (np.float32(k / 997) for k in range(40, 997))
                 if np.rint((1 + 1024) / float(s)) * float(s) - 1024 < 1)
    stored = np.rint((labels + 1024) / float(slope)).astype(np.int16)
    write_stored_nifti(tmp_path / "v.nii.gz", stored, float(slope), -1024.0)
    read = formats.read_label_volume(tmp_path / "v.nii.gz")
    values = stored.astype(np.float64) * float(slope) + -1024.0
    assert read.dtype == np.uint8 and np.array_equal(read, values.astype(np.uint8))
    assert (read[1:3, 1:3, 1:3] == 0).all() and not np.array_equal(read, labels)  # label 1 is gone, as officially
    # an unscaled header keeps the fast path, the same labels
    write_stored_nifti(tmp_path / "u.nii.gz", labels.astype(np.int16), 1.0, 0.0)
    assert np.array_equal(formats.read_label_volume(tmp_path / "u.nii.gz"), labels.astype(np.uint8))


def test_scaled_values_that_would_wrap_and_a_bad_intercept_are_refused(tmp_path):
    write_stored_nifti(tmp_path / "w.nii.gz", np.full((3, 3, 3), 100, np.int16), 3.0, 0.0)
    with pytest.raises(InputError, match="w.nii.gz: label values must be in 0..255 after the NIfTI scaling"):
        formats.read_label_volume(tmp_path / "w.nii.gz")
    write_stored_nifti(tmp_path / "i.nii.gz", np.ones((3, 3, 3), np.int16), 2.0, float("inf"))
    with pytest.raises(InputError, match=r"i.nii.gz: cannot read the volume \(nibabel: HeaderDataError\), so the "
                                         "official code fails"):
        formats.read_label_volume(tmp_path / "i.nii.gz")


def test_a_volume_stored_as_xyz1_is_refused(tmp_path):
    write_stored_nifti(tmp_path / "v.nii.gz", np.ones((4, 4, 3, 1), np.uint8), 1.0, 0.0)
    with pytest.raises(InputError, match=r"v.nii.gz: expected a 3-D label volume, the NIfTI header stores 4-D "
                                         r"\(4, 4, 3, 1\)"):
        formats.read_label_volume(tmp_path / "v.nii.gz")


@pytest.fixture
def example(tmp_path):
    shutil.copytree(FIXTURES / "gt", tmp_path / "gt")
    shutil.copytree(FIXTURES / "pred", tmp_path / "pred")
    return tmp_path


def test_column_names_written_with_spaces_are_noted_and_refused_with_strict(example, capsys):
    original = run(example / "pred", example / "gt", example / "a")
    path = example / "pred" / "ribfrac-val-pred.csv"
    path.write_text(path.read_text().replace("confidence,label_code", "confidence, label_code"))
    spaced = run(example / "pred", example / "gt", example / "b")
    assert spaced["aggregates"] == original["aggregates"]
    assert any("the column name(s) ' label_code' are written with spaces, which pandas keeps: the official code "
               "fails (KeyError on 'label_code'): read as the names without the spaces" in note
               for note in spaced["meta"]["notes"])
    assert "' label_code' are written with spaces" in refused(example / "pred", example / "gt", example / "c",
                                                                capsys, "--strict")


def test_public_ids_pandas_reads_as_numbers_are_noted_and_refused_with_strict(example, capsys):
    original = run(example / "pred", example / "gt", example / "a")
    for folder in ("gt", "pred"):
        for path in (example / folder).iterdir():
            path.rename(path.with_name(path.name.replace("RibFrac9", "09")))
            if path.suffix == ".csv":
                path.write_text(path.read_text().replace("RibFrac9", "09"))
    numeric = run(example / "pred", example / "gt", example / "b")
    assert sorted(numeric["case"]) == ["0901", "0902", "0903", "0904"]
    # the detection does not read the ground-truth CSV; its rows are selected by no case, as officially, so every
    # hit is a false positive of the classification
    assert numeric["aggregates"]["froc_average"] == original["aggregates"]["froc_average"]
    assert numeric["aggregates"]["macro_f1"] == 0.0 != original["aggregates"]["macro_f1"]
    notes = [note for note in numeric["meta"]["notes"] if "every public_id is a number for pandas" in note]
    assert len(notes) == 1 and "(e.g. '0901', read as 901)" in notes[0] and notes[0].endswith(
        "matched with the case ids as text, as written")
    assert any("ground truth, a number for pandas" in note for note in numeric["meta"]["notes"])
    assert "every public_id is a number" in refused(example / "pred", example / "gt", example / "c", capsys,
                                                    "--strict")


def test_a_label_id_column_pandas_reads_as_text_is_refused(example, capsys):
    path = example / "pred" / "ribfrac-val-pred.csv"
    path.write_text(path.read_text().replace("RibFrac904,1,0.5,4", "RibFrac904,\u0661,0.5,4"))
    line = refused(example / "pred", example / "gt", example / "out", capsys)
    # the first case with a predicted fracture: pandas cannot merge its text label_ids (ValueError)
    assert "ribfrac-val-pred.csv: case RibFrac901: the prediction label_id column holds text" in line
