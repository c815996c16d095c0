"""The TB caverns algorithm: post-processing by hand, then the real model in batch and grand-challenge mode."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from medchallenge.algorithms.runner import main
from medchallenge.algorithms.tb_caverns import (
    ALGORITHM,
    Detection,
    Postprocessing,
    Preprocessing,
    block_features,
    map_detection,
    probabilities_to_detections,
    world_box_mm,
)
from medchallenge.synth.tb_caverns import case_rng, generate_case, save_nifti

MODEL = Path(__file__).resolve().parents[2] / "algorithms" / "tb_caverns" / "model" / "tb_caverns.onnx"
# Small and deliberately not a multiple of the blocks (4, 4, 2) or of the network's pooling.
SHAPE = (300, 250, 71)
POST = Postprocessing(component_threshold=0.5, refine_threshold=0.5, min_score=0.5, min_coarse_voxels=2)


def run_tb(argv: list[str]) -> int:
    """The TB algorithm through the runner, with the repository's model as the one baked into the image."""
    return main(ALGORITHM, argv, baked_model_dir=MODEL.parent)


def official_iou(a, b) -> float:
    """IoU as the official metric computes it (spec section 2: no +1)."""
    inter = [min(a[i + 3], b[i + 3]) - max(a[i], b[i]) for i in range(3)]
    if min(inter) <= 0:
        return 0.0
    vol = lambda c: (c[3] - c[0]) * (c[4] - c[1]) * (c[5] - c[2])  # noqa: E731
    return inter[0] * inter[1] * inter[2] / (vol(a) + vol(b) - inter[0] * inter[1] * inter[2])


def test_block_features_pad_odd_sizes_to_whole_blocks_and_pooling_multiples():
    ct = np.full((7, 9, 10), -1000, dtype=np.int16)  # (z, y, x)
    ct[:, :, :4] = 0
    features = block_features(ct, Preprocessing())
    # z: 7 -> 4 blocks of 2 -> padded to 4; y: 9 -> 3 blocks of 4 -> 4; x: 10 -> 3 blocks -> 4
    assert features.shape == (3, 4, 4, 4)
    # x block 0 = soft tissue (0 HU): window [-1000, 200] -> 1000/1200; no air; all tissue
    assert features[0, 0, 0, 0] == pytest.approx(1000 / 1200)
    assert features[1, 0, 0, 0] == 0.0 and features[2, 0, 0, 0] == 1.0
    # x block 1 = air: mean 0, all air
    assert features[0, 0, 0, 1] == 0.0 and features[1, 0, 0, 1] == 1.0


def test_a_block_of_certain_probability_gives_exactly_its_blocks_extent():
    prob = np.zeros((8, 12, 12), dtype=np.float32)  # coarse (z, y, x) for blocks (2, 4, 4)
    prob[2:4, 3:6, 3:6] = 1.0
    prob[6, 9:11, 0:2] = 0.9
    (big, small) = probabilities_to_detections(prob, (16, 48, 48), Preprocessing(), POST)
    # Up-sampling puts coarse voxel k's centre at full index 4k + 1.5. Along x: full 12 -> coarse 2.625 -> 0.625
    # (kept), full 11 -> 2.375 -> 0.375 (dropped); full 23 -> 5.375 -> 0.625 (kept), 24 -> 0.375: x 12..23.
    # Along z (block 2): full 4 -> 1.75 -> 0.75, 3 -> 1.25 -> 0.25; full 7 -> 3.25 -> 0.75, 8 -> 0.25: z 4..7.
    assert big.corners() == [12, 12, 4, 23, 23, 7] and big.probability == 1.0
    # The second, one coarse slice thick (z 6), has 0.9: trilinear weights multiply, 0.9 * wz * wy * wx >= 0.5.
    # z: full 12 -> 5.75 and 13 -> 6.25 both give wz = 0.75, so wy * wx >= 0.741. y (coarse 9..10): full 36 ->
    # 8.625 -> 0.625 (no), 37 -> 0.875 (yes) ... 42 -> 10.125 -> 0.875 (yes), 43 -> 0.625 (no). x (coarse 0..1,
    # at the border, mode nearest -> 1): full 6 -> 1.125 -> 0.875 (yes), 7 -> 0.625 (no). Sorted after the 1.0.
    assert small.corners() == [0, 37, 12, 6, 42, 13] and small.probability == pytest.approx(0.9)


