"""The RibFrac algorithm: post-processing by hand, then the real model in batch and grand-challenge mode, outputs
read back by the evaluator, bad inputs."""

from __future__ import annotations

import csv
import gzip
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from medchallenge.algorithms.ribfrac import (
    ALGORITHM,
    PREDICTIONS_CSV,
    SEGMENTAL_CODE,
    UNCERTAIN_TYPE_CODE,
    Postprocessing,
    Preprocessing,
    find_instances,
    instance_crops,
    sliding_window,
    tile_starts,
    to_ct_grid,
    work_mask,
)
from medchallenge.algorithms.runner import main
from medchallenge.evaluators.ribfrac import main as evaluate_main
from medchallenge.grand_challenge import emulator as gc
from medchallenge.synth.__main__ import main as synth_main

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "algorithms" / "ribfrac" / "model" / "ribfrac.onnx"
SHAPE = ("112", "104", "40")  # a field of view on the lateral chest wall; not a multiple of the patches


def run_ribfrac(argv: list[str]) -> int:
    return main(ALGORITHM, argv, baked_model_dir=MODEL.parent)


def blob(shape, centre, radius) -> np.ndarray:
    grid = np.indices(shape).astype(np.float32)
    return np.sqrt(sum((g - c) ** 2 for g, c in zip(grid, centre))) <= radius


def by_centre(classes: dict[tuple[int, int, int], list[float]], seen: list | None = None):
    """A stand-in classifier: the class probabilities of the blob whose centre the centroid rounds to."""
    def classify(centres: np.ndarray) -> np.ndarray:
        if seen is not None:
            seen.append(centres.copy())
        return np.array([classes[tuple(int(v) for v in np.round(c))] for c in centres])
    return classify


FRACTURE = {"buckle": [0, 1, 0, 0], "nondisplaced": [0, 0, 1, 0], "displaced": [0, 0, 0, 1]}


def test_instances_by_descending_confidence_with_types_and_size_filter():
    shape = (30, 40, 40)
    fracture = np.zeros(shape, dtype=np.float32)
    weak, strong, tiny = blob(shape, (10, 10, 10), 3), blob(shape, (20, 30, 30), 3), blob(shape, (5, 35, 5), 0.5)
    fracture[weak], fracture[strong], fracture[tiny] = 0.6, 0.9, 0.95
    seen = []
    classify = by_centre({(10, 10, 10): FRACTURE["buckle"], (20, 30, 30): FRACTURE["displaced"]}, seen)
    labels, detections = find_instances(fracture, np.zeros(shape, bool),
                                        Postprocessing(min_voxels=5, classifier_weight=0.0), 1.25, classify)
    assert [(d.label_id, d.confidence, d.label_code) for d in detections] == [(1, 0.9, 1), (2, 0.6, 3)]
    assert labels.dtype == np.uint8 and set(np.unique(labels)) == {0, 1, 2}
    assert np.array_equal(labels == 1, strong) and np.array_equal(labels == 2, weak) and not labels[tiny].any()
    # the classifier saw the centroids of the kept candidates only (not the tiny one), once
    assert len(seen) == 1 and np.allclose(sorted(map(tuple, seen[0])), [(10, 10, 10), (20, 30, 30)])


def test_the_classifier_drops_non_fractures_and_weights_the_confidence():
    shape = (30, 40, 40)
    fracture = np.zeros(shape, dtype=np.float32)
    first, second, third = blob(shape, (8, 8, 8), 3), blob(shape, (20, 30, 30), 3), blob(shape, (20, 8, 30), 3)
    fracture[first], fracture[second], fracture[third] = 0.9, 0.6, 0.8
    classify = by_centre({(8, 8, 8): [0.8, 0.1, 0.05, 0.05],  # not a fracture: dropped
                          (20, 30, 30): [0.1, 0.0, 0.7, 0.2],  # nondisplaced, fracture probability 0.9
                          (20, 8, 30): [0.4, 0.1, 0.1, 0.4]})  # displaced, fracture probability 0.6
    post = Postprocessing(min_voxels=5, min_fracture_probability=0.5, classifier_weight=0.5)
    labels, detections = find_instances(fracture, np.zeros(shape, bool), post, 1.25, classify)
    expected = [(1, np.sqrt(0.6 * 0.9), 2), (2, np.sqrt(0.8 * 0.6), 1)]
    assert [(d.label_id, d.label_code) for d in detections] == [(i, c) for i, _, c in expected]
    assert [d.confidence for d in detections] == pytest.approx([c for _, c, _ in expected], abs=1e-6)
    assert np.array_equal(labels == 1, second) and np.array_equal(labels == 2, third) and not labels[first].any()
    only_classifier = find_instances(fracture, np.zeros(shape, bool),
                                     Postprocessing(min_voxels=5, min_fracture_probability=0.5), 1.25, classify)[1]
    assert [d.confidence for d in only_classifier] == pytest.approx([0.9, 0.6])


