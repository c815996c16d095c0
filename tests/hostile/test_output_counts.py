"""One team's outputs cannot swamp its evaluation (issue 37 item 5): every output a challenge scores per case is
bounded in count (boxes, points, detections, concepts, a caption's characters), not only in bytes, when the job ends:
the job fails with its own error line and nothing of the output is kept for the evaluation."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from helpers import InProcessAlgorithm
from medchallenge.jobs import run_job
from medchallenge.jobs.outputs import read_outputs
from medchallenge.sockets import CAPTION, FOREIGN_OBJECTS, RIB_FRACTURE_DETECTIONS, TB_CAVERN_BOXES, UMLS_CONCEPTS

BOX = {"voxel_bbox": [1, 1, 1, 4, 4, 3], "probability": 0.5}
POINT = {"point": [1.0, 2.0, 0.0], "probability": 0.5}
POINTS = {"type": "Multiple points", "version": {"major": 1, "minor": 0}}  # grand-challenge's schema requires both
DETECTION = {"label_id": 1, "label_code": 1, "confidence": 0.5}


def read_one(tmp_path: Path, socket, value: object) -> str | None:
    output = tmp_path / "output"
    output.mkdir(exist_ok=True)
    (output / socket.relative_path).write_text(json.dumps(value))
    (result,) = read_outputs(output, (socket,), itertools.count(1), tmp_path / "stored")
    assert (result.value is None) == (result.error is not None)
    return result.error


@pytest.mark.parametrize(("socket", "within", "beyond", "what"), [
    (TB_CAVERN_BOXES, {"boxes": [BOX] * 1000}, {"boxes": [BOX] * 1001}, "1001 boxes, more than the 1000"),
    (FOREIGN_OBJECTS, {**POINTS, "points": [POINT] * 1000}, {**POINTS, "points": [POINT] * 1001},
     "1001 points, more than the 1000"),
    (RIB_FRACTURE_DETECTIONS, {"detections": [DETECTION] * 1000}, {"detections": [DETECTION] * 1001},
     "1001 detections, more than the 1000"),
    (UMLS_CONCEPTS, [f"C{i:07d}" for i in range(1286)], [f"C{i:07d}" for i in range(1287)],
     "1287 concepts, more than the 1286"),
    (CAPTION, "a" * 10_000, "a" * 10_001, "10001 characters, more than the 10000"),
])
def test_an_output_beyond_what_one_case_may_hold_fails_in_one_line(tmp_path, socket, within, beyond, what):
    assert read_one(tmp_path, socket, within) is None
    assert read_one(tmp_path, socket, beyond) == \
        f"The output file '{socket.relative_path}' holds {what} one case may hold here (the evaluation scores " \
        "each case's)"


def test_a_million_boxes_fail_the_job_by_their_size_before_they_are_parsed(tmp_path):
    def million_boxes(job_input: Path, job_output: Path, model: Path) -> None:
        (job_output / TB_CAVERN_BOXES.relative_path).write_text(json.dumps({"boxes": [BOX] * 1_000_000}))

    result = run_job(InProcessAlgorithm(million_boxes), [], [TB_CAVERN_BOXES], tmp_path / "job")
    assert result.status == "failed" and result.output_values == []
    assert result.error == "The output file 'tb-cavern-boxes.json' is larger than 512512 bytes, more than 1000 " \
                           "boxes (what one case may hold here) can take"
