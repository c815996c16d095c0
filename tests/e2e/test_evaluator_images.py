"""Evaluator images run with docker compose on synthetic data score exactly as the same code without Docker."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import open_dir, readable
from medchallenge.registry import CONFIGURATIONS, Configuration

TESTS = Path(__file__).resolve().parents[1]

# Every evaluator image whose generator writes predictions: those without an algorithm, and those whose algorithm
# has a generator of its own inputs (the TB evaluator scores its algorithm's: test_algorithm_compose.py)
EVALUATORS = [c for c in CONFIGURATIONS if c.challenge.algorithm is None or c.challenge.algorithm.generator]
EXTRA_ARGUMENTS = {"caption-2022-evaluator": ["--lemmatize"]}  # of both runs


@pytest.mark.parametrize("configuration", EVALUATORS, ids=[c.service.name for c in EVALUATORS])
def test_evaluator_image_matches_local_run(docker_compose, repo, tmp_path, configuration: Configuration):
    challenge, service = configuration.challenge, configuration.service
    extra = EXTRA_ARGUMENTS.get(service.name, [])
    data = tmp_path / "data"
    subprocess.run([sys.executable, "-m", "medchallenge.synth", challenge.name, "--out", str(data),
                    *challenge.test_size, *configuration.edition.synth_arguments, "--seed", "5"], check=True)
    readable(data)
    docker_compose("build", service.name)
    metrics_dir = open_dir(tmp_path / "metrics")
    env = service.environment(predictions=data / "predictions", ground_truth=data / "ground_truth",
                              metrics=metrics_dir, images=open_dir(tmp_path / "no-images"))  # no review.html
    result = docker_compose("run", "--rm", "--no-deps", service.name, *extra, env=env, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    in_docker = json.loads((metrics_dir / "metrics.json").read_text())
    local = tmp_path / "local"
    # the local run gets as environment what the image has baked in (its build arguments)
    subprocess.run([sys.executable, str(repo / "evaluators" / challenge.module / "evaluate.py"), "--input",
                    str(data / "predictions"), "--ground-truth", str(data / "ground_truth"), "--output", str(local),
                    "--no-progress", *extra], env=dict(os.environ, **service.build_args), check=True)
    assert in_docker["aggregates"] == json.loads((local / "metrics.json").read_text())["aggregates"]
    if "--lemmatize" in extra:  # spaCy and its model are inside the image, offline
        assert "bleu_lemmatized" in in_docker["aggregates"]
    assert sorted(p.name for p in metrics_dir.glob("*.png")) == sorted(p.name for p in local.glob("*.png"))
    assert list(metrics_dir.glob("*.png")), "the evaluator writes its figures beside metrics.json"


def _official_example(tmp_path: Path, service: str) -> tuple[Path, Path, dict]:
    """The official example for `service` under the names the evaluator reads, and the numbers it must give."""
    if service == "ribfrac-legacy-evaluator":
        fixtures = TESTS / "ribfrac" / "fixtures"
        results = json.loads((fixtures / "expected_output_legacy.json").read_text())["results"]
        return fixtures / "pred", fixtures / "gt", {"froc_average": results["detection"]["average_recall"],
                                                    "macro_f1": results["classification"]["macro_average_F1"]}
    edition = service.split("-")[1]
    fixtures = TESTS / "imageclef_caption" / "fixtures" / f"imageclef_caption_{edition}"
    gt, run = open_dir(tmp_path / "gt"), open_dir(tmp_path / "run")
    captions = "caption_gt.csv" if edition == "2022" else "caption_gt.tsv"
    shutil.copy(fixtures / "concept_gt.tsv", gt / "concepts.tsv")
    shutil.copy(fixtures / captions, gt / "captions.csv")
    shutil.copy(fixtures / ("concept_pred.csv" if edition == "2022" else "concept_pred.tsv"), run / "concepts.csv")
    shutil.copy(fixtures / captions.replace("_gt", "_pred"), run / "captions.csv")
    for path in [*gt.iterdir(), *run.iterdir()]:
        path.chmod(0o644)
    concept = json.loads((fixtures / "expected_concept.json").read_text())
    caption = json.loads((fixtures / "expected_caption.json").read_text())
    return run, gt, {"concept_f1": concept["score"], "bleu": caption["score"]}


@pytest.mark.parametrize("service", ["caption-2021-evaluator", "caption-2022-evaluator", "ribfrac-legacy-evaluator"])
def test_baked_configuration_scores_the_official_example_with_no_arguments(docker_compose, tmp_path, service):
    """As grand-challenge runs an evaluation: no arguments, no environment, only the mounts."""
    docker_compose("build", service)
    image = json.loads(docker_compose("config", "--format", "json").stdout)["services"][service]["image"]
    predictions, ground_truth, official = _official_example(tmp_path, service)
    metrics_dir = open_dir(tmp_path / "metrics")
    result = subprocess.run(["docker", "run", "--rm", "--network", "none", "--read-only", "--tmpfs", "/tmp",
                             "--user", "1000:1000", "-v", f"{predictions}:/input:ro",
                             "-v", f"{ground_truth}:/opt/ml/input/data/ground_truth:ro",
                             "-v", f"{metrics_dir}:/output", image], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    aggregates = json.loads((metrics_dir / "metrics.json").read_text())["aggregates"]
    assert {key: aggregates[key] for key in official} == official
