"""The object-CXR algorithm: decoding of every kind of radiograph and where its points land (with a planted
bright-spot model), the official run files read back by the evaluator, image list CSVs, one-line errors, and
grand-challenge mode through the emulator giving the same aggregates as batch mode."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from medchallenge.algorithms.object_cxr import (ALGORITHM, EXIF_ORIENTATION_TAG, EXIF_TO_STORED,
                                                ForeignObjectDetector, Postprocessing, Preprocessing, Radiograph,
                                                heatmap_peaks, prediction_from_heatmap, read_radiograph)
from medchallenge.algorithms.runner import main
from medchallenge.evaluators.object_cxr import main as evaluate
from medchallenge.formats.object_cxr import read_classification, read_localization

FIXTURES = Path(__file__).parent / "fixtures"
MODEL = Path(__file__).resolve().parents[2] / "algorithms" / "object_cxr" / "model" / "object_cxr.onnx"
WIDTH, HEIGHT = 96, 80
SQUARE = (56, 20, 76, 40)  # x1, y1, x2, y2 (exclusive ends): the bright object


def radiograph_array(dtype=np.uint8, top: int = 220) -> np.ndarray:
    """A dark gradient with one bright square."""
    yy, xx = np.mgrid[:HEIGHT, :WIDTH]
    array = (20 + 0.3 * xx + 0.2 * yy).astype(np.float64)
    x1, y1, x2, y2 = SQUARE
    array[y1:y2, x1:x2] = top
    return array.astype(dtype)


@pytest.fixture
def planted_model(tmp_path) -> Path:
    """A model folder holding the bright-spot model under the algorithm's model file name."""
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copyfile(FIXTURES / "bright_spot.onnx", folder / ALGORITHM.model_file)
    return folder


def run(input_dir: Path, output_dir: Path, model_dir: Path | None = None) -> int:
    argv = ["--input", str(input_dir), "--output", str(output_dir), "--device", "cpu"]
    if model_dir is not None:
        argv += ["--model", str(model_dir)]
    return main(ALGORITHM, argv, baked_model_dir=MODEL.parent)


def localization(output_dir: Path) -> dict[str, list[tuple[float, float, float]]]:
    lines = (output_dir / "localization.csv").read_text().splitlines()
    assert lines[0] == "image_path,prediction"
    result = {}
    for line in lines[1:]:
        name, triples = line.split(",")
        result[name] = [tuple(map(float, t.split(" "))) for t in triples.split(";") if t]
    return result


def assert_inside_square(points, square=SQUARE) -> None:
    assert points, "no point"
    x1, y1, x2, y2 = square
    for _, x, y in points:
        assert x1 - 1 <= x <= x2 and y1 - 1 <= y <= y2, (x, y)


