"""A small real phase for the hostile phase tests and the phase's benchmark: the job-runner test image (tests/job_images/broken) under a tag of
these tests, a synthetic TB-caverns cohort and `medchallenge phase run`'s argument list."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

IMAGE = "mc-test-h37-phase"


def build_image(repo: Path, behaviour: str, image: str = IMAGE, label: str = "mc-test-h37=phase") -> str:
    """The test image behaving as `behaviour`, tagged `image`:behaviour in Docker (labelled: the tests' own)."""
    tag = f"{image}:{behaviour}"
    subprocess.run(["docker", "build", "--quiet", "--build-arg", f"BEHAVIOUR={behaviour}", "--label", label,
                    "--tag", tag, str(repo / "tests" / "job_images" / "broken")], check=True, capture_output=True)
    return tag


def save_image(tag: str, archive: Path) -> Path:
    """`docker save` of `tag` as an uncompressed archive (every engine loads it)."""
    subprocess.run(["docker", "save", "--output", str(archive), tag], check=True, capture_output=True)
    return archive


def synth_cohort(root: Path, cases: int, seed: int = 1) -> Path:
    """`cases` small TB-caverns CTs and their ground truth under `root` (input/, ground_truth/)."""
    subprocess.run([sys.executable, "-m", "medchallenge.synth", "tb-caverns", "--out", str(root), "--cases",
                    str(cases), "--shape", "64", "64", "16", "--spacing", "5", "5", "16", "--seed", str(seed)],
                   check=True, capture_output=True)
    return root


def phase_argv(submissions: Path, cohort: Path, out: Path, *extra: str) -> list[str]:
    """`medchallenge phase run` on the cohort with small limits, locally, one job at a time."""
    return ["phase", "run", "--challenge", "tb-caverns", "--submissions", str(submissions), "--cases",
            str(cohort / "input"), "--ground-truth", str(cohort / "ground_truth"), "--output", str(out), "--cpus", "1",
            "--memory-gb", "1.5", "--time-limit", "120", "--bootstrap", "20", "--no-progress", *extra]
