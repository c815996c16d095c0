"""RibFrac label volumes (docs/metrics/ribfrac.md §1.2): `formats.ribfrac.read_label_volume` vs nibabel 3.2.2
`nib.load(f).get_fdata().astype(np.uint8)` (Python 3.9, numpy 1.22.4) on the same NIfTI files: float label maps
saved with a CT's header (int16, a slope and intercept -1024), random slopes and intercepts of every magnitude
(0, NaN and infinite slopes too), every stored type, both byte orders, .nii and .nii.gz, unscaled float labels, and
(X, Y, Z, 1) volumes (fixed seed). Where the project refuses a volume, the official values must be ones its uint8
cast wraps or cannot take (outside (-1, 256), not finite) or a shape the official code fails on."""

from __future__ import annotations

import hashlib
import random

import nibabel as nib
import numpy as np
import pytest

from medchallenge.errors import InputError
from medchallenge.formats import ribfrac as formats
from medchallenge.synth.ribfrac import write_stored_nifti

pytestmark = pytest.mark.reference

STORED_TYPES = ("<i2", "<i2", "<i2", ">i2", "<u1", "<i1", "<u2", "<i4", "<f4", ">f4", "<f8")


def scale_fields(rng: random.Random) -> tuple[float, float]:
    kind = rng.random()
    if kind < 0.4:  # a CT's header: a writer's slope for the CT's range, intercept -1024
        return float(np.float32(rng.choice([1.0, rng.uniform(0.1, 2), 4095 / 32767, 1 / 3, 0.5, 1.0000001]))), -1024.0
    if kind < 0.55:
        return rng.choice([1.0, 0.0, -0.0, float("nan"), float("inf")]), rng.choice([0.0, 5.0, -1024.0, float("nan")])
    magnitude = 10.0 ** rng.randint(-12, 6)
    return (float(np.float32(rng.uniform(-2, 2) * magnitude)),
            float(np.float32(rng.choice([0.0, rng.uniform(-3000, 3000), rng.uniform(-1, 1)]))))


def stored_values(rng: random.Random, shape: tuple, dtype: np.dtype, slope: float, inter: float) -> np.ndarray:
    """Labels 0..k stored as a writer would for this slope and intercept (rounded), or raw random values."""
    labels = np.asarray(np.random.default_rng(rng.randrange(2**32)).integers(0, rng.choice([2, 5, 20, 255]), shape))
    if rng.random() < 0.8 and np.isfinite(slope) and slope != 0 and np.isfinite(inter):
        values = (labels - inter) / slope
        if dtype.kind == "f" and rng.random() < 0.5:
            values = labels + np.random.default_rng(rng.randrange(2**32)).uniform(-0.9, 0.9, shape)
    else:
        values = np.random.default_rng(rng.randrange(2**32)).uniform(-300, 300, shape)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        values = np.clip(np.rint(values), info.min, info.max)
    return np.asarray(values).astype(dtype)


def volumes(tmp_path, count: int, seed: int) -> list:
    rng = random.Random(seed)
    paths = []
    for index in range(count):
        shape = rng.choice([(4, 5, 6), (7, 3, 2), (1, 1, 1), (16, 16, 8), (5, 4, 3, 1)])
        if index % 200 == 0:  # a few larger ones, read in two slabs
            shape = (512, 512, 20)
        dtype = np.dtype(rng.choice(STORED_TYPES))
        slope, inter = scale_fields(rng)
        path = tmp_path / f"v{index}.nii{'.gz' if rng.random() < 0.5 else ''}"
        write_stored_nifti(path, stored_values(rng, shape, dtype, slope, inter), slope, inter)
        paths.append(path)
    return paths


def refused_officially(expected: dict) -> bool:
    """Whether the official reading fails, or gives values whose uint8 cast wraps or is undefined."""
    return ("error" in expected or len(expected["shape"]) != 3 or not expected["finite"]
            or float(expected["min"]) <= -1 or float(expected["max"]) >= 256)


def test_label_volumes_read_as_nibabel_3_2_2(py39, record, tmp_path):
    paths = volumes(tmp_path, 600, seed=2407)
    reference = py39.run("nifti_labels", [str(path) for path in paths])
    mismatches, refused, unlike_float32 = [], 0, 0
    for path, expected in zip(paths, reference):
        try:
            labels = formats.read_label_volume(path)
        except InputError as error:
            refused += 1
            if not refused_officially(expected):
                mismatches.append((path.name, f"refused: {error}", expected))
            continue
        digest = hashlib.sha256(np.asarray(labels, dtype=np.uint8).tobytes(order="F")).hexdigest()
        if refused_officially(expected) or list(labels.shape) != expected["shape"] or digest != expected["sha256"]:
            mismatches.append((path.name, list(labels.shape), expected))
            continue
        image = nib.load(path)  # what reading in float32 with the scaling applied (SimpleITK's way) would give
        slope, inter = image.header.get_slope_inter()
        stored = np.asanyarray(image.dataobj.get_unscaled()).astype(np.float32)
        float32 = stored * np.float32(slope if slope is not None else 1) + np.float32(inter or 0)
        with np.errstate(invalid="ignore"):
            unlike_float32 += bool((float32.astype(np.uint8) != labels).any())
    record("RibFrac NIfTI label volumes", py39, len(paths), mismatches, refused=refused,
           unlike_float32_scaling=unlike_float32)
    assert unlike_float32 >= 50 and 20 <= refused <= len(paths) - 150