def test_score_and_size_filters():
    prob = np.zeros((8, 12, 12), dtype=np.float32)
    prob[1:3, 1:3, 1:3] = 0.55  # below min_score 0.6
    prob[5, 8, 8] = 0.95  # a single coarse voxel: below min_coarse_voxels 2
    post = Postprocessing(component_threshold=0.5, refine_threshold=0.5, min_score=0.6, min_coarse_voxels=2)
    assert probabilities_to_detections(prob, (16, 48, 48), Preprocessing(), post) == []


def test_world_box_uses_origin_spacing_and_direction():
    image = sitk.Image(10, 10, 10, sitk.sitkInt16)
    image.SetSpacing((0.5, 2.0, 3.0))
    image.SetOrigin((100.0, -50.0, 7.0))
    image.SetDirection((-1, 0, 0, 0, 1, 0, 0, 0, 1))
    # x: 100 - 0.5 * {2, 4} = {99, 98}; y: -50 + 2 * {1, 3} = {-48, -44}; z: 7 + 3 * {0, 5} = {7, 22}
    assert world_box_mm(image, Detection(2, 1, 0, 4, 3, 5, 0.9)) == [98.0, -48.0, 7.0, 99.0, -44.0, 22.0]


def test_boxes_map_between_voxel_grids_through_physical_space():
    source = sitk.Image(20, 20, 20, sitk.sitkInt16)  # spacing 1 mm
    target = sitk.Image(40, 40, 10, sitk.sitkInt16)
    target.SetSpacing((0.5, 0.5, 2.0))
    # x 2..8 mm -> target 4..16; y 4..10 mm -> 8..20; z 6..12 mm -> 3..6; the probability is kept
    assert map_detection(Detection(2, 4, 6, 8, 10, 12, 0.7), source, target) == Detection(4, 8, 3, 16, 20, 6, 0.7)
    # corners outside the target are clipped into it, and stay ordered
    assert map_detection(Detection(0, 0, 15, 19, 19, 19, 0.5), source, target) == Detection(0, 0, 8, 38, 38, 9, 0.5)


def test_a_ct_of_another_spacing_is_resampled_and_its_boxes_mapped_back(tmp_path):
    # about the field of view of SHAPE at 0.7 x 0.7 x 2.5 mm, sampled at 0.6 x 0.6 x 5 mm (thick slices): run on
    # the raw grid the model misses this cavern (best IoU 0.0); resampled to its training spacing it finds it
    shape, spacing = (350, 292, 35), (0.6, 0.6, 5.0)
    planted = generate_case(case_rng(20, 0), shape, spacing, n_caverns=1, cavern_radius_mm=(12.0, 17.0))
    save_nifti(tmp_path / "input" / "TST_001.nii.gz", planted.ct, planted.affine)
    assert run_tb(["--input", str(tmp_path / "input"), "--output", str(tmp_path / "out"), "--model",
                   str(tmp_path / "none"), "--device", "cpu"]) == 0
    rows = (tmp_path / "out" / "submission.txt").read_text().splitlines()
    boxes = [[int(v) for v in row.split(",")[1:]] for row in rows]
    assert boxes and all(0 <= b[0] < b[3] < shape[0] and 0 <= b[2] < b[5] < shape[2] for b in boxes)
    assert max(official_iou(box, planted.boxes[0].corners()) for box in boxes) >= 0.5


@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    """TST_001 with one big planted cavern, TST_002 without caverns; the batch-mode run over both."""
    root = tmp_path_factory.mktemp("tb_algo")
    planted = generate_case(case_rng(7, 0), SHAPE, n_caverns=1, cavern_radius_mm=(14.0, 17.0))
    assert len(planted.boxes) == 1
    empty = generate_case(case_rng(7, 1), SHAPE, n_caverns=0)
    save_nifti(root / "input" / "TST_001.nii.gz", planted.ct, planted.affine)
    save_nifti(root / "input" / "TST_002.nii.gz", empty.ct, empty.affine)
    assert run_tb(["--input", str(root / "input"), "--output", str(root / "out"), "--model", str(root / "none"),
                   "--device", "cpu"]) == 0
    return root, planted


def test_batch_mode_finds_the_planted_cavern(cohort):
    root, planted = cohort
    lines = (root / "out" / "submission.txt").read_text().splitlines()
    assert lines, "no box found"
    rows = [line.split(",") for line in lines]
    assert {r[0] for r in rows} == {"TST_001.nii.gz"}  # the cavern-free case is absent
    boxes = [[int(v) for v in r[1:]] for r in rows]
    for x1, y1, z1, x2, y2, z2 in boxes:
        assert 0 <= x1 < x2 < SHAPE[0] and 0 <= y1 < y2 < SHAPE[1] and 0 <= z1 < z2 < SHAPE[2]
    assert official_iou(boxes[0], planted.boxes[0].corners()) >= 0.5


