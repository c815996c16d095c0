"""RibFrac on DICOM: a CT study in, the challenge files and a DICOM SEG out (one segment per fracture with its type
and confidence), valid, referencing the source instances, read back with highdicom to the NIfTI instance map."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pydicom
import pytest
import SimpleITK as sitk
from dicom_helpers import dciodvfy_errors, write_tiny_series

from medchallenge.algorithms.ribfrac import ALGORITHM, PREDICTIONS_CSV
from medchallenge.algorithms.runner import main
from medchallenge.dicom.detectors import RIB_FRACTURE, rib_fracture_type
from medchallenge.dicom.seg import SegmentFinding, label_segmentation, read_label_segmentation
from medchallenge.dicom.series import find_series, select_study_series
from medchallenge.dicom.sr import read_box_report
from medchallenge.dicom.synthetic import SyntheticStudy, ras_affine, write_ct_series
from medchallenge.synth.ribfrac_ct import case_rng, generate_case, write_image

MODEL = Path(__file__).resolve().parents[2] / "algorithms" / "ribfrac" / "model" / "ribfrac.onnx"
SHAPE = (112, 104, 40)
SPACING = (0.75, 0.75, 1.25)
SEG_STORAGE = "1.2.840.10008.5.1.4.1.1.66.4"


def run_ribfrac(input_dir: Path, output_dir: Path) -> int:
    return main(ALGORITHM, ["--input", str(input_dir), "--output", str(output_dir), "--model",
                            str(input_dir / "none"), "--device", "cpu"], baked_model_dir=MODEL.parent)


def only_series(folder: Path):
    ((series, _),) = select_study_series(find_series(folder), ("CT",))
    return series


def results_of(output: Path, series) -> list[pydicom.Dataset]:
    return [ds for ds in map(pydicom.dcmread, sorted((output / "dicom").glob("*.dcm")))
            if ds.StudyInstanceUID == series.study_uid]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three synthetic rib CTs as NIfTI and as DICOM studies, both run through the real model."""
    root = tmp_path_factory.mktemp("ribfrac_dicom")
    for index in range(3):
        case = generate_case(case_rng(4, index), SHAPE, spacing=SPACING)
        origin = tuple(round(v, 2) for v in case.origin)  # a geometry the DICOM decimal strings hold exactly
        name = f"RibFrac{501 + index}"
        write_image(root / "nifti" / f"{name}-image.nii.gz", case.ct, SPACING, origin)
        write_ct_series(root / "dicom" / name, case.ct.T, ras_affine(SPACING, origin),
                        SyntheticStudy(f"ribfrac-test-{index}", name))
    assert run_ribfrac(root / "nifti", root / "out-nifti") == 0
    assert run_ribfrac(root / "dicom", root / "out-dicom") == 0
    return root


def test_dicom_study_gives_the_instances_and_csv_of_the_same_ct_as_nifti(runs):
    assert (runs / "out-dicom" / PREDICTIONS_CSV).read_text() == (runs / "out-nifti" / PREDICTIONS_CSV).read_text()
    for index in range(3):
        name = f"RibFrac{501 + index}.nii.gz"
        dicom, nifti = (sitk.ReadImage(str(runs / f"out-{kind}" / name)) for kind in ("dicom", "nifti"))
        assert np.array_equal(sitk.GetArrayFromImage(dicom), sitk.GetArrayFromImage(nifti))
        assert dicom.GetOrigin() == pytest.approx(nifti.GetOrigin(), abs=1e-3)


def test_the_seg_reads_back_to_the_nifti_instance_map_types_and_confidences(runs):
    with open(runs / "out-dicom" / PREDICTIONS_CSV, newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["label_id"] != "0"]
    segs = 0
    for index in range(3):
        name = f"RibFrac{501 + index}"
        series = only_series(runs / "dicom" / name)
        (result,) = results_of(runs / "out-dicom", series)
        expected = [SegmentFinding(int(r["label_id"]), rib_fracture_type(int(r["label_code"])), float(r["confidence"]))
                    for r in rows if r["public_id"] == name]
        if not expected:  # no fracture: an SR saying so (a SEG needs a segment)
            assert result.Modality == "SR" and read_box_report(result, series) == []
            continue
        segs += 1
        assert result.SOPClassUID == SEG_STORAGE
        labels, segments = read_label_segmentation(result, series)
        instances = sitk.GetArrayFromImage(sitk.ReadImage(str(runs / "out-dicom" / f"{name}.nii.gz")))
        assert np.array_equal(labels, instances)
        assert segments == expected
    assert segs >= 1, "no case with a fracture: the SEG was not exercised"


