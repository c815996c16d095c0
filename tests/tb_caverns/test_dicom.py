"""TB caverns on DICOM: a CT study in, the challenge files and a DICOM SR (TID 1500) out, the SR valid and read back
to the same boxes; the same case as NIfTI gives the same boxes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pydicom
import pytest
from dicom_helpers import dciodvfy_errors

from medchallenge.algorithms.runner import main
from medchallenge.algorithms.tb_caverns import ALGORITHM
from medchallenge.dicom.series import find_series, select_study_series
from medchallenge.dicom.sr import read_box_report
from medchallenge.dicom.synthetic import SyntheticStudy, write_ct_series
from medchallenge.synth.tb_caverns import case_rng, generate_case, save_nifti

MODEL = Path(__file__).resolve().parents[2] / "algorithms" / "tb_caverns" / "model" / "tb_caverns.onnx"
SHAPE = (300, 250, 71)


def run_tb(input_dir: Path, output_dir: Path) -> int:
    return main(ALGORITHM, ["--input", str(input_dir), "--output", str(output_dir), "--model", str(input_dir / "none"),
                            "--device", "cpu"], baked_model_dir=MODEL.parent)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One planted cavern (TST_001) and a cavern-free CT (TST_002), as NIfTI and as DICOM studies, both run."""
    root = tmp_path_factory.mktemp("tb_dicom")
    for index, caverns in ((0, 1), (1, 0)):
        case = generate_case(case_rng(7, index), SHAPE, n_caverns=caverns, cavern_radius_mm=(14.0, 17.0))
        save_nifti(root / "nifti" / f"TST_00{index + 1}.nii.gz", case.ct, case.affine)
        write_ct_series(root / "dicom" / f"TST_00{index + 1}", case.ct, case.affine,
                        SyntheticStudy(f"tb-test-{index}", f"TST_00{index + 1}"))
    assert run_tb(root / "nifti", root / "out-nifti") == 0
    assert run_tb(root / "dicom", root / "out-dicom") == 0
    return root


def source_series(root: Path, case: str):
    ((series, _),) = select_study_series(find_series(root / "dicom" / case), ("CT",))
    return series


def report_of(root: Path, series) -> Path:
    (path,) = [p for p in (root / "out-dicom" / "dicom").glob("*.dcm")
               if pydicom.dcmread(p).StudyInstanceUID == series.study_uid]
    return path


def test_dicom_study_gives_the_boxes_of_the_same_ct_as_nifti(runs):
    nifti = (runs / "out-nifti" / "submission.txt").read_text().splitlines()
    dicom = (runs / "out-dicom" / "submission.txt").read_text().splitlines()
    assert nifti and [line.replace(".nii.gz,", ",", 1) for line in nifti] == dicom  # cases named by study folder
    assert json.loads((runs / "out-dicom" / "TST_001.json").read_text())["boxes"] == \
        json.loads((runs / "out-nifti" / "TST_001.json").read_text())["boxes"]


def test_the_sr_reads_back_to_the_challenge_boxes_and_probabilities(runs):
    series = source_series(runs, "TST_001")
    result = json.loads((runs / "out-dicom" / "TST_001.json").read_text())
    findings = read_box_report(report_of(runs, series), series)
    assert [list(f.corners) for f in findings] == [b["voxel_bbox"] for b in result["boxes"]]
    assert [f.probability for f in findings] == [b["probability"] for b in result["boxes"]]
    empty = source_series(runs, "TST_002")
    assert read_box_report(report_of(runs, empty), empty) == []  # a study without findings still gets its report


def test_the_sr_is_valid_and_references_the_source_study(runs):
    series = source_series(runs, "TST_001")
    path = report_of(runs, series)
    assert dciodvfy_errors(path) == []
    assert dciodvfy_errors(report_of(runs, source_series(runs, "TST_002"))) == []  # the report without findings
    sr = pydicom.dcmread(path)
    assert sr.Modality == "SR" and sr.SOPClassUID == "1.2.840.10008.5.1.4.1.1.88.33"  # Comprehensive SR
    assert (sr.PatientID, sr.StudyInstanceUID) == ("TST_001", series.study_uid)
    assert sr.SeriesInstanceUID != series.series_uid and sr.SOPInstanceUID not in series.sop_instance_uids
    (evidence,) = sr.CurrentRequestedProcedureEvidenceSequence
    (referenced,) = evidence.ReferencedSeriesSequence
    assert referenced.SeriesInstanceUID == series.series_uid
    assert sorted(i.ReferencedSOPInstanceUID for i in referenced.ReferencedSOPSequence) == \
        sorted(series.sop_instance_uids)
    assert path.name == f"{sr.SOPInstanceUID}.dcm"


def test_the_same_result_of_the_same_series_is_the_same_object(runs, tmp_path):
    assert run_tb(runs / "dicom", tmp_path / "again") == 0
    assert sorted(p.name for p in (tmp_path / "again" / "dicom").iterdir()) == \
        sorted(p.name for p in (runs / "out-dicom" / "dicom").iterdir())


def test_a_tilted_study_is_one_error_line_and_no_output(runs, tmp_path):
    for path in sorted((runs / "dicom" / "TST_002").iterdir())[:3]:
        ds = pydicom.dcmread(path)
        ds.GantryDetectorTilt = "20"
        ds.save_as(tmp_path / path.name)
    for path in sorted((runs / "dicom" / "TST_002").iterdir())[3:10]:
        (tmp_path / path.name).write_bytes(path.read_bytes())
    script = MODEL.parents[1] / "inference.py"
    done = subprocess.run([sys.executable, str(script), "--input", str(tmp_path), "--output", str(tmp_path / "o"),
                           "--device", "cpu"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: study ")
    assert "gantry tilt 20 degrees" in done.stderr and not (tmp_path / "o").exists()


def test_synth_format_dicom_writes_the_cohort_as_ct_studies(tmp_path):
    import numpy as np
    import SimpleITK as sitk

    from medchallenge.dicom.series import read_volume
    from medchallenge.synth.__main__ import main as synth

    common = ["--cases", "2", "--seed", "4", "--shape", "40", "36", "8", "--spacing", "2", "2", "5"]
    assert synth(["tb-caverns", "--out", str(tmp_path / "d"), "--format", "dicom", *common]) == 0
    assert synth(["tb-caverns", "--out", str(tmp_path / "n"), *common]) == 0
    assert sorted(p.name for p in (tmp_path / "d" / "input").iterdir()) == ["TST_001", "TST_002"]
    assert (tmp_path / "d" / "ground_truth" / "gt_boxes.csv").read_text() == \
        (tmp_path / "n" / "ground_truth" / "gt_boxes.csv").read_text()
    chosen = select_study_series(find_series(tmp_path / "d" / "input"), ("CT",))
    assert len(chosen) == 2 and len({s.study_uid for s, _ in chosen}) == 2  # one study per case
    series, spacing = next((s, sp) for s, sp in chosen if s.first.PatientID == "TST_002")
    image, nifti = read_volume(series, spacing), sitk.ReadImage(str(tmp_path / "n" / "input" / "TST_002.nii.gz"))
    assert np.array_equal(sitk.GetArrayFromImage(image), sitk.GetArrayFromImage(nifti))
    assert np.allclose(image.GetOrigin(), nifti.GetOrigin(), atol=1e-4)
    assert np.allclose(image.GetDirection(), nifti.GetDirection())
    first = series.first
    assert (first.Modality, first.BodyPartExamined, first.RescaleIntercept) == ("CT", "CHEST", -1024)
    assert dciodvfy_errors(series.files[0]) == []
