"""RibFrac with real Docker: CT volumes -> ribfrac-algorithm -> ribfrac-evaluator in one compose run, and the same
algorithm image run as grand-challenge would (emulator), scored the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import open_dir
from medchallenge.gc_emulator import ALGORITHMS, compose_runner, emulate, find_cases

SHAPE = ("112", "104", "40")


@pytest.fixture(scope="module")
def built(docker_compose):
    docker_compose("build", "ribfrac-algorithm", "ribfrac-evaluator", "ribfrac-legacy-evaluator")
    return docker_compose


@pytest.fixture(scope="module")
def cohort(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ribfrac")
    subprocess.run([sys.executable, "-m", "medchallenge.synth", "ribfrac-ct", "--out", str(root), "--cases", "2",
                    "--shape", *SHAPE, "--seed", "12"], check=True)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o644)
    return root


def test_one_compose_run_goes_from_ct_volumes_to_metrics(built, cohort, tmp_path, repo):
    predictions, metrics_dir = open_dir(tmp_path / "predictions"), open_dir(tmp_path / "metrics")
    env = {"RIBFRAC_INPUT": str(cohort / "input"), "RIBFRAC_PREDICTIONS": str(predictions),
           "RIBFRAC_GROUND_TRUTH": str(cohort / "ground_truth"), "RIBFRAC_METRICS": str(metrics_dir)}
    result = built("run", "--rm", "ribfrac-evaluator", env=env, check=False)
    built("down", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in predictions.iterdir()) == ["RibFrac501.nii.gz", "RibFrac502.nii.gz",
                                                             "ribfrac-predictions.csv"]
    metrics = json.loads((metrics_dir / "metrics.json").read_text())
    assert sorted(metrics["case"]) == ["RibFrac501", "RibFrac502"]
    local = tmp_path / "local"
    subprocess.run([sys.executable, str(repo / "evaluators/ribfrac/evaluate.py"), "--input", str(predictions),
                    "--ground-truth", str(cohort / "ground_truth"), "--output", str(local), "--no-progress"],
                   check=True)
    assert json.loads((local / "metrics.json").read_text())["aggregates"] == metrics["aggregates"]


def test_grand_challenge_emulation_matches_batch_mode(built, cohort, tmp_path, repo):
    spec = ALGORITHMS["ribfrac"]
    eval_input = emulate(spec, find_cases(spec, cohort / "input"), tmp_path / "gc",
                         compose_runner(spec, repo / "compose.yaml"))
    jobs = json.loads((eval_input / "predictions.json").read_text())
    assert len(jobs) == 2
    for job in jobs:
        output = eval_input / job["pk"] / "output"
        assert len(list((output / "images" / "rib-fracture-instances").glob("*.mha"))) == 1
        assert (output / "rib-fracture-detections.json").exists()
    for path in [eval_input, *eval_input.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o644)
    gc_metrics, batch_predictions, batch_metrics = (open_dir(tmp_path / n) for n in ("m-gc", "p-batch", "m-batch"))
    common = {"RIBFRAC_GROUND_TRUTH": str(cohort / "ground_truth"), "RIBFRAC_INPUT": str(cohort / "input")}
    built("run", "--rm", "--no-deps", "ribfrac-evaluator",
          env=dict(common, RIBFRAC_PREDICTIONS=str(eval_input), RIBFRAC_METRICS=str(gc_metrics)))
    built("run", "--rm", "ribfrac-evaluator",
          env=dict(common, RIBFRAC_PREDICTIONS=str(batch_predictions), RIBFRAC_METRICS=str(batch_metrics)))
    gc = json.loads((gc_metrics / "metrics.json").read_text())
    batch = json.loads((batch_metrics / "metrics.json").read_text())
    assert gc["meta"]["layout"] == "grand-challenge predictions.json"
    assert gc["aggregates"] == batch["aggregates"]