def test_the_seg_is_valid_and_references_the_source_series(runs):
    for index in range(3):
        series = only_series(runs / "dicom" / f"RibFrac{501 + index}")
        (result,) = results_of(runs / "out-dicom", series)
        path = runs / "out-dicom" / "dicom" / f"{result.SOPInstanceUID}.dcm"
        assert dciodvfy_errors(path) == []
        assert (result.PatientID, result.StudyInstanceUID) == (f"RibFrac{501 + index}", series.study_uid)
        assert result.SeriesInstanceUID != series.series_uid and result.SOPInstanceUID not in series.sop_instance_uids
        if result.Modality != "SEG":
            continue
        referenced = {item.ReferencedSOPInstanceUID
                      for item in result.ReferencedSeriesSequence[0].ReferencedInstanceSequence}
        assert result.ReferencedSeriesSequence[0].SeriesInstanceUID == series.series_uid
        assert referenced == set(series.sop_instance_uids)
        frame_sources = {frame.DerivationImageSequence[0].SourceImageSequence[0].ReferencedSOPInstanceUID
                         for frame in result.PerFrameFunctionalGroupsSequence}
        assert frame_sources and frame_sources <= set(series.sop_instance_uids)


def test_label_segmentation_keeps_each_instance_its_type_and_confidence(tmp_path):
    volume, _, _ = write_tiny_series(tmp_path / "ct", shape=(12, 10, 6))
    series = only_series(tmp_path / "ct")
    labels = np.zeros((6, 10, 12), dtype=np.uint8)
    labels[1:3, 2:5, 3:7] = 1
    labels[4, 6:9, 1:3] = 2
    labels[5, 0, 11] = 3
    segments = [SegmentFinding(1, rib_fracture_type(4), 0.9), SegmentFinding(2, rib_fracture_type(3), 0.5),
                SegmentFinding(3, rib_fracture_type(-1), 0.123457)]  # -1: a fracture of uncertain type
    seg = label_segmentation(series, labels, segments, RIB_FRACTURE)
    seg.save_as(tmp_path / "seg.dcm", enforce_file_format=True)
    assert dciodvfy_errors(tmp_path / "seg.dcm") == []
    read_labels, read_segments = read_label_segmentation(tmp_path / "seg.dcm", series)
    assert np.array_equal(read_labels, labels) and read_segments == segments
    assert len(seg.PerFrameFunctionalGroupsSequence) == 4  # one frame per segment and slice it is on, no empty one
    first = seg.SegmentSequence[0]
    assert first.SegmentedPropertyTypeCodeSequence[0].CodeValue == "72704001"  # SNOMED CT Fracture
    assert first.AnatomicRegionSequence[0].CodeValue == "113197003"  # Rib
    assert first.SegmentDescription == "Segmental rib fracture, confidence 0.900000"
    # another result of the same series is another object; the same result the same object
    again = label_segmentation(series, labels, segments, RIB_FRACTURE)
    other = label_segmentation(series, labels, segments[:2], RIB_FRACTURE)
    assert again.SOPInstanceUID == seg.SOPInstanceUID and other.SOPInstanceUID != seg.SOPInstanceUID


def test_a_ct_without_fractures_gets_a_valid_sr_saying_so(tmp_path):
    from types import SimpleNamespace

    from medchallenge.dicom.detectors import rib_fracture_results

    write_tiny_series(tmp_path / "ct")
    series = only_series(tmp_path / "ct")
    (report,) = rib_fracture_results(series, SimpleNamespace(detections=[], instances=None))
    report.save_as(tmp_path / "sr.dcm", enforce_file_format=True)
    assert report.Modality == "SR" and dciodvfy_errors(tmp_path / "sr.dcm") == []
    assert read_box_report(tmp_path / "sr.dcm", series) == []
    assert report.ContentSequence  # the finding type, absent
