"""TB caverns box arithmetic (docs/metrics/tb-caverns-2022.md §1.4, §2): the project's exact-integer `box_iou`
behind the coordinate check of `formats.tb_caverns` vs the official arithmetic in numpy 1.22.4 int64 (Python 3.9),
on box pairs of every coordinate magnitude from a few voxels to beyond int64 (fixed seed). Every pair the project
accepts must give the official IoU to the last bit; the pairs it refuses include the ones where int64 wraps."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from medchallenge.errors import InputError
from medchallenge.formats import tb_caverns as formats
from medchallenge.metrics.tb_caverns import box_iou

pytestmark = pytest.mark.reference


def box(rng: random.Random, scale: int) -> list[int]:
    lower = [rng.randint(-scale, scale) for _ in range(3)]
    size = [rng.choice([rng.randint(0, 40), rng.randint(0, max(1, scale)), rng.randint(-5, 5)]) for _ in range(3)]
    return lower + [low + extent for low, extent in zip(lower, size)]


def pairs(count: int, seed: int) -> list[list[list[int]]]:
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        scale = rng.choice([100, 512, 4096, formats.MAX_COORDINATE, formats.MAX_COORDINATE + 1, 2**20, 2**21,
                            2**22, 2**31, 2**62, 2**64])
        a = box(rng, scale)
        b = list(a) if rng.random() < 0.2 else box(rng, scale)
        if rng.random() < 0.5:  # overlapping: b inside a grown a
            b = [a[k] + rng.randint(-3, 3) for k in range(3)] + [a[k] + rng.randint(-3, 3) for k in range(3, 6)]
        out.append([a, b])
    return out


def accepted(a: list[int], b: list[int]) -> bool:
    try:
        formats.check_coordinates("box", a)
        formats.check_coordinates("box", b)
    except InputError:
        return False
    return True


def exact_iou(a: list[int], b: list[int]) -> Fraction:
    inter = [min(a[k + 3], b[k + 3]) - max(a[k], b[k]) for k in range(3)]
    if min(inter) <= 0:
        return Fraction(0)
    volume = inter[0] * inter[1] * inter[2]
    vol_a = (a[3] - a[0]) * (a[4] - a[1]) * (a[5] - a[2])
    vol_b = (b[3] - b[0]) * (b[4] - b[1]) * (b[5] - b[2])
    return Fraction(volume, vol_a + vol_b - volume) if vol_a + vol_b != volume else Fraction(-1)


def test_box_iou_matches_numpy_int64(py39, record):
    inputs = pairs(30000, seed=2408)
    reference = py39.run("box_iou_int64", inputs)
    mismatches, refused, refused_wrapping, compared_nonzero = [], 0, 0, 0
    for (a, b), expected in zip(inputs, reference):
        if not accepted(a, b):
            refused += 1
            exact = exact_iou(a, b)
            refused_wrapping += expected == "OverflowError" or (exact >= 0 and repr(float(exact)) != expected)
            continue
        ours = repr(box_iou(a, b))
        compared_nonzero += ours != "0.0"
        if ours != expected:
            mismatches.append((a, b, ours, expected))
    record("TB caverns box IoU (int64)", py39, len(inputs), mismatches, refused=refused,
           refused_where_int64_differs=refused_wrapping, nonzero_compared=compared_nonzero)
    assert refused_wrapping >= 500 and compared_nonzero >= 2000
