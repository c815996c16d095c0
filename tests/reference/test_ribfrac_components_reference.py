"""RibFrac connected-component IoU (docs/metrics/ribfrac.md §2.2): `metrics.ribfrac.match_instances` (cc3d) vs the
official computation with scikit-image's `label` and `regionprops` (Python 3.9, scikit-image 0.19.3, the spec's
version) on pairs of label volumes whose overlaps are sparse (isolated voxels, points two apart, checkerboards) in
every shape up to 5 x 5 x 5 and random larger ones (fixed seed). cc3d 4.1.1 fails on bool masks of such overlaps;
the IoU matrices must be equal to the last bit. (scikit-image 0.16.2 numbers the regions of a volume with a
length-1 axis after a longer one in another order, docs/metrics/ribfrac.md §2.2.)"""

from __future__ import annotations

import random

import numpy as np
import pytest

from medchallenge.metrics import ribfrac as m

pytestmark = pytest.mark.reference


def sparse_labels(rng: np.random.Generator, shape: tuple, density: float, labels: int) -> np.ndarray:
    return np.where(rng.random(shape) < density, rng.integers(1, labels + 1, shape), 0).astype(np.uint8)


def volume_pair(rng: np.random.Generator, shape: tuple, kind: int) -> tuple[np.ndarray, np.ndarray]:
    parity = np.indices(shape).sum(axis=0)
    if kind == 0:  # a fracture along the first axis, a prediction touching it at points two apart
        gt, pred = np.zeros(shape, np.uint8), np.zeros(shape, np.uint8)
        gt[:, 0, 0] = 1
        pred[::2, 0, 0] = rng.integers(1, 3)
        return gt, pred
    if kind == 1:  # checkerboard ground truth, sparse predictions
        return ((parity % 2 == 0) * rng.integers(1, 4)).astype(np.uint8), sparse_labels(rng, shape, 0.3, 3)
    if kind == 2:  # both checkerboards, of equal or opposite parity
        offset = int(rng.integers(0, 2))
        return ((parity % 2 == 0) * 1).astype(np.uint8), (((parity + offset) % 2 == 0) * 2).astype(np.uint8)
    density = float(rng.choice([0.05, 0.15, 0.4, 0.8]))
    return sparse_labels(rng, shape, density, int(rng.integers(1, 5))), sparse_labels(rng, shape, density, 4)


def inputs(count: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    order = random.Random(seed)
    shapes = [(x, y, z) for x in range(1, 6) for y in range(1, 6) for z in range(1, 6)]
    pairs = [volume_pair(rng, shape, kind) for shape in shapes for kind in range(4)]
    while len(pairs) < count:
        shape = tuple(order.randint(1, 24) for _ in range(3))
        pairs.append(volume_pair(rng, shape, order.randrange(4)))
    return pairs


def test_component_iou_matches_scikit_image(py39, record):
    pairs = inputs(2000, seed=40)
    reference = py39.run("ribfrac_iou", [{"shape": list(gt.shape), "gt": gt.ravel().tolist(),
                                          "pred": pred.ravel().tolist()} for gt, pred in pairs])
    mismatches, scored = [], 0
    for (gt, pred), expected in zip(pairs, reference):
        layout = np.asfortranarray if scored % 2 else np.ascontiguousarray
        try:
            iou = m.match_instances(layout(gt), layout(pred)).iou
        except RuntimeError as error:  # cc3d's failure on bool input
            mismatches.append((gt.shape, repr(error)))
            continue
        scored += 1
        if [[repr(float(v)) for v in row] for row in iou] != expected:
            mismatches.append((gt.shape, gt.ravel().tolist(), pred.ravel().tolist()))
    overlapping = sum(1 for gt, pred in pairs if ((gt > 0) & (pred > 0)).any())
    record("RibFrac component IoU", py39, len(pairs), mismatches, with_overlap=overlapping)
    assert overlapping >= len(pairs) // 2
