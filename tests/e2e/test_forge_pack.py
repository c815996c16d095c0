"""grand-challenge-forge's challenge pack for an organiser's own challenge (issue 39 section 5): the pack generated
from examples/lung-nodule/pack-context.json by the pinned `grand-challenge-forge pack`, its example algorithm and
example evaluation method built offline (external_images.generate_forge's patches: the base image and the
wheelhouse only, their code as generated) and run unchanged through pre-flight and a phase.

The example algorithm writes `numpy.eye(4, 2)`, a float64 image, for the Segmentation socket: grand-challenge
refuses it ("Image segments could not be determined"), and so do pre-flight and the phase, in its words. The example
evaluation method scores the lung-nodule algorithm's jobs with its bogus per-job metric and `results` list, which
the leaderboard reads as per-case values (by position)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from external_images import build, generate_forge

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lung-nodule"
SEGMENTS_REFUSED = "Image segments could not be determined"
DEFINITION = """[challenge]
slug = "lung-nodule-forge"
title = "Lung nodule segmentation, scored by the forge's example evaluation"

[interface]
pack_context = "pack-context.json"

[cases]
patterns = ["*.mha"]

[ground_truth]
patterns = ["a_tarball_subdirectory/some_tarball_resource.txt"]

[evaluation]
image = "{evaluation}"

[leaderboard]
score_jsonpath = "aggregates.my_metric"
score_title = "my_metric"
score_case_jsonpath = "my_metric"
score_case_summary = "mean"
"""


def medchallenge(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "medchallenge.cli", *argv], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=900)


def tarball(folder: Path, target: Path) -> Path:
    with tarfile.open(target, "w:gz") as tar:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=str(path.relative_to(folder)))
    return target


@pytest.fixture(scope="module")
def pack(docker_compose, repo, tmp_path_factory) -> SimpleNamespace:
    root = tmp_path_factory.mktemp("forge pack")
    folders = generate_forge.generate_pack(EXAMPLE / "pack-context.json", root / "generated")
    algorithm = build.build("forge-lung-nodule-algorithm", source=folders["algorithm"])
    evaluation = build.build("forge-lung-nodule-evaluation", source=folders["evaluation"])
    subprocess.run([sys.executable, str(EXAMPLE / "make_data.py"), "--out", str(root / "data")], check=True,
                   capture_output=True)
    subprocess.run([sys.executable, str(EXAMPLE / "build.py"), "--wheelhouse", str(repo / "wheelhouse"),
                    "--build-folder", str(root / "build"), "--only", "algorithm"], check=True, capture_output=True)
    definition = root / "definition"
    definition.mkdir()
    shutil.copy(EXAMPLE / "pack-context.json", definition)
    (definition / "challenge.toml").write_text(DEFINITION.format(evaluation=evaluation))
    model = tarball(folders["model"], root / "forge-model.tar.gz")
    (root / "submissions.toml").write_text(
        f'[[submission]]\nteam = "forge"\nimage = "{algorithm}"\nmodel = "forge-model.tar.gz"\n\n'
        f'[[submission]]\nteam = "alpha"\nimage = "lung-nodule-algorithm:1"\nmodel = "data/models/alpha.tar.gz"\n')
    return SimpleNamespace(root=root, algorithm=algorithm, model=model,
                           common=["--challenge", str(definition / "challenge.toml"), "--cases",
                                   str(root / "data" / "cases"), "--ground-truth", str(folders["ground_truth"])])


def test_the_packs_example_algorithm_is_refused_by_preflight_in_grand_challenges_words(pack):
    out = pack.root / "preflight"
    result = medchallenge("preflight", *pack.common, "--image", pack.algorithm, "--model", str(pack.model),
                          "--output", str(out))
    assert result.returncode == 1, result.stdout[-3000:]
    report = json.loads((out / "preflight.json").read_text())
    assert [job["status"] for job in report["jobs"]] == ["failed"] * 4
    assert all(SEGMENTS_REFUSED in job["error"] for job in report["jobs"])
    assert report["evaluation"]["error"] is None  # the forge's evaluation runs on no job and says so in its metrics
    assert "NOT ready" in result.stdout


def test_a_phase_with_the_packs_algorithm_and_evaluation_method(pack):
    out = pack.root / "phase"
    result = medchallenge("phase", "run", *pack.common, "--submissions", str(pack.root / "submissions.toml"),
                          "--output", str(out), "--bootstrap", "100", "--no-progress")
    assert result.returncode == 0, result.stdout[-3000:]
    board = json.loads((out / "leaderboard.json").read_text())
    assert [row["team"] for row in board["teams"]] == ["alpha"]
    assert board["not_ranked"][0]["team"] == "forge" and "every job failed (4 of 4)" in board["not_ranked"][0]["reason"]
    metrics = json.loads((out / "submissions" / "alpha" / "evaluation" / "metrics.json").read_text())
    assert len(metrics["results"]) == 4 and board["teams"][0]["value"] == metrics["aggregates"]["my_metric"]
    assert board["columns"][0]["case_layout"] == "results" and board["columns"][0]["paired_by"] == "position"
    forge_jobs = json.loads((out / "submissions" / "forge" / "report.json").read_text())["jobs"]
    assert all(SEGMENTS_REFUSED in job["error"] for job in forge_jobs)