def write_dicom_radiograph(path: Path, array: np.ndarray, monochrome1: bool) -> None:
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.1"
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset(str(path), {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID, ds.SOPInstanceUID = meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID
    ds.StudyInstanceUID, ds.SeriesInstanceUID, ds.Modality = generate_uid(), generate_uid(), "CR"
    ds.Rows, ds.Columns = array.shape
    ds.SamplesPerPixel, ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 1, 16, 15, 14, 0
    ds.PhotometricInterpretation = "MONOCHROME1" if monochrome1 else "MONOCHROME2"
    ds.PixelSpacing = [0, 0]  # as RG1_UNCI.dcm: no usable spacing
    ds.PixelData = array.astype(np.uint16).tobytes()
    ds.save_as(str(path), enforce_file_format=True)


WRITERS = {
    "grey.jpg": lambda p: Image.fromarray(radiograph_array()).save(p, quality=95),
    "rgb.png": lambda p: Image.fromarray(np.dstack([radiograph_array()] * 3)).save(p),
    "rgba.png": lambda p: Image.fromarray(np.dstack([radiograph_array()] * 3 + [np.full((HEIGHT, WIDTH), 255,
                                                                                          np.uint8)])).save(p),
    "palette.png": lambda p: Image.fromarray(np.dstack([radiograph_array()] * 3)).convert("P").save(p),
    "grey16.png": lambda p: Image.fromarray(radiograph_array(np.uint16, top=60000) * 1).save(p),
    "upper.JPG": lambda p: Image.fromarray(radiograph_array()).save(p, format="JPEG", quality=95),
    "mono1.dcm": lambda p: write_dicom_radiograph(p, 30000 - radiograph_array(np.uint16, top=220) * 100, True),
    "mono2.dcm": lambda p: write_dicom_radiograph(p, radiograph_array(np.uint16, top=220) * 100, False),
}


def test_every_kind_of_radiograph_is_decoded_and_its_points_land_on_the_object(tmp_path, planted_model):
    inputs = tmp_path / "input"
    (inputs / "sub").mkdir(parents=True)
    for name, write in WRITERS.items():
        write(inputs / ("sub/" + name if name == "grey.jpg" else name))
    (inputs / "notes.txt").write_text("not an image")
    assert run(inputs, tmp_path / "out", planted_model) == 0
    points = localization(tmp_path / "out")
    assert sorted(points) == sorted(["sub/grey.jpg" if n == "grey.jpg" else n for n in WRITERS])
    for name, image_points in points.items():
        assert_inside_square(image_points)
    assert "grey16.png" in points and len(points["mono1.dcm"]) >= 1


def test_grey16_png_keeps_its_depth():
    path_values = radiograph_array(np.uint16, top=60000)
    path_values[0, 0] = 1000  # values above 8 bits
    image = Image.fromarray(path_values)
    assert image.mode.startswith("I")


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_is_applied_and_points_map_back_to_stored_pixels(tmp_path, orientation):
    stored = np.zeros((5, 7), np.uint8)
    stored[1, 4] = 255  # stored pixel (x=4, y=1)
    path = tmp_path / "o.jpg"
    exif = Image.Exif()
    exif[EXIF_ORIENTATION_TAG] = orientation
    Image.fromarray(stored).save(path, format="JPEG", quality=100, exif=exif.tobytes(), subsampling=0)
    radiograph = read_radiograph(path, (64, 64))
    from PIL import ImageOps

    upright = np.asarray(ImageOps.exif_transpose(Image.open(path)), dtype=np.float32)
    assert np.array_equal(radiograph.pixels, upright)  # what the network sees: the image as a viewer shows it
    y, x = np.unravel_index(np.argmax(upright), upright.shape)
    [(xs, ys)] = radiograph.to_output(np.array([float(x)]), np.array([float(y)]))
    assert (xs, ys) == (4.0, 1.0)
    assert EXIF_TO_STORED[orientation] is not None


def test_exif_rotated_jpeg_is_detected_in_stored_coordinates(tmp_path, planted_model):
    inputs = tmp_path / "input"
    inputs.mkdir()
    upright = radiograph_array()
    stored = np.rot90(upright, 1)  # shown upright after a clockwise turn: EXIF orientation 6
    exif = Image.Exif()
    exif[EXIF_ORIENTATION_TAG] = 6
    Image.fromarray(np.ascontiguousarray(stored)).save(inputs / "rot.jpg", quality=95, exif=exif.tobytes())
    assert run(inputs, tmp_path / "out", planted_model) == 0
    x1, y1, x2, y2 = SQUARE  # upright (x, y) -> stored rot90: (y, W - 1 - x)
    assert_inside_square(localization(tmp_path / "out")["rot.jpg"], (y1, WIDTH - x2, y2, WIDTH - x1))


def test_run_files_are_read_by_the_evaluator_with_the_image_list_names(tmp_path, planted_model):
    inputs = tmp_path / "input"
    (inputs / "test").mkdir(parents=True)
    Image.fromarray(radiograph_array()).save(inputs / "test" / "08001.jpg", quality=95)
    Image.fromarray(np.full((HEIGHT, WIDTH), 40, np.uint8)).save(inputs / "test" / "08002.jpg", quality=95)
    (inputs / "test.csv").write_text("image_path\ntest/08002.jpg\ntest/08001.jpg\n")
    out = tmp_path / "out"
    assert run(inputs, out, planted_model) == 0
    classification = read_classification(out / "classification.csv")
    localization_file = read_localization(out / "localization.csv")
    assert (out / "classification.csv").read_text().splitlines()[1].startswith("test/08002.jpg,")
    assert localization_file is not None and classification is not None
    assert (out / "localization.csv").read_text().splitlines()[1] == "test/08002.jpg,"  # no point, the comma stays
    truth = tmp_path / "truth"
    truth.mkdir()
    x1, y1, x2, y2 = SQUARE
    (truth / "annotations.csv").write_text(f"image_name,annotation\ntest/08001.jpg,0 {x1} {y1} {x2} {y2}\n"
                                           "test/08002.jpg,\n")
    assert evaluate(["--input", str(out), "--ground-truth", str(truth), "--output", str(tmp_path / "metrics"),
                     "--no-plots", "--no-progress", "--strict"]) == 0
    metrics = json.loads((tmp_path / "metrics" / "metrics.json").read_text())
    assert metrics["aggregates"]["auc"] == 1.0 and metrics["aggregates"]["froc"] == 1.0


@pytest.mark.parametrize("content, message", [
    ("image_path\nmissing.jpg\n", "line 2: image 'missing.jpg' not found"),
    ("path\na.jpg\n", "no 'image_path' column"),
    ("image_path\n../outside.jpg\n", "is not a path inside"),
])
def test_bad_image_lists_are_one_error_line(tmp_path, planted_model, capsys, content, message):
    inputs = tmp_path / "input"
    inputs.mkdir()
    Image.fromarray(radiograph_array()).save(inputs / "a.jpg")
    (tmp_path / "outside.jpg").write_bytes((inputs / "a.jpg").read_bytes())
    (inputs / "list.csv").write_text(content)
    assert run(inputs, tmp_path / "out", planted_model) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and message in err[0]


@pytest.mark.parametrize("name, content", [("broken.jpg", b"\xff\xd8\xff\xe0 not a jpeg"),
                                           ("empty.png", b""), ("bad.dcm", b"\0" * 128 + b"DICM" + b"\1" * 20)])
def test_an_unreadable_image_is_one_error_line_naming_it(tmp_path, planted_model, capsys, name, content):
    inputs = tmp_path / "input"
    inputs.mkdir()
    Image.fromarray(radiograph_array()).save(inputs / "good.jpg")
    (inputs / name).write_bytes(content)
    assert run(inputs, tmp_path / "out", planted_model) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and name in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "out" / "classification.csv").exists()


def test_a_comma_in_a_file_name_is_refused(tmp_path, planted_model, capsys):
    inputs = tmp_path / "input"
    inputs.mkdir()
    Image.fromarray(radiograph_array()).save(inputs / "a,b.jpg")
    assert run(inputs, tmp_path / "out", planted_model) == 1
    assert "','" in capsys.readouterr().err


def test_heatmap_peaks_are_local_maxima_best_first_and_refined():
    heat = np.zeros((8, 8), np.float32)
    heat[2, 2], heat[2, 3] = 0.9, 0.3  # centroid pulled right by a quarter cell
    heat[6, 6] = 0.6
    heat[6, 1] = 0.01  # below min_score
    peaks = heatmap_peaks(heat, Postprocessing(stride=4, min_score=0.05, max_points=5))
    assert [round(p[0], 2) for p in peaks] == [0.9, 0.6]
    assert peaks[0][1] == pytest.approx(2 + 0.3 / 1.2) and peaks[0][2] == pytest.approx(2.0)


def pixel_radiograph(width: int, height: int) -> Radiograph:
    return Radiograph(np.zeros((height, width), np.float32), (width, height),
                      lambda x, y: list(zip(x.tolist(), y.tolist())))


@pytest.mark.parametrize(("top_cells", "expected"), [(1, 0.9), (2, 0.8), (4, (0.9 + 0.7 + 0.5 + 0.2) / 4)])
def test_image_probability_is_the_mean_of_the_highest_cells_inside_the_border(top_cells, expected):
    heat = np.zeros((16, 16), np.float32)
    heat[5, 5], heat[5, 6], heat[10, 3], heat[12, 12] = 0.9, 0.7, 0.5, 0.2
    heat[0, 8] = heat[15, 15] = 1.0  # in the ignored border
    post = Postprocessing(stride=4, min_score=0.3, max_points=5, border_cells=1, image_top_cells=top_cells)
    prediction = prediction_from_heatmap(heat, pixel_radiograph(128, 64), Preprocessing((64, 64)), post)
    assert prediction.probability == pytest.approx(expected)
    # points do not depend on the image score: the two local maxima above min_score, best first;
    # cell -> input pixel -> image pixel: x = (column + 0.5) * 4 * 128 / 64 - 0.5
    assert [round(p[0], 2) for p in prediction.points] == [0.9, 0.5]
    assert prediction.points[1][1:] == pytest.approx(((3 + 0.5) * 8 - 0.5, (10 + 0.5) * 4 - 0.5))


def test_models_without_the_new_post_processing_keys_keep_the_maximum_and_no_flip():
    post = Postprocessing.from_dict({"stride": 4, "min_score": 0.1, "max_points": 3})
    assert (post.flip_average, post.image_top_cells, post.border_cells) == (False, 1, 0)


class RampSession:
    """An ONNX session stand-in whose heat map is the input's first rows times a column ramp: not mirror-symmetric,
    so a mirrored run that is not mirrored back shows."""

    def __init__(self):
        self.inputs = []

    def run(self, _, feeds):
        (x,) = feeds.values()
        self.inputs.append(x.copy())
        return [x[:, :, :4, :8] * np.arange(1, 9, dtype=np.float32)]


@pytest.mark.parametrize("flip", [False, True])
def test_flip_averaging_mirrors_the_input_and_mirrors_the_heat_map_back(planted_model, flip):
    detector = ForeignObjectDetector(planted_model / ALGORITHM.model_file, "cpu")
    detector.session = RampSession()
    detector.post = Postprocessing(stride=4, min_score=0.1, max_points=3, flip_average=flip)
    x = np.random.default_rng(0).random((1, 1, 4, 8), np.float32)
    heat = detector.heatmap(x)
    ramp = np.arange(1, 9, dtype=np.float32)
    expected = (x[0, 0] * ramp + (x[0, 0, :, ::-1] * ramp)[:, ::-1]) / 2 if flip else x[0, 0] * ramp
    assert heat == pytest.approx(expected)
    assert len(detector.session.inputs) == (2 if flip else 1)


def test_batch_mode_decodes_the_next_radiograph_in_a_second_thread(tmp_path, planted_model):
    import threading

    from medchallenge.algorithms.runner import Case
    from medchallenge.errors import InputError

    paths = []
    for name in ("a.jpg", "b.png", "c.jpg"):
        Image.fromarray(radiograph_array()).save(tmp_path / name)
        paths.append(tmp_path / name)
    (tmp_path / "d.jpg").write_bytes(b"not a jpeg")
    cases = [Case(p.name, {"chest-x-ray": p}) for p in [*paths, tmp_path / "d.jpg"]]
    detector = ForeignObjectDetector(planted_model / ALGORITHM.model_file, "cpu")
    expected = [detector.predict(case) for case in cases[:3]]
    reads, started = [], {case.name: threading.Event() for case in cases}
    read = detector.read

    def recording_read(case):
        reads.append((case.name, threading.current_thread() is threading.main_thread()))
        started[case.name].set()
        return read(case)

    detector.read = recording_read
    predictions = detector.predict_all(cases)
    for k in range(3):
        assert next(predictions) == expected[k]
        # the next radiograph is being read while this one's prediction is handed over
        assert started[cases[k + 1].name].wait(timeout=5)
    with pytest.raises(InputError, match="d.jpg: cannot read the chest X-ray"):
        next(predictions)
    assert reads == [(case.name, False) for case in cases]


def test_grand_challenge_mode_through_the_emulator_matches_batch_mode(tmp_path, planted_model, repo):
    pytest.importorskip("panimg")
    from medchallenge.grand_challenge import emulator as gc

    cases = tmp_path / "cases"
    cases.mkdir()
    for name in ("08001.jpg", "08002.png"):
        Image.fromarray(radiograph_array()).save(cases / name)
    Image.fromarray(np.full((HEIGHT, WIDTH), 60, np.uint8)).save(cases / "08003.jpg")
    truth = tmp_path / "truth"
    truth.mkdir()
    x1, y1, x2, y2 = SQUARE
    (truth / "annotations.csv").write_text("image_name,annotation\n" + "".join(
        f"{n},1 {x1} {y1} {x2} {y2}\n" for n in ("08001.jpg", "08002.png")) + "08003.jpg,\n")
    spec = gc.ALGORITHMS["object-cxr"]
    eval_input = gc.emulate(spec, gc.find_cases(spec, cases), tmp_path / "gc", gc.local_launcher(spec, repo),
                            model=planted_model)
    job = json.loads((eval_input / "predictions.json").read_text())[0]
    points = json.loads((eval_input / job["pk"] / "output" / "foreign-objects.json").read_text())
    assert points["type"] == "Multiple points" and len(points["points"][0]["point"]) == 3
    assert run(cases, tmp_path / "batch", planted_model) == 0
    scores = {}
    for layout, folder in (("gc", eval_input), ("batch", tmp_path / "batch")):
        assert evaluate(["--input", str(folder), "--ground-truth", str(truth), "--output", str(tmp_path / layout),
                         "--no-plots", "--no-progress"]) == 0
        scores[layout] = json.loads((tmp_path / layout / "metrics.json").read_text())["aggregates"]
    assert scores["gc"] == scores["batch"] and scores["batch"]["froc"] == 1.0


def test_the_real_radiograph_of_pydicom_data_is_read_monochrome1_inverted():
    from pydicom.data import get_testdata_file

    path = Path(get_testdata_file("RG1_UNCI.dcm"))
    radiograph = read_radiograph(path, (512, 512))
    assert radiograph.size == (1841, 1955) and radiograph.pixels.shape == (1955, 1841)
    # MONOCHROME1 inverted: the lungs (upper middle of each half) are darker than the spine between them
    rows = slice(500, 900)
    lungs = np.median(radiograph.pixels[rows, 350:650]), np.median(radiograph.pixels[rows, 1200:1500])
    spine = np.median(radiograph.pixels[rows, 880:960])
    assert max(lungs) < spine


def test_the_trained_model_calls_the_real_radiograph_negative(tmp_path):
    """Smoke test, one real image (not a quality claim): RG1_UNCI.dcm of pydicom-data holds no foreign object, so its
    probability and every point stay below the operating threshold of the model card (the model's metadata)."""
    from pydicom.data import get_testdata_file

    inputs = tmp_path / "input"
    inputs.mkdir()
    shutil.copyfile(get_testdata_file("RG1_UNCI.dcm"), inputs / "RG1_UNCI.dcm")
    assert run(inputs, tmp_path / "out") == 0
    [(name, probability)] = [line.split(",") for line in
                             (tmp_path / "out" / "classification.csv").read_text().splitlines()[1:]]
    threshold = ForeignObjectDetector(MODEL, "cpu").post.operating_threshold
    assert name == "RG1_UNCI.dcm" and 0.0 <= float(probability) < threshold
    points = localization(tmp_path / "out")["RG1_UNCI.dcm"]
    for score, x, y in points:
        assert 0 <= x <= 1840 and 0 <= y <= 1954 and score < threshold


def test_a_large_jpeg_is_decoded_reduced_and_points_come_back_in_full_resolution(tmp_path, planted_model):
    inputs = tmp_path / "input"
    inputs.mkdir()
    big = np.kron(radiograph_array(), np.ones((8, 8), np.uint8))  # 768 x 640, the square at 8x its coordinates
    Image.fromarray(big).save(inputs / "big.jpg", quality=95)
    radiograph = read_radiograph(inputs / "big.jpg", (64, 64))
    assert radiograph.size == (768, 640) and radiograph.pixels.shape == (80, 96)  # DCT-scaled by 1/8
    assert run(inputs, tmp_path / "out", planted_model) == 0
    assert_inside_square(localization(tmp_path / "out")["big.jpg"], tuple(8 * v for v in SQUARE))
