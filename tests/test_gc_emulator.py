"""The grand-challenge emulator without Docker: panimg uploads, job layout, /opt/ml/model, outputs, evaluation input."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from gc_uploads import GREY16, HEIGHT, RGB, WIDTH, write_dicom, write_jpeg, write_png
from helpers import InProcessAlgorithm
from medchallenge.grand_challenge import emulator as gc
from medchallenge.grand_challenge.emulator import AlgorithmSpec, EmulationError, Socket

sitk = pytest.importorskip("SimpleITK")
pytest.importorskip("panimg")

IMAGE_IN = Socket("medical-image", "Image", "Image", "images/medical-image")
SCORE = Socket("score", "Float", "Value", "score.json")
REPORT = Socket("report", "Anything", "Value", "report.json")
POINTS = Socket("points", "Multiple points", "File", "points.json")
MASK = Socket("mask", "Image", "Image", "images/mask")
SPEC = AlgorithmSpec(image="unused", inference_script="unused.py", case_patterns=("*",), input_socket=IMAGE_IN,
                     output_sockets=(SCORE, REPORT, POINTS, MASK))


class FakeAlgorithm:
    """An algorithm that records what a job saw and writes every declared output plus undeclared extras."""

    def __init__(self, skip: str | None = None):
        self.seen: list[dict] = []
        self.skip = skip

    def __call__(self, job_input: Path, job_output: Path, model_dir: Path) -> None:
        inputs = json.loads((job_input / "inputs.json").read_text())
        files = sorted(p.relative_to(job_input).as_posix() for p in job_input.rglob("*") if p.is_file())
        image = sitk.ReadImage(str(job_input / files[0]))
        self.seen.append({"inputs": inputs, "files": files, "model": sorted(p.name for p in model_dir.iterdir()),
                          "size": image.GetSize()})
        outputs = {"score.json": "0.25", "report.json": '{"value": NaN, "ok": true}',
                   "points.json": '{"type": "Multiple points", "points": [], "version": {"major": 1, "minor": 0}}',
                   "extra.json": "1", "notes/debug.txt": "scratch"}
        for name, text in outputs.items():
            if name != self.skip:
                (job_output / name).parent.mkdir(parents=True, exist_ok=True)
                (job_output / name).write_text(text)
        (job_output / "images" / "mask").mkdir(parents=True)
        sitk.WriteImage(sitk.Image(4, 3, sitk.sitkUInt8), str(job_output / "images" / "mask" / "output.mha"))
        (job_output / "images" / "leftover").mkdir()
        (job_output / "images" / "leftover" / "x.mha").write_bytes(b"not declared")


def nifti_case(path: Path) -> Path:
    image = sitk.GetImageFromArray(np.arange(2 * 3 * 4, dtype=np.int16).reshape(2, 3, 4))
    image.SetSpacing((0.7, 0.8, 2.5))
    image.SetOrigin((-10.0, 20.0, 30.0))
    image.SetDirection((0, 1, 0, 1, 0, 0, 0, 0, -1))
    sitk.WriteImage(image, str(path))
    return path


def test_nifti_upload_keeps_geometry_and_is_stored_as_image_pk_mha(tmp_path):
    case = nifti_case(tmp_path / "TST_007.nii.gz")
    image = gc.upload_case(case, tmp_path / "store")
    assert image.name == "TST_007.nii.gz" and image.image_type == "MHD"
    assert image.file.name == f"{image.pk}.mha"
    original, converted = sitk.ReadImage(str(case)), sitk.ReadImage(str(image.file))
    for attribute in ("GetSize", "GetSpacing", "GetOrigin", "GetDirection", "GetPixelIDValue"):
        assert np.allclose(getattr(converted, attribute)(), getattr(original, attribute)()), attribute
    assert np.array_equal(sitk.GetArrayFromImage(converted), sitk.GetArrayFromImage(original))


def test_job_layout_model_dir_outputs_and_evaluation_input(tmp_path):
    cases = [nifti_case(tmp_path / "TST_001.nii.gz"), write_jpeg(tmp_path / "08001.jpg")]
    algorithm = FakeAlgorithm()
    eval_input = gc.emulate(SPEC, cases, tmp_path / "work", InProcessAlgorithm(algorithm))

    # each job: inputs.json as GC serialises it, the upload as <image-pk>.mha, an empty /opt/ml/model
    for seen, name, size in zip(algorithm.seen, ["TST_001.nii.gz", "08001.jpg"], [(4, 3, 2), (WIDTH, HEIGHT)]):
        [entry] = seen["inputs"]
        assert set(entry) == {"socket", "interface", "value", "file", "image", "pk"}
        assert entry["socket"] == entry["interface"] and entry["interface"]["relative_path"] == "images/medical-image"
        assert entry["image"]["name"] == name and entry["value"] is None and entry["file"] is None
        assert seen["files"] == ["images/medical-image/" + entry["image"]["pk"] + ".mha", "inputs.json"]
        assert seen["model"] == [] and seen["size"] == size

    # predictions.json: the JobSerializer shape; only declared outputs, values as GC stores them
    jobs = json.loads((eval_input / "predictions.json").read_text())
    assert [j["inputs"][0]["image"]["name"] for j in jobs] == ["TST_001.nii.gz", "08001.jpg"]
    job = jobs[0]
    assert job["status"] == "Succeeded" and job["pk"] in job["url"]
    assert [o["socket"]["slug"] for o in job["outputs"]] == ["report", "score", "points", "mask"]  # GC's sort_civs
    outputs = {o["socket"]["slug"]: o for o in job["outputs"]}
    assert outputs["score"]["value"] == 0.25 and outputs["report"]["value"] == {"value": None, "ok": True}
    assert outputs["points"]["value"] is None and outputs["points"]["file"].endswith("/points.json")
    assert outputs["mask"]["image"]["name"] == "output.mha"
    mask_pk = outputs["mask"]["image"]["pk"]

    # <eval-input>/<job-pk>/output/: declared outputs only, JSON re-serialised, images under their stored name
    out = eval_input / job["pk"] / "output"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        f"images/mask/{mask_pk}.mha", "points.json", "report.json", "score.json"]
    assert (out / "report.json").read_text() == '{"value": null, "ok": true}'
    assert sitk.ReadImage(str(out / "images" / "mask" / f"{mask_pk}.mha")).GetSize() == (4, 3)

    # the evaluation's inputs.json: predictions-json-file and every job output, sorted as GC sorts them
    evaluation_inputs = json.loads((eval_input / "inputs.json").read_text())
    assert [e["socket"]["slug"] for e in evaluation_inputs] == [
        "predictions-json-file", "report", "report", "score", "score", "points", "points", "mask", "mask"]
    assert evaluation_inputs[0]["value"] == jobs
    assert evaluation_inputs[0]["interface"]["relative_path"] == "predictions.json"


def test_model_folder_or_tarball_fills_opt_ml_model(tmp_path):
    (tmp_path / "model" / "sub").mkdir(parents=True)
    (tmp_path / "model" / "weights.onnx").write_bytes(b"w")
    (tmp_path / "model" / "sub" / "extra.txt").write_text("x")
    with tarfile.open(tmp_path / "model.tar.gz", "w:gz") as archive:
        archive.add(tmp_path / "model", arcname=".")
    case = write_png(tmp_path / "a.png", "grey")
    for index, model in enumerate([tmp_path / "model", tmp_path / "model.tar.gz"]):
        algorithm = FakeAlgorithm()
        gc.emulate(SPEC, [case], tmp_path / f"work{index}", InProcessAlgorithm(algorithm), model=model)
        assert algorithm.seen[0]["model"] == ["sub", "weights.onnx"]


@pytest.mark.parametrize("skip, message", [("score.json", "Output file 'score.json' was not produced"),
                                           ("points.json", "Output file 'points.json' was not produced")])
def test_a_missing_declared_output_fails_the_job_as_gc_says(tmp_path, skip, message):
    with pytest.raises(EmulationError, match=message):
        gc.emulate(SPEC, [write_jpeg(tmp_path / "a.jpg")], tmp_path / "work",
                   InProcessAlgorithm(FakeAlgorithm(skip=skip)))


def test_unreadable_upload_and_reused_work_folder_are_one_line_errors(tmp_path):
    (tmp_path / "notes.txt").write_text("not an image")
    with pytest.raises(EmulationError, match=r"upload notes.txt: no image could be imported \(notes.txt: "):
        gc.upload_case(tmp_path / "notes.txt", tmp_path / "store")
    gc.emulate(SPEC, [write_jpeg(tmp_path / "a.jpg")], tmp_path / "work", InProcessAlgorithm(FakeAlgorithm()))
    with pytest.raises(EmulationError, match="is not empty"):
        gc.emulate(SPEC, [tmp_path / "a.jpg"], tmp_path / "work", InProcessAlgorithm(FakeAlgorithm()))


# What panimg 0.15.2 (GC's upload conversion) makes of 2-D uploads: the table in evaluators/object_cxr/README.md.
# name: (writer, pixel type, components, size, spacing, origin); direction is always the identity
UPLOADS = {
    "jpeg-rgb.jpg": (lambda p: write_jpeg(p, "rgb"), "vector of 8-bit unsigned integer", 3, (8, 6), (1, 1), (0, 0)),
    "jpeg-grey.jpg": (lambda p: write_jpeg(p, "grey"), "8-bit unsigned integer", 1, (8, 6), (1, 1), (0, 0)),
    "png-rgb.png": (lambda p: write_png(p, "rgb"), "vector of 8-bit unsigned integer", 3, (8, 6), (1, 1), (0, 0)),
    "png-rgba.png": (lambda p: write_png(p, "rgba"), "vector of 8-bit unsigned integer", 4, (8, 6), (1, 1), (0, 0)),
    "png-grey.png": (lambda p: write_png(p, "grey"), "8-bit unsigned integer", 1, (8, 6), (1, 1), (0, 0)),
    "png-grey16.png": (lambda p: write_png(p, "grey16"), "16-bit unsigned integer", 1, (8, 6), (1, 1), (0, 0)),
    "png-palette.png": (lambda p: write_png(p, "palette"), "8-bit unsigned integer", 1, (8, 6), (1, 1), (0, 0)),
    "dx-pixelspacing.dcm": (lambda p: write_dicom(p, pixel_spacing=(0.2, 0.15)), "16-bit unsigned integer", 1,
                            (8, 6, 1), (0.2, 0.15, 1), (0, 0, 0)),
    "dx-imagerpixelspacing.dcm": (lambda p: write_dicom(p, imager_pixel_spacing=(0.14, 0.14)),
                                  "16-bit unsigned integer", 1, (8, 6, 1), (1, 1, 1), (0, 0, 0)),
    "dx-position.dcm": (lambda p: write_dicom(p, pixel_spacing=(0.2, 0.2), position=(-100, -50, 10)),
                        "16-bit unsigned integer", 1, (8, 6, 1), (0.2, 0.2, 1), (-100, -50, 10)),
    "cr-monochrome1.dcm": (lambda p: write_dicom(p, modality="CR", monochrome1=True), "16-bit unsigned integer", 1,
                           (8, 6, 1), (1, 1, 1), (0, 0, 0)),
}


@pytest.mark.parametrize("name", sorted(UPLOADS))
def test_2d_uploads_as_panimg_converts_them(tmp_path, name):
    write, pixel_type, components, size, spacing, origin = UPLOADS[name]
    image = gc.upload_case(write(tmp_path / name), tmp_path / "store")
    converted = sitk.ReadImage(str(image.file))
    assert image.file.name == f"{image.pk}.mha" and image.image_type == "MHD"
    assert converted.GetPixelIDTypeAsString() == pixel_type
    assert converted.GetNumberOfComponentsPerPixel() == components
    assert converted.GetSize() == size and np.allclose(converted.GetSpacing(), spacing)
    assert np.allclose(converted.GetOrigin(), origin)
    assert np.allclose(converted.GetDirection(), np.eye(len(size)).ravel())
    pixels = sitk.GetArrayFromImage(converted)
    if name.endswith(".dcm"):
        assert image.name == "1.2.826.0.1.3680043.2.1125.1-0"  # panimg names DICOM images by study, not file
        assert image.metadata["voxel_width_mm"] == spacing[0]
        expected = GREY16.max() - GREY16 if "monochrome1" in name else GREY16  # MONOCHROME1 inverted
        assert np.array_equal(pixels[0], expected)
    else:
        assert image.name == name and image.metadata["voxel_width_mm"] is None  # spacing not valid
        if name == "png-rgb.png":
            assert np.array_equal(pixels, RGB)
        if name == "png-palette.png":  # palette indices, not colours
            assert pixels.max() < 256 and not np.array_equal(pixels, RGB[..., 0])


def test_grey_alpha_png_is_refused_as_gc_would(tmp_path):
    with pytest.raises(EmulationError, match="An unexpected error occurred.*Unknown color space for MetaIO image: 2"):
        gc.upload_case(write_png(tmp_path / "la.png", "grey-alpha"), tmp_path / "store")


def test_tb_caverns_through_the_cli_with_the_local_runner(tmp_path, repo):
    """The real TB algorithm, one job per case, scores exactly as in batch mode."""
    subprocess.run([sys.executable, "-m", "medchallenge.synth", "tb-caverns", "--out", str(tmp_path / "tb"),
                    "--cases", "2", "--seed", "11", "--shape", "96", "96", "24"], check=True, capture_output=True)
    assert gc.main(["tb-caverns", "--cases", str(tmp_path / "tb" / "input"), "--work", str(tmp_path / "gc"),
                    "--runner", "local", "--repo", str(repo)]) == 0
    eval_input = tmp_path / "gc" / "evaluation-input"
    jobs = json.loads((eval_input / "predictions.json").read_text())
    assert sorted(j["inputs"][0]["image"]["name"] for j in jobs) == ["TST_001.nii.gz", "TST_002.nii.gz"]
    subprocess.run([sys.executable, str(repo / "algorithms/tb_caverns/inference.py"), "--input",
                    str(tmp_path / "tb" / "input"), "--output", str(tmp_path / "batch"), "--device", "cpu"],
                   check=True, capture_output=True)
    metrics = {}
    for layout, folder in (("gc", eval_input), ("batch", tmp_path / "batch")):
        subprocess.run([sys.executable, str(repo / "evaluators/tb_caverns/evaluate.py"), "--input", str(folder),
                        "--ground-truth", str(tmp_path / "tb" / "ground_truth"), "--output",
                        str(tmp_path / f"m-{layout}"), "--no-progress"], check=True, capture_output=True)
        metrics[layout] = json.loads((tmp_path / f"m-{layout}" / "metrics.json").read_text())
    assert metrics["gc"]["meta"]["layout"] == "grand-challenge predictions.json"
    assert metrics["gc"]["aggregates"] == metrics["batch"]["aggregates"]
