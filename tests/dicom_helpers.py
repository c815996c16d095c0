"""Small DICOM series for the tests: a tiny CT volume written with the synthetic writer, and a validator call."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np

from medchallenge.dicom.synthetic import SyntheticStudy, write_ct_series


def tiny_volume(shape=(8, 6, 5), seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """An (x, y, z) int16 HU volume with distinct values and a RAS affine as the synthetic TB cohort's."""
    rng = np.random.default_rng(seed)
    volume = rng.integers(-1000, 1500, size=shape).astype(np.int16)
    affine = np.diag([-0.7, -0.8, 2.5, 1.0])
    affine[:3, 3] = [10.0, -20.0, -300.0]
    return volume, affine


def write_tiny_series(folder: Path, key: str = "tiny", shape=(8, 6, 5)) -> tuple[np.ndarray, np.ndarray, list[Path]]:
    volume, affine = tiny_volume(shape)
    return volume, affine, write_ct_series(folder, volume, affine, SyntheticStudy(key, f"PAT_{key}"))


def dciodvfy_errors(path: Path) -> list[str]:
    """The `Error` lines of dicom3tools' dciodvfy on one file (warnings are not errors)."""
    done = subprocess.run([shutil.which("dciodvfy") or "dciodvfy", str(path)], capture_output=True, text=True,
                          timeout=60)
    return [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("Error")]