def test_batch_mode_per_case_json(cohort):
    root, _ = cohort
    result = json.loads((root / "out" / "TST_001.json").read_text())
    assert result["version"] == 1 and result["image"] == "TST_001.nii.gz"
    submitted = [[int(v) for v in line.split(",")[1:]] for line in
                 (root / "out" / "submission.txt").read_text().splitlines()]
    assert [b["voxel_bbox"] for b in result["boxes"]] == submitted  # same boxes, same order
    probabilities = [b["probability"] for b in result["boxes"]]
    assert probabilities == sorted(probabilities, reverse=True) and all(0 < p <= 1 for p in probabilities)
    for box in result["boxes"]:
        lo, hi = box["world_bbox_mm"][:3], box["world_bbox_mm"][3:]
        # extent in mm = (index extent) * spacing (0.7, 0.7, 2.5)
        extent = [(box["voxel_bbox"][i + 3] - box["voxel_bbox"][i]) * s for i, s in enumerate((0.7, 0.7, 2.5))]
        assert np.allclose(np.subtract(hi, lo), extent, atol=1e-3)
    empty = json.loads((root / "out" / "TST_002.json").read_text())
    assert empty == {"version": 1, "image": "TST_002.nii.gz", "boxes": []}


def test_gc_mode_reads_the_mha_and_writes_the_socket_file(cohort, tmp_path):
    root, _ = cohort
    job = tmp_path / "input"
    (job / "images" / "ct").mkdir(parents=True)
    sitk.WriteImage(sitk.ReadImage(str(root / "input" / "TST_001.nii.gz")),
                    str(job / "images" / "ct" / "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0.mha"), True)
    (job / "inputs.json").write_text(json.dumps([{
        "pk": 1,
        "interface": {"slug": "ct-image", "kind": "Image", "super_kind": "Image", "relative_path": "images/ct"},
        "value": None, "file": None, "image": {"pk": "0b1c", "name": "TST_001.nii.gz"},
    }]))
    assert run_tb(["--input", str(job), "--output", str(tmp_path / "output"), "--device", "cpu"]) == 0
    gc = json.loads((tmp_path / "output" / "tb-cavern-boxes.json").read_text())
    batch = json.loads((root / "out" / "TST_001.json").read_text())
    assert gc == batch


def test_model_directory_overrides_the_baked_model(cohort, tmp_path, capsys):
    root, _ = cohort
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "tb_caverns.onnx").write_bytes(b"not a model")
    code = run_tb(["--input", str(root / "input"), "--output", str(tmp_path / "out"), "--model",
                   str(tmp_path / "model")])
    assert code == 1
    assert f"error: {tmp_path / 'model' / 'tb_caverns.onnx'}: cannot load the ONNX model" in capsys.readouterr().err


def test_unreadable_case_is_one_error_line_and_exit_1(tmp_path, capsys):
    (tmp_path / "input").mkdir()
    (tmp_path / "input" / "TST_009.nii.gz").write_bytes(b"this is not a NIfTI file")
    code = run_tb(["--input", str(tmp_path / "input"), "--output", str(tmp_path / "out"), "--device", "cpu"])
    assert code == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "TST_009.nii.gz" in errors[0] and "cannot read" in errors[0]
    assert not (tmp_path / "out" / "submission.txt").exists()


def test_empty_input_folder_is_an_error(tmp_path, capsys):
    (tmp_path / "input").mkdir()
    assert run_tb(["--input", str(tmp_path / "input"), "--output", str(tmp_path / "out")]) == 1
    assert "no *.nii.gz" in capsys.readouterr().err


def test_entry_script_runs_main(tmp_path, cohort):
    import subprocess
    import sys

    root, _ = cohort
    script = MODEL.parents[1] / "inference.py"
    shutil.copy(root / "input" / "TST_002.nii.gz", tmp_path / "TST_002.nii.gz")
    done = subprocess.run([sys.executable, str(script), "--input", str(tmp_path), "--output", str(tmp_path / "o"),
                           "--device", "cpu"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "CPUExecutionProvider" in done.stdout and done.stderr == ""  # the provider is logged; no warnings
    assert (tmp_path / "o" / "submission.txt").read_text() == ""