def test_a_candidate_the_classifier_is_unsure_of_is_kept_with_the_uncertain_type():
    shape = (30, 40, 40)
    fracture = np.zeros(shape, dtype=np.float32)
    sure, unsure = blob(shape, (8, 8, 8), 3), blob(shape, (20, 30, 30), 3)
    fracture[sure], fracture[unsure] = 0.9, 0.9
    classify = by_centre({(8, 8, 8): [0.05, 0.9, 0.03, 0.02],  # buckle, fracture probability 0.95
                          (20, 30, 30): [0.3, 0.1, 0.5, 0.1]})  # nondisplaced at best, fracture probability 0.7
    post = Postprocessing(min_voxels=5, min_fracture_probability=0.5, classifier_weight=1.0)
    typed = find_instances(fracture, np.zeros(shape, bool), post, 1.25, classify)[1]
    assert [(d.confidence, d.label_code) for d in typed] == [(0.95, 3), (0.7, 2)]
    labels, detections = find_instances(fracture, np.zeros(shape, bool), replace(post, min_typed_probability=0.8),
                                        1.25, classify)
    assert [(d.confidence, d.label_code) for d in detections] == [(0.95, 3), (0.7, UNCERTAIN_TYPE_CODE)]
    assert np.array_equal(labels == 2, unsure)  # still a detection (FROC), not a guessed type (classification)


def test_confidence_weighted_by_mass_ranks_large_components_first():
    shape = (30, 40, 40)
    fracture = np.zeros(shape, dtype=np.float32)
    small, large = blob(shape, (10, 10, 10), 2), blob(shape, (18, 28, 28), 5)
    fracture[small], fracture[large] = 1.0, 0.9
    bone = np.zeros(shape, bool)
    classify = by_centre({(10, 10, 10): FRACTURE["buckle"], (18, 28, 28): FRACTURE["buckle"]})
    _, by_peak = find_instances(fracture, bone, Postprocessing(min_voxels=5, classifier_weight=0.0), 1.25, classify)
    assert [d.confidence for d in by_peak] == [1.0, 0.9]
    post = Postprocessing(min_voxels=5, confidence_mass_voxels=100.0, classifier_weight=0.0)
    labels, by_mass = find_instances(fracture, bone, post, 1.25, classify)
    expected_large = 0.9 * (1 - np.exp(-0.9 * large.sum() / 100.0))
    expected_small = 1.0 * (1 - np.exp(-small.sum() / 100.0))
    assert [d.confidence for d in by_mass] == pytest.approx([expected_large, expected_small], abs=1e-5)
    assert np.array_equal(labels == 1, large) and np.array_equal(labels == 2, small)


@pytest.mark.parametrize("bridged", [True, False])
def test_two_complete_fractures_joined_by_bone_are_segmental(bridged):
    shape = (20, 20, 60)
    fracture = np.zeros(shape, dtype=np.float32)
    first, second = blob(shape, (10, 10, 12), 3), blob(shape, (10, 10, 44), 3)  # 32 voxels = 40 mm apart
    fracture[first | second] = 0.8
    classify = by_centre({(10, 10, 12): FRACTURE["nondisplaced"], (10, 10, 44): FRACTURE["displaced"]})
    bone = np.zeros(shape, dtype=bool)
    bone[9:12, 9:12, 10:47] = bridged  # the rib between them
    _, detections = find_instances(fracture, bone, Postprocessing(min_voxels=5), 1.25, classify)
    assert sorted(d.label_code for d in detections) == ([SEGMENTAL_CODE] * 2 if bridged else [1, 2])


