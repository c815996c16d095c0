"""RibFrac file formats: case ids, CSV rows, GC detections, label volumes in the official axis order."""

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from medchallenge.errors import InputError
from medchallenge.formats import ribfrac as f
from medchallenge.synth.ribfrac import write_volume

FIXTURES = Path(__file__).parent / "fixtures"


def test_case_ids_follow_the_official_regex():
    assert f.case_id_from_filename("RibFrac1-label.nii.gz") == "RibFrac1"
    assert f.case_id_from_filename("/x/RibFrac1.nii") == "RibFrac1"
    # every occurrence is removed, as re.sub does in the official code
    assert f.case_id_from_filename("a.nii-label.gz-b.nii.gz") == "a-b"
    assert f.case_id_from_gc_image_name("RibFrac501-image.nii.gz") == "RibFrac501"
    assert f.case_id_from_gc_image_name("RibFrac501.mha") == "RibFrac501"


def test_csv_rows_keep_duplicates_and_order(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("\ufeffpublic_id, label_id ,confidence,label_code,extra\n"
                    "A,1,0.5,1,x\nA,1,0.25,-1,y\nB,2.0,1e-1,0,z\n\n")
    table = f.read_pred_csv(path)
    assert table.rows == {"A": [f.PredRow(1, 0.5, 1), f.PredRow(1, 0.25, -1)], "B": [f.PredRow(2, 0.1, 0)]}
    # pandas keeps ' label_id ': the official code fails (KeyError); accepted, the evaluator notes it
    assert len(table.official_failures) == 1 and "' label_id '" in table.official_failures[0][0]


def test_a_confidence_that_is_no_number_makes_pandas_read_the_column_as_text(tmp_path):
    # pandas keeps the whole column as strings ('0.5' too): the official FROC comparison fails on every row it
    # reads (labels 1..max of a prediction mask); rows it never reads do not matter (decided per case)
    path = tmp_path / "p.csv"
    path.write_text("public_id,label_id,confidence,label_code\nA,0,high,0\nA,1,0.5,1\nA,2,,1\n")
    background, first, blank = f.read_pred_csv(path).rows["A"]
    assert background.confidence_text == "'high' (no number for pandas)" and np.isnan(background.confidence)
    assert first.confidence == 0.5
    assert first.confidence_text == "'0.5' (held as text: line 2's confidence is no number for pandas)"
    assert blank.confidence_text is None and np.isnan(blank.confidence)  # NA stays NaN in a text column
    path.write_text("public_id,label_id,confidence,label_code\nA,0,1_0,0\nA,1,0.5,1\n")  # pandas: no number
    assert f.read_pred_csv(path).rows["A"][1].confidence_text is not None


def test_confidences_are_read_as_pandas_reads_them(tmp_path):
    # blank and pandas' NA strings are NaN, inf is a number; the background row's confidence is never read
    path = tmp_path / "p.csv"
    path.write_text("public_id,label_id,confidence,label_code\nA,1,,1\nA,2,NA,1\nA,3,inf,1\nA,4,-inf,1\nA,0,nan,0\n")
    rows = f.read_pred_csv(path).rows["A"]
    confidences = [row.confidence for row in rows]
    assert np.isnan(confidences[0]) and np.isnan(confidences[1]) and confidences[2:4] == [np.inf, -np.inf]
    assert f.non_finite_confidences(rows) == 4 and all(row.confidence_text is None for row in rows)
    assert np.isnan(f.parse_detections({"detections": [{"label_id": 1, "confidence": None, "label_code": 1}]},
                                       "d.json")[0].confidence)


def test_label_codes_are_what_the_official_mapping_finds(tmp_path):
    # label_code_dict maps -1..4; pandas reads 1.0 as a number equal to 1; anything else (another number, a blank
    # or NA cell) is NaN -> None, and the official code fails only where it reads such a row (decided per case)
    path = tmp_path / "gt.csv"
    codes = ["5", "", "NA", "1.0", "-1", "1.5", "inf", "-0", "4"]
    path.write_text("public_id,label_id,label_code\n" + "".join(f"A,{k},{c}\n" for k, c in enumerate(codes)))
    table = f.read_gt_csv(path)
    rows = table.rows["A"]
    assert [row.label_code for row in rows] == [None, None, None, 1, -1, None, None, 0, 4]
    assert rows[0].where == f"{path}: line 2" and rows[0].code_text == "5"
    assert table.text_code is None
    # one code that is text: pandas reads every code as text, which the mapping finds nowhere
    path.write_text("public_id,label_id,label_code\nA,0,0\nA,1,x\nB,1,2\n")
    table = f.read_gt_csv(path)
    assert [row.label_code for rows in table.rows.values() for row in rows] == [None, None, None]
    assert table.text_code == "x"


def test_gt_label_ids_are_kept_as_pandas_holds_them(tmp_path):
    # the official code compares them with the hit labels (1..255): 1.5 and 256 are never hit, so FN of their class
    path = tmp_path / "gt.csv"
    path.write_text("public_id,label_id,label_code\nA,0,0\nA,1.5,1\nA,256,1\n")
    assert [row.label_id for row in f.read_gt_csv(path).rows["A"]] == [0.0, 1.5, 256.0]


def test_detections_json():
    rows = f.parse_detections({"version": 1, "detections": [
        {"label_id": 2, "confidence": 0.75, "label_code": 4, "center_mm": [1, 2, 3]}]}, "d.json")
    assert rows == [f.PredRow(2, 0.75, 4)]
    with pytest.raises(InputError, match="d.json: detections\\[0\\]: confidence True"):
        f.parse_detections({"detections": [{"label_id": 1, "confidence": True, "label_code": 1}]}, "d.json")
    # as the same CSV rows: null or another number is NaN (None); the background entry's confidence is never read
    rows = f.parse_detections({"detections": [{"label_id": 0, "confidence": "n/a!", "label_code": 7},
                                              {"label_id": 1, "confidence": 0.5, "label_code": None},
                                              {"label_id": 2, "confidence": 0.5, "label_code": 2.0}]}, "d.json")
    assert [row.label_code for row in rows] == [None, None, 2] and rows[0].where == "d.json: detections[0]"
    with pytest.raises(InputError, match="d.json: detections\\[0\\]: label_code 'x' is not a number"):
        f.parse_detections({"detections": [{"label_id": 1, "confidence": 0.5, "label_code": "x"}]}, "d.json")
    with pytest.raises(InputError, match="list 'detections'"):
        f.parse_detections([], "d.json")


def test_label_volume_has_the_nibabel_axis_order():
    path = FIXTURES / "gt" / "RibFrac901-label.nii.gz"
    labels = f.read_label_volume(path)
    reference = np.asanyarray(nib.load(path).dataobj)
    assert labels.dtype == np.uint8 and labels.shape == reference.shape == (48, 48, 24)
    assert np.array_equal(labels, reference)


@pytest.mark.parametrize("dtype", [np.int16, np.uint16, np.float32])
def test_other_stored_types_are_read_and_cast(tmp_path, dtype):
    labels = np.zeros((6, 5, 4), dtype)
    labels[1, 2, 3] = 255
    labels[5, 0, 0] = 3
    path = tmp_path / "v.nii.gz"
    write_volume(path, labels, dtype)
    read = f.read_label_volume(path)
    assert read.dtype == np.uint8 and read[1, 2, 3] == 255 and read[5, 0, 0] == 3 and read.sum() == 258


def test_negative_labels_and_non_3d_images_are_refused(tmp_path):
    import SimpleITK as sitk

    labels = np.zeros((4, 4, 4), np.int16)
    labels[0, 0, 0] = -1
    write_volume(tmp_path / "neg.nii.gz", labels, np.int16)
    with pytest.raises(InputError, match="neg.nii.gz: label values must be in 0..255"):
        f.read_label_volume(tmp_path / "neg.nii.gz")
    sitk.WriteImage(sitk.GetImageFromArray(np.zeros((4, 4), np.uint8)), str(tmp_path / "flat.nii.gz"))
    with pytest.raises(InputError, match="flat.nii.gz: expected a 3-D"):
        f.read_label_volume(tmp_path / "flat.nii.gz")
    (tmp_path / "junk.nii.gz").write_bytes(b"not a volume")
    with pytest.raises(InputError, match="junk.nii.gz: cannot read"):
        f.read_label_volume(tmp_path / "junk.nii.gz")


def test_two_volumes_for_one_case_are_refused(tmp_path):
    for name in ("RibFrac1.nii.gz", "RibFrac1-label.nii"):
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(InputError, match="case RibFrac1 has two volumes"):
        f.list_volumes(tmp_path)
