"""object-CXR with real Docker: one compose run from radiographs to metrics through the detector image, and
grand-challenge emulation of that image giving the same aggregates as batch mode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import open_dir
from medchallenge.gc_emulator import ALGORITHMS, compose_runner, emulate, find_cases
from medchallenge.registry import CHALLENGES

CHALLENGE = CHALLENGES["object-cxr"]


@pytest.fixture(scope="module")
def built(docker_compose):
    docker_compose("build", "object-cxr-algorithm", "object-cxr-evaluator")
    return docker_compose


@pytest.fixture(scope="module")
def cohort(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cxr")
    subprocess.run([sys.executable, "-m", "medchallenge.synth", CHALLENGE.input_generator, "--out", str(root),
                    *CHALLENGE.input_generator_size(demo=False), "--seed", "11"], check=True)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o644)
    return root


def folders(cohort: Path, predictions: Path, metrics: Path) -> dict[str, str]:
    return {"OBJECT_CXR_INPUT": str(cohort / "input"), "OBJECT_CXR_PREDICTIONS": str(predictions),
            "OBJECT_CXR_GROUND_TRUTH": str(cohort / "ground_truth"), "OBJECT_CXR_METRICS": str(metrics)}


def test_one_compose_run_goes_from_radiographs_to_metrics(built, cohort, tmp_path, repo):
    predictions, metrics_dir = open_dir(tmp_path / "predictions"), open_dir(tmp_path / "metrics")
    env = folders(cohort, predictions, metrics_dir)
    result = built("run", "--rm", "object-cxr-evaluator", env=env, check=False)
    built("down", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    names = sorted(p.name for p in (cohort / "input").iterdir())
    for run_file in ("classification.csv", "localization.csv"):
        lines = (predictions / run_file).read_text().splitlines()
        assert lines[0] == "image_path,prediction" and sorted(line.split(",")[0] for line in lines[1:]) == names
    metrics = json.loads((metrics_dir / "metrics.json").read_text())
    assert 0.0 <= metrics["aggregates"]["auc"] <= 1.0 and 0.0 <= metrics["aggregates"]["froc"] <= 1.0
    local = tmp_path / "local"
    subprocess.run([sys.executable, str(repo / "evaluators/object_cxr/evaluate.py"), "--input", str(predictions),
                    "--ground-truth", str(cohort / "ground_truth"), "--output", str(local), "--no-progress"],
                   check=True)
    assert json.loads((local / "metrics.json").read_text())["aggregates"] == metrics["aggregates"]


def test_grand_challenge_emulation_matches_batch_mode(built, cohort, tmp_path, repo):
    spec = ALGORITHMS["object-cxr"]
    eval_input = emulate(spec, find_cases(spec, cohort / "input"), tmp_path / "gc",
                         compose_runner(spec, repo / "compose.yaml"))
    jobs = json.loads((eval_input / "predictions.json").read_text())
    assert len(jobs) == len(list((cohort / "input").iterdir()))
    for job in jobs:
        output = eval_input / job["pk"] / "output"
        assert isinstance(json.loads((output / "foreign-object-likelihood.json").read_text()), float)
        assert json.loads((output / "foreign-objects.json").read_text())["type"] == "Multiple points"
    for path in [eval_input, *eval_input.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o644)
    gc_metrics, batch_predictions, batch_metrics = (open_dir(tmp_path / n) for n in ("m-gc", "p-batch", "m-batch"))
    built("run", "--rm", "--no-deps", "object-cxr-evaluator", env=folders(cohort, eval_input, gc_metrics))
    built("run", "--rm", "object-cxr-evaluator", env=folders(cohort, batch_predictions, batch_metrics))
    gc = json.loads((gc_metrics / "metrics.json").read_text())
    batch = json.loads((batch_metrics / "metrics.json").read_text())
    assert gc["meta"]["layout"] == "grand-challenge predictions.json"
    assert gc["aggregates"] == batch["aggregates"]
