"""The output rules pre-flight and the hospital gateway share (medchallenge.jobs.value_rules): what the gateway
refuses, pre-flight names per job; an honest value passes both."""

from __future__ import annotations

import math

import pytest

from medchallenge.errors import InputError
from medchallenge.jobs.image_grid import ImageGrid
from medchallenge.jobs.value_rules import MAX_FINDINGS, challenge_outputs

RADIOGRAPH = ImageGrid((200, 100, 1), spacing=(0.5, 0.5, 1.0))
CT = ImageGrid((32, 32, 8))


def cxr(likelihood, *points) -> dict:
    return {"foreign-object-likelihood": likelihood,
            "foreign-objects": {"type": "Multiple points", "points": [{"point": list(p), "probability": 0.5}
                                                                      for p in points]}}


def test_honest_values_pass():
    challenge_outputs("object-cxr", cxr(0.7, (10.0, 20.0, 0.0), (99.7, 49.7, 0.0)), RADIOGRAPH)
    challenge_outputs("tb-caverns", {"tb-cavern-boxes": {"boxes": [{"voxel_bbox": [0, 0, 0, 31, 31, 7]}]}}, CT)


@pytest.mark.parametrize(("interface", "values", "line"), [
    ("object-cxr", cxr(1.7), "foreign-object-likelihood: expected a number from 0 to 1"),
    ("object-cxr", cxr(math.nan), "foreign-object-likelihood: expected a number from 0 to 1"),
    ("object-cxr", cxr(True), "foreign-object-likelihood: expected a number from 0 to 1"),
    ("object-cxr", cxr(0.5, (100.6, 20.0, 0.0)), "foreign-objects: points[0]: outside the 200x100x1 image"),
    ("object-cxr", cxr(0.5, *[(1.0, 1.0, 0.0)] * (MAX_FINDINGS + 1)),
     f"foreign-objects: points: {MAX_FINDINGS + 1} entries, more than the {MAX_FINDINGS} a result may hold"),
    ("tb-caverns", {"tb-cavern-boxes": {"boxes": [{"voxel_bbox": [1, 1, 1, 60, 4, 3]}]}},
     "tb-cavern-boxes: boxes[0]: voxel_bbox outside the 32x32x8 image or unordered"),
    ("tb-caverns", {"tb-cavern-boxes": {"boxes": [{"voxel_bbox": [1, 1, 1, 4, 4, 3], "probability": 2}]}},
     "tb-cavern-boxes: boxes[0]: probability: expected a number from 0 to 1"),
    ("tb-caverns", {"tb-cavern-boxes": []}, "tb-cavern-boxes: boxes: expected a list"),
])
def test_values_the_gateway_refuses_give_one_line(interface, values, line):
    with pytest.raises(InputError) as refused:
        challenge_outputs(interface, values, RADIOGRAPH if interface == "object-cxr" else CT)
    assert str(refused.value).startswith(line)
