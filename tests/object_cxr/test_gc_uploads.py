"""object-CXR on grand-challenge: real JPEG/PNG/DICOM uploads converted by panimg (the GC emulator), an algorithm
that writes its points in world coordinates of the image it was given, and the evaluator mapping them to pixels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gc_uploads import write_dicom, write_jpeg, write_png
from helpers import InProcessAlgorithm
from medchallenge.contract import read_predictions_json
from medchallenge.errors import InputError
from medchallenge.evaluators.object_cxr import _read_points, main
from medchallenge.grand_challenge import emulator as gc

sitk = pytest.importorskip("SimpleITK")
pytest.importorskip("panimg")

# The object-CXR sockets the evaluator reads (the algorithm image comes in a later issue).
SPEC = gc.AlgorithmSpec(
    image="unused", inference_script="unused.py", case_patterns=("*",),
    input_socket=gc.Socket("chest-x-ray", "Image", "Image", "images/chest-x-ray"),
    output_sockets=(gc.Socket("foreign-object-likelihood", "Float", "Value", "foreign-object-likelihood.json"),
                    gc.Socket("foreign-objects", "Multiple points", "File", "foreign-objects.json")))
HIT, MISS = (5.0, 3.0), (1.0, 1.0)  # pixel (column, row): inside the ground-truth box "0 4 2 6 4", outside it


def world_point_algorithm(job_input: Path, job_output: Path, model_dir: Path) -> None:
    """Points as a GC algorithm must write them: world coordinates (mm) of the input image, via its geometry."""
    [entry] = json.loads((job_input / "inputs.json").read_text())
    [path] = (job_input / entry["interface"]["relative_path"]).iterdir()
    image = sitk.ReadImage(str(path))
    points = []
    for (x, y), probability in ((HIT, 0.9), (MISS, 0.2)):
        index = (x, y) + (0.0,) * (image.GetDimension() - 2)
        world = image.TransformContinuousIndexToPhysicalPoint(index)
        points.append({"name": "object", "point": [*world[:2], world[2] if len(world) > 2 else 0.0],
                       "probability": probability})
    (job_output / "foreign-object-likelihood.json").write_text("0.9")
    (job_output / "foreign-objects.json").write_text(json.dumps(
        {"name": "Foreign objects", "type": "Multiple points", "points": points, "version": {"major": 1, "minor": 0}}))


def emulate(tmp_path: Path, writers: dict) -> Path:
    cases = tmp_path / "cases"
    cases.mkdir()
    for name, write in writers.items():
        write(cases / name)
    return gc.emulate(SPEC, [cases / name for name in writers], tmp_path / "work", InProcessAlgorithm(world_point_algorithm))


def write_mha(path: Path) -> None:
    image = sitk.Image(8, 6, sitk.sitkUInt8)
    image.SetSpacing((0.5, 0.5))
    sitk.WriteImage(image, str(path))


def test_jpeg_and_png_uploads_map_back_to_the_ground_truth_pixels(tmp_path):
    writers = {"08001.jpg": write_jpeg, "08002.jpg": lambda p: write_jpeg(p, "grey"),
               "08003.png": lambda p: write_png(p, "grey"), "08004.png": lambda p: write_png(p, "grey16"),
               "08005.png": lambda p: write_png(p, "palette"), "08006.png": lambda p: write_png(p, "rgba")}
    eval_input = emulate(tmp_path, writers)
    (tmp_path / "gt").mkdir()
    rows = "".join(f"test/{Path(name).stem}.jpg,0 4 2 6 4\n" for name in writers)
    (tmp_path / "gt" / "annotations.csv").write_text("image_path,annotation\n" + rows)
    assert main(["--input", str(eval_input), "--ground-truth", str(tmp_path / "gt"), "--output",
                 str(tmp_path / "out"), "--no-progress", "--no-plots"]) == 0
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    for name in writers:
        assert metrics["case"][f"test/{Path(name).stem}.jpg"] == {"num_objects": 1, "probability": 0.9, "num_points": 2,
                                                                 "num_objects_hit": 1, "num_false_positives": 1}, name


@pytest.mark.parametrize("name, write", [
    ("dx.dcm", lambda p: write_dicom(p, pixel_spacing=(0.2, 0.2))),
    ("cr-no-spacing.dcm", lambda p: write_dicom(p, modality="CR", monochrome1=True)),
    ("08001.mha", write_mha),
])
def test_uploads_with_a_geometry_of_their_own_are_refused_with_one_line(tmp_path, name, write):
    eval_input = emulate(tmp_path, {name: write})
    [job] = read_predictions_json(eval_input)
    with pytest.raises(InputError, match=r"is not a JPEG/PNG upload; grand-challenge keeps its pixel spacing and "
                                         r"origin, which predictions.json does not carry") as error:
        _read_points(job)
    assert "\n" not in str(error.value)


def test_jpeg_points_are_pixels_as_read(tmp_path):
    eval_input = emulate(tmp_path, {"08001.jpg": write_jpeg})
    [job] = read_predictions_json(eval_input)
    assert _read_points(job) == [(0.9, *HIT), (0.2, *MISS)]
