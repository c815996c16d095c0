"""object-CXR on DICOM: CR radiographs in (synthetic, `--format dicom`), the official CSVs and one DICOM SR per
image out (TID 1500: image-level probability, SCOORD POINTs on the source image), valid, read back to the CSVs."""

from __future__ import annotations

import numpy as np
import pydicom
from dicom_helpers import dciodvfy_errors
from pathlib import Path

from PIL import Image

from medchallenge.algorithms.object_cxr import ALGORITHM
from medchallenge.algorithms.runner import main
from medchallenge.dicom.sr import read_point_report
from medchallenge.dicom.synthetic import SyntheticStudy, radiograph_dataset
from medchallenge.io import write_dicom_atomic
from medchallenge.synth.__main__ import main as synth
from medchallenge.synth.object_cxr_images import generate_image

COMPREHENSIVE_SR = "1.2.840.10008.5.1.4.1.1.88.33"
BRIGHT_SPOT_MODEL = Path(__file__).parent / "fixtures" / "bright_spot.onnx"  # points on what is bright


def square_radiograph() -> np.ndarray:
    """A dark 96 x 80 image with a bright square at columns 56-75, rows 20-39."""
    pixels = np.full((80, 96), 30, dtype=np.uint8)
    pixels[20:40, 56:76] = 220
    return pixels


def csv_rows(path: Path) -> dict[str, str]:
    return dict(line.split(",", 1) for line in path.read_text().splitlines()[1:])


def test_synth_format_dicom_writes_cr_studies_with_the_jpeg_cohort_pixels(tmp_path):
    args = ["object-cxr-images", "--out", str(tmp_path), "--images", "2", "--seed", "3", "--size", "256",
            "--format", "dicom"]
    assert synth(args) == 0
    assert sorted(p.name for p in (tmp_path / "input").iterdir()) == ["08001.dcm", "08002.dcm"]
    names = [line.split(",")[0] for line in (tmp_path / "ground_truth" / "annotations.csv").read_text().splitlines()]
    assert names[1:] == ["08001.dcm", "08002.dcm"]
    studies = set()
    for index, name in enumerate(["08001.dcm", "08002.dcm"]):
        ds = pydicom.dcmread(tmp_path / "input" / name)
        assert np.array_equal(ds.pixel_array, generate_image(3, index, 256, 0.5).pixels)
        assert (ds.Modality, ds.BodyPartExamined, ds.PatientID) == ("CR", "CHEST", name[:5])
        studies.add(ds.StudyInstanceUID)
        assert dciodvfy_errors(tmp_path / "input" / name) == []
    assert len(studies) == 2


def test_the_sr_of_each_radiograph_reads_back_to_the_official_csvs(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / ALGORITHM.model_file).write_bytes(BRIGHT_SPOT_MODEL.read_bytes())
    inputs = tmp_path / "input"
    assert synth(["object-cxr-images", "--out", str(tmp_path), "--images", "2", "--seed", "3", "--size", "256",
                  "--format", "dicom", "--positive-fraction", "1"]) == 0
    square = radiograph_dataset(square_radiograph(), SyntheticStudy("square", "SQUARE"))
    del square.PatientBirthDate, square.StudyID, square.AccessionNumber  # type 2, left out by a careless exporter
    write_dicom_atomic(inputs / "square.dcm", square)
    Image.fromarray(square_radiograph()).save(inputs / "square.png")  # a PNG case gets no SR
    assert main(ALGORITHM, ["--input", str(inputs), "--output", str(tmp_path / "out"), "--model", str(model),
                            "--device", "cpu"]) == 0
    probabilities = csv_rows(tmp_path / "out" / "classification.csv")
    points = {name: [tuple(map(float, t.split(" "))) for t in text.split(";") if t]
              for name, text in csv_rows(tmp_path / "out" / "localization.csv").items()}
    assert points["square.dcm"] and all(55 <= x <= 76 and 19 <= y <= 40 for _, x, y in points["square.dcm"])
    reports = {pydicom.dcmread(p).StudyInstanceUID: p for p in (tmp_path / "out" / "dicom").glob("*.dcm")}
    assert len(reports) == 3
    for name in ("08001.dcm", "08002.dcm", "square.dcm"):
        source = pydicom.dcmread(inputs / name)
        path = reports[source.StudyInstanceUID]
        assert dciodvfy_errors(path) == []
        sr = pydicom.dcmread(path)
        assert sr.SOPClassUID == COMPREHENSIVE_SR and sr.PatientID == source.PatientID
        assert sr.SeriesInstanceUID != source.SeriesInstanceUID
        (evidence,) = sr.CurrentRequestedProcedureEvidenceSequence
        (instance,) = evidence.ReferencedSeriesSequence[0].ReferencedSOPSequence
        assert instance.ReferencedSOPInstanceUID == source.SOPInstanceUID
        probability, sr_points = read_point_report(path)
        assert round(probability, 6) == float(probabilities[name])
        assert [(round(p.probability, 6), round(p.x, 1), round(p.y, 1)) for p in sr_points] == \
            [(round(s, 6), x, y) for s, x, y in points[name]]
    assert points["08001.dcm"] or points["08002.dcm"], "no point on the synthetic radiographs: SCOORDs not exercised"
