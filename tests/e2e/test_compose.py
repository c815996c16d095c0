"""The real thing: images built and run with docker compose, hardened, as a user and as grand-challenge would.

These tests need a Docker engine with Compose v2; with REQUIRE_DOCKER=1 (CI) a missing engine fails them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import open_dir
from medchallenge.gc_emulator import ALGORITHMS, compose_runner, emulate, find_cases

SHAPE = ("192", "192", "48")
VERSION = os.environ.get("MEDCHALLENGE_VERSION") or "0.1.0"  # compose.yaml's image tag


@pytest.fixture(scope="module")
def built(docker_compose):
    docker_compose("build", "tb-caverns-algorithm", "tb-caverns-evaluator")
    return docker_compose


@pytest.fixture(scope="module")
def cohort(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tb")
    subprocess.run([sys.executable, "-m", "medchallenge.synth", "tb-caverns", "--out", str(root), "--cases", "3",
                    "--seed", "11", "--shape", *SHAPE], check=True)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o644)
    return root


def test_images_are_hardened_as_the_contract_requires(built):
    for service in ("tb-caverns-algorithm", "tb-caverns-evaluator"):
        image = f"medchallenge/{service}:{VERSION}"
        config = json.loads(subprocess.run(["docker", "image", "inspect", image], check=True, capture_output=True,
                                           text=True).stdout)[0]
        assert config["Config"]["User"] == "1000:1000"
        assert config["Architecture"] == "amd64"
        assert config["Config"]["Entrypoint"][0] == "python3" and not config["Config"]["Cmd"]
        assert config["Config"]["Labels"]["org.opencontainers.image.title"] == f"medchallenge-{service}"
    services = json.loads(built("config", "--format", "json").stdout)["services"]
    for name, service in services.items():
        assert service["network_mode"] == "none" and service["read_only"] is True, name
        assert service["cap_drop"] == ["ALL"] and "no-new-privileges:true" in service["security_opt"], name
        targets = [v["target"] for v in service["volumes"]]
        assert ("/opt/ml/input/data/ground_truth" in targets) == name.endswith("-evaluator"), name


def test_one_compose_run_goes_from_images_to_metrics(built, cohort, tmp_path, repo):
    predictions, metrics_dir = open_dir(tmp_path / "predictions"), open_dir(tmp_path / "metrics")
    env = {"TB_CAVERNS_INPUT": str(cohort / "input"), "TB_CAVERNS_PREDICTIONS": str(predictions),
           "TB_CAVERNS_GROUND_TRUTH": str(cohort / "ground_truth"), "TB_CAVERNS_METRICS": str(metrics_dir)}
    result = built("run", "--rm", "tb-caverns-evaluator", env=env, check=False)
    built("down", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (predictions / "submission.txt").exists()
    assert sorted(p.name for p in predictions.glob("TST_*.json")) == [f"TST_00{i}.json" for i in (1, 2, 3)]
    metrics = json.loads((metrics_dir / "metrics.json").read_text())
    assert set(metrics) == {"aggregates", "case", "meta"}
    assert 0.0 <= metrics["aggregates"]["map"] <= 1.0
    # the same predictions scored without Docker give the same numbers
    local = tmp_path / "local"
    subprocess.run([sys.executable, str(repo / "evaluators/tb_caverns/evaluate.py"), "--input", str(predictions),
                    "--ground-truth", str(cohort / "ground_truth"), "--output", str(local), "--no-progress"],
                   check=True)
    assert json.loads((local / "metrics.json").read_text())["aggregates"] == metrics["aggregates"]


def test_grand_challenge_emulation_matches_batch_mode(built, cohort, tmp_path, repo):
    spec = ALGORITHMS["tb-caverns"]
    (tmp_path / "cases").mkdir()
    for case in sorted((cohort / "input").glob("*.nii.gz")):  # plus a file GC's upload would not see as a case
        (tmp_path / "cases" / case.name).symlink_to(case)
    (tmp_path / "cases" / "notes.txt").write_text("not a case")
    eval_input = emulate(spec, find_cases(spec, tmp_path / "cases"), tmp_path / "gc",
                         compose_runner(spec, repo / "compose.yaml"))
    jobs = json.loads((eval_input / "predictions.json").read_text())
    assert len(jobs) == 3 and all((eval_input / j["pk"] / "output" / "tb-cavern-boxes.json").exists() for j in jobs)
    assert sorted(p.name for p in eval_input.iterdir() if p.is_file()) == ["inputs.json", "predictions.json"]
    for job in jobs:  # the image's own model ran (empty /opt/ml/model); the upload was converted by panimg
        job_dir = tmp_path / "gc" / "jobs" / job["pk"]
        assert not any((job_dir / "model").iterdir())
        [image] = (job_dir / "input" / "images" / "ct").iterdir()
        assert image.name == job["inputs"][0]["image"]["pk"] + ".mha"
    for path in [eval_input, *eval_input.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o644)
    gc_metrics, batch_predictions, batch_metrics = (open_dir(tmp_path / n) for n in ("m-gc", "p-batch", "m-batch"))
    common = {"TB_CAVERNS_GROUND_TRUTH": str(cohort / "ground_truth"), "TB_CAVERNS_INPUT": str(cohort / "input")}
    built("run", "--rm", "--no-deps", "tb-caverns-evaluator",
          env=dict(common, TB_CAVERNS_PREDICTIONS=str(eval_input), TB_CAVERNS_METRICS=str(gc_metrics)))
    built("run", "--rm", "tb-caverns-evaluator",
          env=dict(common, TB_CAVERNS_PREDICTIONS=str(batch_predictions), TB_CAVERNS_METRICS=str(batch_metrics)))
    gc = json.loads((gc_metrics / "metrics.json").read_text())
    batch = json.loads((batch_metrics / "metrics.json").read_text())
    assert gc["meta"]["predictions"] == "grand-challenge predictions.json"
    assert gc["aggregates"] == batch["aggregates"]
