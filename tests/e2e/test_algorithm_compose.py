"""Every algorithm image with real Docker, as the registry lists them: one compose run from synthetic inputs through the
algorithm and evaluator images to metrics.json, the same predictions scored without Docker, and the algorithm image
run as grand-challenge would (the emulator's job runner), scored as batch mode is."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import open_dir, readable
from medchallenge.grand_challenge.emulator import ALGORITHMS, emulate, find_cases, image_launcher
from medchallenge.registry import CONFIGURATIONS_WITH_DATA, SERVICES, Configuration

# every configuration with an algorithm service of its own (caption: one per edition)
WITH_ALGORITHM = [c for c in CONFIGURATIONS_WITH_DATA if c.challenge.algorithm and c.algorithm_service in SERVICES]
# the ones grand-challenge runs: each challenge's default configuration
ON_GRAND_CHALLENGE = [c for c in WITH_ALGORITHM if c == c.challenge.default]
# the run files each challenge's batch mode writes beside its per-case outputs (its official submission)
RUN_FILES = {"tb-caverns": {"submission.txt"}, "ribfrac": {"ribfrac-predictions.csv"},
             "object-cxr": {"classification.csv", "localization.csv"},
             "imageclef-caption": {"concepts.csv", "captions.csv"}}


@pytest.fixture(scope="module", params=WITH_ALGORITHM, ids=[c.algorithm_service.name for c in WITH_ALGORITHM])
def setup(request, docker_compose, tmp_path_factory) -> tuple[Configuration, Path]:
    """The configuration's algorithm and evaluator images built, and a synthetic cohort of its algorithm's inputs
    (compose.yaml mounts them into the evaluator too, where it finds the case images of its review.html)."""
    configuration: Configuration = request.param
    challenge = configuration.challenge
    docker_compose("build", configuration.algorithm_service.name, configuration.service.name)
    root = tmp_path_factory.mktemp(configuration.algorithm_service.name)
    subprocess.run([sys.executable, "-m", "medchallenge.synth", challenge.input_generator, "--out", str(root),
                    *challenge.input_generator_size(demo=False), *configuration.edition.synth_arguments,
                    "--seed", "11"], check=True)
    return configuration, readable(root)


def compose_score(docker_compose, configuration: Configuration, cohort: Path, predictions: Path, metrics: Path,
                  run_algorithm: bool = True) -> dict:
    """`docker compose run` of the evaluator (after the algorithm unless `run_algorithm` is false): its metrics."""
    env = {**configuration.algorithm_service.environment(input=cohort / "input", predictions=predictions),
           **configuration.service.environment(predictions=predictions, ground_truth=cohort / "ground_truth",
                                               metrics=metrics)}
    result = docker_compose("run", "--rm", *([] if run_algorithm else ["--no-deps"]), configuration.service.name,
                            env=env, check=False)
    docker_compose("down", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((metrics / "metrics.json").read_text())


def test_one_compose_run_goes_from_inputs_to_metrics(setup, docker_compose, tmp_path, repo):
    configuration, cohort = setup
    challenge = configuration.challenge
    predictions, metrics_dir = open_dir(tmp_path / "predictions"), open_dir(tmp_path / "metrics")
    metrics = compose_score(docker_compose, configuration, cohort, predictions, metrics_dir)
    assert RUN_FILES[challenge.name] <= {p.name for p in predictions.iterdir()}
    assert set(metrics) == {"aggregates", "case", "meta"}
    assert len(metrics["case"]) == len(find_cases(ALGORITHMS[challenge.name], cohort / "input"))
    assert metrics["aggregates"] and all(math.isfinite(v) for v in metrics["aggregates"].values())
    assert metrics["meta"]["options"].items() >= {k.split("_")[-1].lower(): v for k, v in
                                                  configuration.edition.build_args.items()}.items()
    # the same predictions scored without Docker (the options the image bakes in as its environment) agree
    local = tmp_path / "local"
    subprocess.run([sys.executable, str(repo / "evaluators" / challenge.module / "evaluate.py"), "--input",
                    str(predictions), "--ground-truth", str(cohort / "ground_truth"), "--output", str(local),
                    "--images", str(cohort / "input"), "--no-progress"], check=True,
                   env={**os.environ, **configuration.edition.build_args})
    assert json.loads((local / "metrics.json").read_text())["aggregates"] == metrics["aggregates"]
    # review.html drawn inside the image from the mounted inputs as without Docker from --images (its figures need
    # the image's SimpleITK and matplotlib)
    drawn = [len(re.findall(r'<img alt="[^"]*" src="data:image/png;base64,', (folder / "review.html").read_text()))
             for folder in (metrics_dir, local)]
    assert drawn[0] == drawn[1] > 0


@pytest.mark.parametrize("setup", ON_GRAND_CHALLENGE, ids=[c.algorithm_service.name for c in ON_GRAND_CHALLENGE],
                         indirect=True)
def test_grand_challenge_emulation_matches_batch_mode(setup, docker_compose, tmp_path, repo):
    configuration, cohort = setup
    spec = ALGORITHMS[configuration.challenge.name]
    cases = find_cases(spec, cohort / "input")
    (cohort_view := tmp_path / "uploads").mkdir()  # the cases, plus a file GC's upload would not see as a case
    for case in cases:
        (cohort_view / case.name).symlink_to(case)
    (cohort_view / "notes.txt").write_text("not a case")
    eval_input = emulate(spec, find_cases(spec, cohort_view), tmp_path / "gc",
                         image_launcher(spec, name_prefix="medchallenge-test-job"))
    jobs = json.loads((eval_input / "predictions.json").read_text())
    assert len(jobs) == len(cases)
    for job in jobs:  # every output socket filled; the image's own model ran (empty /opt/ml/model)
        output = eval_input / job["pk"] / "output"
        assert all((output / socket.relative_path).exists() for socket in spec.output_sockets), job["pk"]
        assert not any((tmp_path / "gc" / "jobs" / job["pk"] / "model").iterdir())
    readable(eval_input)
    gc = compose_score(docker_compose, configuration, cohort, eval_input, open_dir(tmp_path / "m-gc"),
                       run_algorithm=False)
    batch = compose_score(docker_compose, configuration, cohort, open_dir(tmp_path / "p-batch"),
                          open_dir(tmp_path / "m-batch"))
    assert gc["meta"]["layout"] == "grand-challenge predictions.json"
    assert gc["aggregates"] == batch["aggregates"]
