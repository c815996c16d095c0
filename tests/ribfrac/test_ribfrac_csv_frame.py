"""RibFrac CSV files read whole as pandas 1.4.4's `pd.read_csv(path)` reads them (docs/metrics/ribfrac.md §1.4) and
only the checks the official code's own operations imply (§7, §8): one test per class of issue 32. Every expected
value here is what pandas 1.4.4 gives (tests/reference/test_ribfrac_frame_reference.py checks the reader on
thousands of such files)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from medchallenge.errors import InputError
from medchallenge.evaluators.ribfrac import main
from medchallenge.formats import pandas_csv
from medchallenge.formats import ribfrac as formats
from medchallenge.metrics import ribfrac as m
from medchallenge.synth.ribfrac import write_volume

PRED_HEADER = "public_id,label_id,confidence,label_code\n"
GT_HEADER = "public_id,label_id,label_code\n"


def pred_csv(tmp_path: Path, text: str, name: str = "pred.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def test_a_repeated_header_name_is_renamed_and_the_first_column_is_read(tmp_path):
    path = pred_csv(tmp_path, "public_id,label_id,confidence,label_code,confidence\nA,1,0.3,1,0.5\n")
    assert pandas_csv.read_csv_bytes(path.read_bytes()).columns == ("public_id", "label_id", "confidence",
                                                                    "label_code", "confidence.1")
    assert formats.read_pred_csv(path).rows["A"][0].confidence == 0.3
    # pandas skips a new name the header already holds: a, a, a.1 -> a, a.2, a.1
    assert pandas_csv.read_csv("a,a,a.1\n1,2,3\n").columns == ("a", "a.2", "a.1")


def test_a_row_with_more_fields_than_the_one_before_is_pandas_error(tmp_path):
    path = pred_csv(tmp_path, PRED_HEADER + "A,0,0.5,0\nA,1,0.9,1\nA,2,0.8,1,\n")
    with pytest.raises(InputError, match=r"pred.csv: pandas 1.4.4 cannot read it \(ParserError: Error tokenizing "
                                         r"data. C error: Expected 4 fields in line 4, saw 5\)"):
        formats.read_pred_csv(path)


def test_extra_fields_on_the_first_data_row_make_an_index_and_shift_the_columns(tmp_path):
    # Excel's trailing comma on every row: the first field becomes the index, the names go to the last fields
    path = pred_csv(tmp_path, PRED_HEADER + "A,1,0.9,1,\nA,2,0.8,1,\n")
    frame = pandas_csv.read_csv_bytes(path.read_bytes())
    assert frame.index[0].values == ("A", "A") and frame.data[0].values == (1, 2)
    table = formats.read_pred_csv(path)
    assert list(table.rows) == ["1", "2"]  # public_id now holds the label ids: numbers for pandas, noted
    row = table.rows["1"][0]
    assert (row.label_id, row.confidence, row.label_code) == (0.9, 1.0, None)
    assert "every public_id is a number" in table.official_failures[0][0]


def test_rows_with_fewer_fields_are_filled_with_nan(tmp_path):
    path = pred_csv(tmp_path, PRED_HEADER + "A,0,0.5,0\nA,1\n# exported by Excel\n")
    table = formats.read_pred_csv(path)
    short = table.rows["A"][1]
    assert math.isnan(short.confidence) and short.label_code is None and short.label_id == 1
    assert math.isnan(table.rows["# exported by Excel"][0].label_id)
    # a lone carriage return ends a line: the rest of it is a row of its own
    lone = formats.read_pred_csv(pred_csv(tmp_path, PRED_HEADER + "A,1,0.9\r,1\n", "lone.csv"))
    assert math.isnan(lone.rows["A"][0].label_code or math.nan) and lone.unnamed_rows == 1


def test_blank_cell_rows_are_rows_and_change_the_column_types(tmp_path):
    gt = pred_csv(tmp_path, GT_HEADER + "A,1,True\nA,2,False\n,,\n", "gt.csv")
    table = formats.read_gt_csv(gt)
    # the NA row makes the True/False column object, whose True and False the mapping finds as 1 and 0
    assert [row.label_code for row in table.rows["A"]] == [1, 0] and table.unnamed_rows == 1
    assert table.label_id_kind == "float64"
    spaces = formats.read_gt_csv(pred_csv(tmp_path, GT_HEADER + "A,1,1\n , , \n", "spaces.csv"))
    assert spaces.label_id_kind == "object" and spaces.rows["A"][0].label_id == "1"
    assert set(spaces.rows) == {"A", " "}
    # a line of blanks only is skipped, as an empty one
    assert len(pandas_csv.read_csv("a,b\n1,2\n \t\n\n3,4\n")) == 2


def test_public_ids_are_compared_exactly(tmp_path):
    path = pred_csv(tmp_path, PRED_HEADER + 'RibFrac501 ,1,0.9,1\nRibFrac501\u00a0,2,0.9,1\n"Rib\nFrac501",3,0.9,1\n')
    assert set(formats.read_pred_csv(path).rows) == {"RibFrac501 ", "RibFrac501\u00a0", "Rib\nFrac501"}


def test_a_nul_byte_ends_a_field(tmp_path):
    path = pred_csv(tmp_path, PRED_HEADER + "A,1,0.9\x00junk,1\x00\n")
    row = formats.read_pred_csv(path).rows["A"][0]
    assert (row.confidence, row.confidence_text, row.label_code) == (0.9, None, 1)


def test_cells_the_official_code_never_reads_are_not_checked(tmp_path):
    path = pred_csv(tmp_path, PRED_HEADER + "A,1,0.9,1\nB,300,0.5,1\nB,,0.5,1\nB,2.5,0.5,1\n")
    assert [row.label_id for row in formats.read_pred_csv(path).rows["B"]][0] == 300
    repeated = formats.read_pred_csv(pred_csv(tmp_path, PRED_HEADER + "A,0,0.5,0\n" + PRED_HEADER, "r.csv"))
    assert repeated.label_id_kind == "object"
    missing = formats.read_pred_csv(pred_csv(tmp_path, "public_id,label_id,Confidence,label_code\nA,0,0.5,0\n",
                                             "c.csv"))
    assert "no column confidence" in missing.missing


def test_text_label_ids_fail_the_merge_only_where_the_case_has_text():
    assert m.unmergeable_labels("object", ["1"]) and m.unmergeable_labels("object", [True, math.nan])
    assert not m.unmergeable_labels("object", []) and not m.unmergeable_labels("object", [math.nan])
    assert not m.unmergeable_labels("object", [True, False]) and not m.unmergeable_labels("float64", [1.0])


def case_folders(tmp_path: Path, predicted: bool, pred_text: str) -> tuple[Path, Path]:
    gt, pred = np.zeros((12, 12, 6), np.uint8), np.zeros((12, 12, 6), np.uint8)
    gt[2:6, 2:6, 1:4] = 1
    if predicted:
        pred[2:6, 2:6, 1:4] = 1
    write_volume(tmp_path / "gt" / "A-label.nii.gz", gt)
    write_volume(tmp_path / "pred" / "A.nii.gz", pred)
    (tmp_path / "gt" / "info.csv").write_text(GT_HEADER + "A,0,0\nA,1,1\n")
    (tmp_path / "pred" / "pred.csv").write_bytes(pred_text.encode())
    return tmp_path / "pred", tmp_path / "gt"


def evaluate(pred: Path, gt: Path, out: Path, capsys) -> tuple[int, dict | str]:
    code = main(["--input", str(pred), "--ground-truth", str(gt), "--output", str(out), "--no-progress",
                 "--no-plots", "--workers", "1"])
    if code == 0:
        return code, json.loads((out / "metrics.json").read_text())
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return code, lines[0]


@pytest.mark.parametrize("pred_text", [
    "public_id,label_id,Confidence,label_code\nA,0,0.5,0\n",  # the official code never selects the confidence
    PRED_HEADER + "A,0,0.5,0\n" + PRED_HEADER,  # a text label_id column is never merged
])
def test_an_empty_prediction_mask_scores_what_the_official_code_scores(tmp_path, capsys, pred_text):
    code, metrics = evaluate(*case_folders(tmp_path, False, pred_text), tmp_path / "out", capsys)
    assert code == 0 and metrics["aggregates"]["macro_f1"] == 0.0
    # with a predicted fracture the official code reads them and fails: one error line
    code, line = evaluate(*case_folders(tmp_path / "p", True, pred_text.replace("A,0,0.5,0\n", "A,0,0.5,0\n"
                                                                                 "A,1,0.9,1\n", 1)),
                          tmp_path / "p" / "out", capsys)
    assert code == 1 and "pred.csv" in line and ("no column confidence" in line or "cannot merge" in line)
