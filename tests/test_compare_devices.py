"""tools/compare_devices.py: the comparison that says whether CPU and CUDA predictions agree finds what differs."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import SimpleITK as sitk

TOOL = Path(__file__).resolve().parents[1] / "tools" / "compare_devices.py"
spec = importlib.util.spec_from_file_location("compare_devices", TOOL)
compare_devices = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = compare_devices  # its dataclasses look their module up
spec.loader.exec_module(compare_devices)


def _outputs(folder: Path, score: float = 0.123456, label: str = "displaced", voxel: int = 0) -> Path:
    folder.mkdir(parents=True)
    (folder / "case.json").write_text(json.dumps({"boxes": [{"corner": [1, 2, 3], "probability": score}],
                                                  "version": {"major": 1}, "kind": label}))
    (folder / "predictions.csv").write_text(f"public_id,label_id,confidence,label_code\nRibFrac1,1,{score},{label}\n")
    array = np.zeros((4, 5, 6), np.uint8)
    array[1, 2, 3] = voxel
    sitk.WriteImage(sitk.GetImageFromArray(array), str(folder / "mask.nii.gz"))
    return folder


def test_identical_outputs_agree(tmp_path):
    reference = _outputs(tmp_path / "cpu")
    shutil.copytree(reference, tmp_path / "cuda")
    result = compare_devices.compare_outputs(reference, tmp_path / "cuda", 1e-4)
    assert (result.files, result.differences, result.max_float_difference) == (3, [], 0.0)


def test_floats_within_the_tolerance_agree_and_beyond_it_differ(tmp_path):
    reference = _outputs(tmp_path / "cpu")
    close = compare_devices.compare_outputs(reference, _outputs(tmp_path / "near", score=0.1234565), 1e-4)
    assert close.differences == [] and 0 < close.max_float_difference < 1e-6
    far = compare_devices.compare_outputs(reference, _outputs(tmp_path / "far", score=0.1244), 1e-4)
    assert [d.split(":")[0] for d in far.differences] == ["case.json.boxes[0].probability", "predictions.csv"]


def test_labels_voxels_and_missing_files_differ(tmp_path):
    reference = _outputs(tmp_path / "cpu")
    other = _outputs(tmp_path / "cuda", label="buckle", voxel=2)
    (other / "predictions.csv").unlink()
    result = compare_devices.compare_outputs(reference, other, 1e-4)
    assert result.differing_voxels == 1
    assert any("'displaced' vs 'buckle'" in d for d in result.differences)
    assert any(d.startswith("predictions.csv: only in the reference") for d in result.differences)
    assert any("1 voxels differ" in d for d in result.differences)
