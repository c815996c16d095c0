"""Evaluator images run with docker compose on synthetic data score exactly as the same code without Docker."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import open_dir

# (compose service, env prefix, synth arguments at test size, evaluate.py, extra evaluator arguments)
EVALUATORS = [
    ("ribfrac-evaluator", "RIBFRAC", ["ribfrac", "--cases", "4", "--seed", "5"], "evaluators/ribfrac/evaluate.py", []),
    ("caption-2022-evaluator", "CAPTION_2022", ["imageclef-caption", "--edition", "2022", "--images", "300",
     "--secondary", "--seed", "5"], "evaluators/imageclef_caption/evaluate.py", ["--edition", "2022", "--lemmatize"]),
    ("caption-2021-evaluator", "CAPTION_2021", ["imageclef-caption", "--edition", "2021", "--images", "300",
     "--seed", "5"], "evaluators/imageclef_caption/evaluate.py", ["--edition", "2021"]),
    ("object-cxr-evaluator", "OBJECT_CXR", ["object-cxr", "--images", "200", "--seed", "5"],
     "evaluators/object_cxr/evaluate.py", []),
]


@pytest.mark.parametrize("service, prefix, synth, script, extra", EVALUATORS, ids=[e[0] for e in EVALUATORS])
def test_evaluator_image_matches_local_run(docker_compose, repo, tmp_path, service, prefix, synth, script, extra):
    data = tmp_path / "data"
    subprocess.run([sys.executable, "-m", "medchallenge.synth", synth[0], "--out", str(data), *synth[1:]], check=True)
    for path in [data, *data.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o644)
    docker_compose("build", service)
    metrics_dir = open_dir(tmp_path / "metrics")
    env = {f"{prefix}_PREDICTIONS": str(data / "predictions"), f"{prefix}_GROUND_TRUTH": str(data / "ground_truth"),
           f"{prefix}_METRICS": str(metrics_dir)}
    result = docker_compose("run", "--rm", "--no-deps", service, *extra, env=env, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    in_docker = json.loads((metrics_dir / "metrics.json").read_text())
    local = tmp_path / "local"
    subprocess.run([sys.executable, str(repo / script), "--input", str(data / "predictions"), "--ground-truth",
                    str(data / "ground_truth"), "--output", str(local), "--no-progress", *extra], check=True)
    assert in_docker["aggregates"] == json.loads((local / "metrics.json").read_text())["aggregates"]
    if "--lemmatize" in extra:  # spaCy and its model are inside the image, offline
        assert "bleu_lemmatized" in in_docker["aggregates"]
    assert sorted(p.name for p in metrics_dir.glob("*.png")) == sorted(p.name for p in local.glob("*.png"))
    assert list(metrics_dir.glob("*.png")), "the evaluator writes its figures beside metrics.json"
