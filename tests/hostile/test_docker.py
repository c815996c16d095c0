"""Hostile submissions against the real, hardened evaluator containers (issue 10): a symbolic link into the ground
truth, a decompression bomb under a container memory limit, and a full output disk. Docker is required in CI."""

from __future__ import annotations

import gzip
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from helpers import open_dir, readable

VERSION = os.environ.get("MEDCHALLENGE_VERSION") or "0.1.0"  # compose.yaml's image tag
FIXTURES = Path(__file__).resolve().parents[1] / "ribfrac" / "fixtures"
GROUND_TRUTH_IN_CONTAINER = "/opt/ml/input/data/ground_truth"


@pytest.fixture(scope="module")
def built(docker_compose):
    docker_compose("build", "ribfrac-evaluator")
    return docker_compose


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return readable(target)


def _run(built, predictions: Path, ground_truth: Path, metrics: Path, **env: str) -> subprocess.CompletedProcess:
    no_images = open_dir(metrics.parent / "no-images")  # the review's images mount, empty: no review.html
    env = {"RIBFRAC_PREDICTIONS": str(predictions), "RIBFRAC_GROUND_TRUTH": str(ground_truth),
           "RIBFRAC_METRICS": str(metrics), "RIBFRAC_INPUT": str(no_images), **env}
    result = built("run", "--rm", "--no-deps", "ribfrac-evaluator", env=env, check=False)
    built("down", env=env)
    return result


def _last_line(result: subprocess.CompletedProcess) -> str:
    return result.stderr.strip().splitlines()[-1]


def test_a_link_into_the_ground_truth_is_refused_in_the_container(built, tmp_path):
    predictions = _copy(FIXTURES / "pred", tmp_path / "predictions")
    ground_truth = _copy(FIXTURES / "gt", tmp_path / "ground_truth")
    metrics = open_dir(tmp_path / "metrics")
    assert _run(built, predictions, ground_truth, metrics).returncode == 0  # the submission as it is: scored
    assert (metrics / "metrics.json").exists()
    (predictions / "RibFrac901.nii.gz").unlink()  # followed, this link would score froc_average 1.0
    (predictions / "RibFrac901.nii.gz").symlink_to(f"{GROUND_TRUTH_IN_CONTAINER}/RibFrac901-label.nii.gz")
    result = _run(built, predictions, ground_truth, metrics)
    assert result.returncode == 1
    assert _last_line(result) == ("error: /input/RibFrac901.nii.gz: a symbolic link in the predictions; only "
                                  "regular files are read")
    assert list(metrics.iterdir()) == []


def _bomb(path: Path, side: int = 2048, member: int = 1 << 24) -> None:
    """A NIfTI-1 of side**3 uint8 voxels (8 GiB for 2048) as a multi-member gzip of zeros (a few MB on disk)."""
    header = bytearray(352)
    struct.pack_into("<i", header, 0, 348)
    struct.pack_into("<8h", header, 40, 3, side, side, side, 1, 1, 1, 1)
    struct.pack_into("<2h", header, 70, 2, 8)  # uint8
    struct.pack_into("<8f", header, 76, 1, 1, 1, 1, 1, 1, 1, 1)
    struct.pack_into("<f", header, 108, 352.0)
    header[344:348] = b"n+1\0"
    first = gzip.compress(bytes(header) + bytes(member - 352), 9)
    rest = gzip.compress(bytes(member), 9)
    with open(path, "wb") as handle:
        handle.write(first)
        for _ in range(side**3 // member):
            handle.write(rest)


def test_a_decompression_bomb_under_a_memory_limit_is_one_line(built, tmp_path):
    predictions = _copy(FIXTURES / "pred", tmp_path / "predictions")
    ground_truth = _copy(FIXTURES / "gt", tmp_path / "ground_truth")
    metrics = open_dir(tmp_path / "metrics")
    bomb = predictions / "RibFrac901.nii.gz"
    _bomb(bomb)
    bomb.chmod(0o644)
    assert bomb.stat().st_size < 16 << 20
    result = _run(built, predictions, ground_truth, metrics, MEDCHALLENGE_MEMORY_LIMIT="3g")
    assert result.returncode == 1, result.stderr[-2000:]  # not 137: refused from the header, nothing decompressed
    assert _last_line(result) == ("error: /input/RibFrac901.nii.gz: the header declares 8589934592 voxels (2048 x "
                                  "2048 x 2048), more than the limit of 268435456 voxels ($MEDCHALLENGE_MAX_VOXELS "
                                  "sets it)")
    assert list(metrics.iterdir()) == []


def test_a_full_output_disk_is_one_line_and_leaves_nothing(built, tmp_path):
    predictions = _copy(FIXTURES / "pred", tmp_path / "predictions")
    ground_truth = _copy(FIXTURES / "gt", tmp_path / "ground_truth")
    script = "python3 /opt/app/evaluate.py --no-progress; echo exit=$?; ls -A /output"
    result = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--read-only", "--cap-drop", "ALL", "--user", "1000:1000",
         "--tmpfs", "/tmp", "--tmpfs", "/output:size=4k,uid=1000,gid=1000", "-v", f"{predictions}:/input:ro",
         "-v", f"{ground_truth}:{GROUND_TRUTH_IN_CONTAINER}:ro", "--entrypoint", "sh",
         f"medchallenge/ribfrac-evaluator:{VERSION}", "-c", script], capture_output=True, text=True)
    assert result.stdout.strip().splitlines()[-1] == "exit=1"  # and an empty /output: nothing half-written
    assert _last_line(result).startswith("error: ") and "No space left on device" in _last_line(result)