def test_sliding_window_blends_only_patches_with_work_voxels():
    pre = Preprocessing(patch=8, stride=6)
    volume = np.random.default_rng(0).random((10, 20, 13)).astype(np.float32)
    mask = np.zeros(volume.shape, dtype=bool)
    mask[2:5, 3:6, 4:7] = True
    seen = []

    def run(batch):  # an identity "network": fracture probability = input
        seen.append(len(batch))
        return batch

    fracture = sliding_window(run, volume, mask, pre, batch=3)
    assert fracture.shape == volume.shape
    assert np.allclose(fracture[mask], volume[mask]) and not fracture[~mask].any()
    assert sum(seen) == len(tile_starts(volume.shape, mask, 8, 6)) < len(tile_starts(volume.shape,
                                                                                     np.ones_like(mask), 8, 6))
    small = np.ones((4, 5, 6), dtype=np.float32)  # smaller than a patch: padded, cropped back
    fracture = sliding_window(run, small, np.ones(small.shape, bool), pre)
    assert fracture.shape == small.shape and np.allclose(fracture, 1.0)


def test_crops_are_centred_on_physical_points_in_the_ct_orientation():
    """A bright dot at a known physical point is the centre voxel of its crop, whatever the CT's spacing, origin and
    direction; outside the CT is air."""
    array = np.full((30, 40, 50), -1000, dtype=np.int16)
    array[12, 21, 33] = 1300
    ct = sitk.GetImageFromArray(array)
    ct.SetSpacing((0.7, 0.8, 1.5))
    ct.SetOrigin((-20.0, 10.0, 3.0))
    ct.SetDirection((-1, 0, 0, 0, -1, 0, 0, 0, 1))
    pre = Preprocessing(crop_spacing_mm=0.7, crop_size=9)
    point = ct.TransformIndexToPhysicalPoint((33, 21, 12))
    outside = ct.TransformContinuousIndexToPhysicalPoint((-30.0, 21.0, 12.0))
    crops = instance_crops(ct, np.array([point, outside]), pre)
    assert crops.shape == (2, 9, 9, 9) and crops.dtype == np.float32
    assert np.unravel_index(int(np.argmax(crops[0])), crops[0].shape) == (4, 4, 4) and crops[0].max() > 0.3
    assert np.allclose(crops[1], 0.0)  # air, below the window


def test_work_mask_is_bone_dilated_block_wise():
    pre = Preprocessing(spacing_mm=1.6, dilation_mm=6.4, bone_hu=300)  # blocks of 4 voxels
    hu = np.full((21, 30, 17), -1000.0, dtype=np.float32)
    hu[10, 13, 9] = 700.0
    mask = work_mask(hu, pre)
    assert mask.shape == hu.shape and mask[10, 13, 9]
    # the bone's block (8..11, 12..15, 8..11) and one block around it: z 4..15, y 8..19, x 4..15
    expected = np.zeros(hu.shape, dtype=bool)
    expected[4:16, 8:20, 4:16] = True
    assert np.array_equal(mask, expected)
    assert not work_mask(np.zeros_like(hu), pre).any()


def test_instances_go_back_to_the_ct_grid_as_a_full_nearest_neighbour_resampling_would():
    ct = sitk.Image([50, 44, 23], sitk.sitkInt16)
    ct.SetSpacing((0.7, 0.7, 1.5))
    ct.SetOrigin((-12.0, 30.0, 5.5))
    labels = sitk.Image([22, 20, 22], sitk.sitkUInt8)
    labels.SetSpacing((1.6, 1.6, 1.6))
    labels.SetOrigin(ct.GetOrigin())
    array = np.zeros((22, 20, 22), dtype=np.uint8)
    array[5:9, 4:8, 6:12], array[15:18, 12:19, 3:5] = 1, 2
    image = sitk.GetImageFromArray(array)
    image.CopyInformation(labels)
    full = sitk.Resample(image, ct, sitk.Transform(), sitk.sitkNearestNeighbor, 0, sitk.sitkUInt8)
    mapped = to_ct_grid(image, ct)
    assert np.array_equal(sitk.GetArrayFromImage(mapped), sitk.GetArrayFromImage(full))
    assert mapped.GetOrigin() == ct.GetOrigin() and mapped.GetSpacing() == ct.GetSpacing()
    assert set(np.unique(sitk.GetArrayFromImage(mapped))) == {0, 1, 2}


@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    """Three small synthetic CTs and the batch-mode run over them."""
    root = tmp_path_factory.mktemp("ribfrac_algo")
    assert synth_main(["ribfrac-ct", "--out", str(root), "--cases", "3", "--seed", "4", "--shape", *SHAPE]) == 0
    assert run_ribfrac(["--input", str(root / "input"), "--output", str(root / "out"), "--device", "cpu"]) == 0
    return root


