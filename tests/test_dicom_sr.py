"""The SR writers' documents stay what they were: each report of fixed findings on fixed synthetic series equals the
one written before highdicom was spared re-checking the whole content tree (`sr.measurement_report`), kept as JSON in
tests/sr_documents/ (the times of writing left out: highdicom stamps them). A difference is shown element by element.
The reports at an operating point (`*-operating-point`) were added with it: the study's call, the threshold, the
findings at or above it and those kept below it, marked.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pydicom
import pytest
from dicom_helpers import dciodvfy_errors, write_tiny_series

from medchallenge.dicom.detectors import FOREIGN_OBJECT, TB_CAVERN
from medchallenge.dicom.series import find_series, read_headers, select_study_series
from medchallenge.dicom.sr import (BoxFinding, OperatingPoint, PointFinding, StudyCall, box_report, point_report,
                                   read_box_report, read_point_report, read_study_call, value_report)
from medchallenge.dicom.synthetic import SyntheticStudy, radiograph_dataset
from medchallenge.io import write_dicom_atomic

DOCUMENTS = Path(__file__).parent / "sr_documents"
STAMPED = ("DA", "TM", "DT")  # the document's dates and times of writing (and the source's, copied: left out too)
BOXES = [BoxFinding((1, 1, 0, 4, 3, 2), 0.9), BoxFinding((2, 0, 3, 6, 5, 4), 0.25)]
POINTS = [PointFinding(3.0, 4.5, 0.8), PointFinding(10.25, 20.0, 0.4), PointFinding(30.0, 1.0, 0.05)]


def reports(folder: Path) -> dict[str, object]:
    """Every kind of measurement report, of fixed findings on fixed series (UIDs derived from their keys)."""
    write_tiny_series(folder / "ct", key="sr-documents-ct", shape=(8, 6, 5))
    ((ct, _),) = select_study_series(find_series(folder / "ct"), ("CT",))
    cxr = write_dicom_atomic(folder / "cxr.dcm", radiograph_dataset(
        np.zeros((40, 32), dtype=np.uint16), SyntheticStudy("sr-documents-cxr", "SR_CXR")))
    (radiograph,) = read_headers([cxr])
    kind = dataclasses.replace(TB_CAVERN, algorithm_name="tb-caverns", algorithm_version="1")
    return {
        "boxes": box_report(ct, BOXES, kind),
        "no-boxes": box_report(ct, [], kind),
        "points": point_report(radiograph, 0.7, POINTS, FOREIGN_OBJECT),
        "values": value_report(ct, [(("volume", "99X", "Volume"), 12.5)], [(("note", "99X", "Note"), "text")],
                               [(("spot", "99X", "Spot"), PointFinding(1.0, 2.0, 0.6, 3)),
                                (("spot", "99X", "Spot"), PointFinding(4.0, 1.0, 0.3, 1))], kind),
        "boxes-operating-point": box_report(ct, BOXES, kind, OperatingPoint(0.5)),
        "no-boxes-operating-point": box_report(ct, BOXES[1:], kind, OperatingPoint(0.5)),
        "points-operating-point": point_report(radiograph, 0.7, POINTS, FOREIGN_OBJECT, OperatingPoint(0.665),
                                               OperatingPoint(0.5, keep_below=True)),
    }


def document(dataset) -> object:
    """The dataset as DICOM JSON, without the elements of STAMPED value representations."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if not (isinstance(v, dict) and v.get("vr") in STAMPED)}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(dataset.to_json_dict())


@pytest.mark.parametrize("name", ["boxes", "no-boxes", "points", "values", "boxes-operating-point",
                                  "no-boxes-operating-point", "points-operating-point"])
def test_each_report_is_the_document_written_before(tmp_path, name):
    dataset = reports(tmp_path)[name]
    expected = json.loads((DOCUMENTS / f"{name}.json").read_text())
    path = write_dicom_atomic(tmp_path / "report.dcm", dataset)
    assert document(pydicom.dcmread(path)) == expected  # as written to the file
    assert document(dataset) == expected
    assert dciodvfy_errors(path) == []


def test_reports_read_back_to_their_findings(tmp_path):
    written = reports(tmp_path)
    ((ct, _),) = select_study_series(find_series(tmp_path / "ct"), ("CT",))
    assert read_box_report(written["boxes"], ct) == BOXES
    path = write_dicom_atomic(tmp_path / "points.dcm", written["points"])
    assert read_point_report(path) == (0.7, POINTS)


def test_reports_at_an_operating_point_call_the_study_and_mark_what_is_below_it(tmp_path):
    written = reports(tmp_path)
    ((ct, _),) = select_study_series(find_series(tmp_path / "ct"), ("CT",))
    assert read_study_call(written["boxes"]) is None  # written without an operating point
    assert read_box_report(written["boxes-operating-point"], ct) == BOXES[:1]  # 0.25 < 0.5: no finding
    assert read_study_call(written["boxes-operating-point"]) == StudyCall(True, 0.9, 0.5)
    assert read_box_report(written["no-boxes-operating-point"], ct) == []
    assert read_study_call(written["no-boxes-operating-point"]) == StudyCall(False, 0.25, 0.5)
    path = write_dicom_atomic(tmp_path / "points.dcm", written["points-operating-point"])
    assert read_study_call(path) == StudyCall(True, 0.7, 0.665)
    below = [dataclasses.replace(p, below_threshold=True) for p in POINTS[1:]]
    assert read_point_report(path) == (0.7, POINTS[:1] + below)  # 0.4 and 0.05 kept, marked below 0.5
    absent = point_report(read_headers([tmp_path / "cxr.dcm"])[0], 0.3, POINTS, FOREIGN_OBJECT,
                          OperatingPoint(0.665), OperatingPoint(0.665))
    assert read_study_call(absent) == StudyCall(False, 0.3, 0.665) and read_point_report(absent) == (0.3, POINTS[:1])