def test_batch_mode_writes_the_official_submission_in_the_ct_geometry(cohort):
    ids = ["RibFrac501", "RibFrac502", "RibFrac503"]
    assert sorted(p.name for p in (cohort / "out").iterdir()) == sorted([f"{i}.nii.gz" for i in ids] +
                                                                       [PREDICTIONS_CSV])
    with open(cohort / "out" / PREDICTIONS_CSV, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["public_id", "label_id", "confidence", "label_code"]
    for pid in ids:
        ct = sitk.ReadImage(str(cohort / "input" / f"{pid}-image.nii.gz"))
        instances = sitk.ReadImage(str(cohort / "out" / f"{pid}.nii.gz"))
        assert instances.GetPixelID() == sitk.sitkUInt8 and instances.GetSize() == ct.GetSize()
        assert instances.GetSpacing() == pytest.approx(ct.GetSpacing())
        assert instances.GetOrigin() == pytest.approx(ct.GetOrigin())
        case_rows = [r for r in rows if r["public_id"] == pid]
        assert (case_rows[0]["label_id"], case_rows[0]["label_code"]) == ("0", "0")  # background row
        labels = [int(r["label_id"]) for r in case_rows[1:]]
        array = sitk.GetArrayFromImage(instances)
        assert labels == list(range(1, len(labels) + 1)) and int(array.max()) == len(labels)
        confidences = [float(r["confidence"]) for r in case_rows[1:]]
        assert confidences == sorted(confidences, reverse=True) and all(0 < c <= 1 for c in confidences)
        assert all(r["label_code"] in {"1", "2", "3", "4"} for r in case_rows[1:])
    with gzip.open(cohort / "out" / "RibFrac501.nii.gz") as handle:  # fast zlib level, not level 9
        assert handle.read(4)


def test_batch_outputs_are_read_by_the_evaluator_as_an_official_submission(cohort, tmp_path):
    assert evaluate_main(["--input", str(cohort / "out"), "--ground-truth", str(cohort / "ground_truth"),
                          "--output", str(tmp_path), "--no-progress", "--no-plots"]) == 0
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert sorted(metrics["case"]) == ["RibFrac501", "RibFrac502", "RibFrac503"]
    assert all(np.isfinite(v) for v in metrics["aggregates"].values())


def test_grand_challenge_emulation_scores_as_batch_mode(cohort, tmp_path):
    assert gc.main(["ribfrac", "--cases", str(cohort / "input"), "--work", str(tmp_path / "gc"),
                    "--runner", "local", "--repo", str(REPO)]) == 0
    eval_input = tmp_path / "gc" / "evaluation-input"
    jobs = json.loads((eval_input / "predictions.json").read_text())
    assert len(jobs) == 3
    for job in jobs:
        output = eval_input / job["pk"] / "output"
        assert len(list((output / "images" / "rib-fracture-instances").glob("*.mha"))) == 1
        assert "detections" in json.loads((output / "rib-fracture-detections.json").read_text())
    metrics = {}
    for layout, folder in (("gc", eval_input), ("batch", cohort / "out")):
        assert evaluate_main(["--input", str(folder), "--ground-truth", str(cohort / "ground_truth"), "--output",
                              str(tmp_path / layout), "--no-progress", "--no-plots"]) == 0
        metrics[layout] = json.loads((tmp_path / layout / "metrics.json").read_text())
    assert metrics["gc"]["meta"]["layout"] == "grand-challenge predictions.json"
    assert metrics["gc"]["aggregates"] == metrics["batch"]["aggregates"]


def write(path: Path, array: np.ndarray, spacing=(0.8, 0.8, 1.25)) -> Path:
    image = sitk.GetImageFromArray(array)
    if image.GetDimension() == 3:
        image.SetSpacing(spacing)
    path.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(image, str(path))
    return path


def errors_of(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize("kind", ["2d", "not_hu", "truncated"])
def test_bad_input_is_one_error_line_and_no_output(tmp_path, capsys, kind):
    case = tmp_path / "input" / "RibFrac900-image.nii.gz"
    if kind == "2d":
        write(case, np.zeros((64, 64), dtype=np.int16))
        expected = "expected a 3-D single-channel CT"
    elif kind == "not_hu":  # an MR-like volume: positive intensities, no air
        write(case, np.random.default_rng(0).integers(0, 4000, (20, 40, 40)).astype(np.int16))
        expected = "do not look like a CT in Hounsfield units"
    else:
        write(case, np.full((20, 40, 40), -1000, dtype=np.int16))
        case.write_bytes(case.read_bytes()[:300])
        expected = "truncated"
    assert run_ribfrac(["--input", str(case.parent), "--output", str(tmp_path / "out"), "--device", "cpu"]) == 1
    errors = errors_of(capsys)
    assert len(errors) == 1 and "RibFrac900-image.nii.gz" in errors[0] and expected in errors[0], errors
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_ct_without_ribs_is_an_empty_prediction_with_a_warning(tmp_path, caplog):
    """A head-sized ball of soft tissue in air: no bone, so no ribs: no fracture, a warning, exit 0."""
    volume = np.where(blob((40, 64, 64), (20, 32, 32), 25), 40, -1000).astype(np.int16)
    write(tmp_path / "input" / "RibFrac901-image.nii.gz", volume)
    assert run_ribfrac(["--input", str(tmp_path / "input"), "--output", str(tmp_path / "out"),
                        "--device", "cpu"]) == 0
    assert "RibFrac901-image.nii.gz: almost no bone" in caplog.text and "no ribs, empty prediction" in caplog.text
    assert (tmp_path / "out" / PREDICTIONS_CSV).read_text().splitlines() == [
        "public_id,label_id,confidence,label_code", "RibFrac901,0,1,0"]
    assert not sitk.GetArrayFromImage(sitk.ReadImage(str(tmp_path / "out" / "RibFrac901.nii.gz"))).any()


def test_entry_script_logs_the_provider(tmp_path, cohort):
    done = subprocess.run([sys.executable, str(REPO / "algorithms" / "ribfrac" / "inference.py"), "--input",
                           str(cohort / "input"), "--output", str(tmp_path / "o"), "--device", "cpu"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "CPUExecutionProvider" in done.stdout
    assert (tmp_path / "o" / PREDICTIONS_CSV).read_text() == (cohort / "out" / PREDICTIONS_CSV).read_text()


def test_the_models_classifier_tells_fractures_from_bone_and_their_types():
    """The committed model's classifier on crops of small synthetic cases (a seed training never uses): centred on
    the ground-truth fractures it says fracture, mostly of the right type; centred on bone away from fractures it
    mostly says not a fracture."""
    from scipy import ndimage

    from medchallenge.algorithms.ribfrac import FractureDetector
    from medchallenge.synth.ribfrac_ct import APPEARANCES, case_rng, generate_case

    detector = FractureDetector(MODEL, "cpu")
    rng = np.random.default_rng(0)
    fracture_crops, types, bone_crops = [], [], []
    for index in range(6):
        case = generate_case(case_rng(6, index), (128, 128, 48))
        ct = sitk.GetImageFromArray(case.ct)
        ct.SetSpacing(case.spacing)
        ct.SetOrigin(case.origin)
        sites = [f for f in case.fractures if (case.labels == f.label).sum() > 500]
        centres = ndimage.center_of_mass(case.labels > 0, case.labels, [f.label for f in sites])
        points = [ct.TransformContinuousIndexToPhysicalPoint(c[::-1]) for c in centres]
        fracture_crops.append(instance_crops(ct, np.array(points).reshape(-1, 3), detector.pre))
        types += [APPEARANCES.index(f.appearance) for f in sites]
        far = np.argwhere((case.ct >= 300) & (ndimage.distance_transform_edt(case.labels == 0, case.spacing[::-1])
                                                > 20))
        picked = far[rng.choice(len(far), size=4, replace=False)]
        bone_points = [ct.TransformIndexToPhysicalPoint([int(v) for v in p[::-1]]) for p in picked]
        bone_crops.append(instance_crops(ct, np.array(bone_points), detector.pre))
    on_fractures = detector.classify(np.concatenate(fracture_crops))
    on_bone = detector.classify(np.concatenate(bone_crops))
    assert len(types) >= 12 and set(types) == {0, 1, 2}
    assert on_fractures.shape == (len(types), 4) and np.allclose(on_fractures.sum(axis=1), 1, atol=1e-4)
    assert np.mean(on_fractures[:, 0] < 0.5) >= 0.8  # fracture
    assert np.mean(np.argmax(on_fractures[:, 1:], axis=1) == np.array(types)) >= 0.7  # of the right type
    assert np.mean(on_bone[:, 0] >= 0.5) >= 0.7  # not a fracture
