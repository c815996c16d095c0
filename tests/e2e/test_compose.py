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
from medchallenge.registry import CHALLENGES, CONFIGURATIONS_WITH_DATA

VERSION = os.environ.get("MEDCHALLENGE_VERSION") or "0.1.0"  # compose.yaml's image tag


@pytest.fixture(scope="module")
def built(docker_compose):
    docker_compose("build", "tb-caverns-algorithm", "tb-caverns-evaluator")
    return docker_compose


@pytest.fixture(scope="module")
def cohort(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tb")
    subprocess.run([sys.executable, "-m", "medchallenge.synth", "tb-caverns", "--out", str(root),
                    *CHALLENGES["tb-caverns"].test_size, "--seed", "11"], check=True)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o644)
    return root


def test_images_are_hardened_as_the_contract_requires(built):
    built("build")  # every image of compose.yaml, the configuration images included
    images = built("config", "--images").stdout.split()
    assert len(images) == len(set(images)) >= 9
    for image in images:
        config = json.loads(subprocess.run(["docker", "image", "inspect", image], check=True, capture_output=True,
                                           text=True).stdout)[0]
        assert config["Config"]["User"] == "1000:1000", image
        assert config["Architecture"] == "amd64", image
        assert config["Config"]["Entrypoint"][0] == "python3" and not config["Config"]["Cmd"], image
        name = image.split("/", 1)[1].split(":")[0]
        assert config["Config"]["Labels"]["org.opencontainers.image.title"] == f"medchallenge-{name}"
    services = json.loads(built("config", "--format", "json").stdout)["services"]
    for name, service in services.items():
        assert service["network_mode"] == "none" and service["read_only"] is True, name
        assert service["cap_drop"] == ["ALL"] and "no-new-privileges:true" in service["security_opt"], name
        assert int(service["mem_limit"]) == 8 << 30, name  # MEDCHALLENGE_MEMORY_LIMIT, default 8g
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
    assert gc["meta"]["layout"] == "grand-challenge predictions.json"
    assert gc["aggregates"] == batch["aggregates"]


CAPTION = [c for c in CONFIGURATIONS_WITH_DATA if c.challenge.name == "imageclef-caption"]


@pytest.fixture(scope="module")
def caption_built(docker_compose):
    docker_compose("build", *(s for c in CAPTION for s in (c.algorithm_service.name, c.service.name)))
    return docker_compose


def _caption_cohort(root: Path, configuration, *size: str) -> Path:
    subprocess.run([sys.executable, "-m", "medchallenge.synth", configuration.challenge.input_generator, "--out",
                    str(root), *size, *configuration.edition.synth_arguments, "--seed", "12"], check=True)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o644)
    return root


@pytest.mark.parametrize("configuration", CAPTION, ids=[c.service.name for c in CAPTION])
def test_one_caption_compose_run_goes_from_figures_to_metrics(caption_built, configuration, tmp_path, repo):
    challenge, service, algorithm = configuration.challenge, configuration.service, configuration.algorithm_service
    edition = configuration.edition.build_args["CAPTION_EDITION"]
    data = _caption_cohort(tmp_path / "data", configuration, *challenge.test_size)
    predictions, metrics_dir = open_dir(tmp_path / "predictions"), open_dir(tmp_path / "metrics")
    env = {**algorithm.environment(input=data / "input", predictions=predictions),
           **service.environment(predictions=predictions, ground_truth=data / "ground_truth", metrics=metrics_dir)}
    result = caption_built("run", "--rm", service.name, env=env, check=False)
    caption_built("down", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((metrics_dir / "metrics.json").read_text())
    assert metrics["meta"]["options"]["edition"] == edition and len(metrics["case"]) == 300
    assert 0.0 < metrics["aggregates"]["concept_f1"] <= 1.0 and 0.0 < metrics["aggregates"]["bleu"] <= 1.0
    # the image's edition is baked in: the same run files as the inference script given --edition here
    local = tmp_path / "local"
    subprocess.run([sys.executable, str(repo / "algorithms" / challenge.module / "inference.py"), "--input",
                    str(data / "input"), "--output", str(local), "--edition", edition, "--device", "cpu"], check=True)
    for name in ("concepts.csv", "captions.csv"):
        assert (predictions / name).read_text() == (local / name).read_text(), name


def test_caption_grand_challenge_emulation_matches_batch_mode(caption_built, tmp_path, repo):
    spec, configuration = ALGORITHMS["imageclef-caption"], CAPTION[0]
    data = _caption_cohort(tmp_path / "data", configuration, "--images", "3")
    eval_input = emulate(spec, find_cases(spec, data / "input"), tmp_path / "gc",
                         compose_runner(spec, repo / "compose.yaml"))
    for path in [eval_input, *eval_input.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o644)
    service, algorithm = configuration.service, configuration.algorithm_service
    results = []
    for name, predictions in (("gc", eval_input), ("batch", open_dir(tmp_path / "batch"))):
        metrics_dir = open_dir(tmp_path / f"metrics-{name}")
        env = {**algorithm.environment(input=data / "input", predictions=predictions),
               **service.environment(predictions=predictions, ground_truth=data / "ground_truth",
                                     metrics=metrics_dir)}
        caption_built("run", "--rm", *(["--no-deps"] if name == "gc" else []), service.name, env=env)
        results.append(json.loads((metrics_dir / "metrics.json").read_text()))
    assert results[0]["meta"]["layout"] == "grand-challenge predictions.json"
    assert results[0]["aggregates"] == results[1]["aggregates"]


GPU_IMAGE = f"medchallenge/tb-caverns-algorithm-gpu:{VERSION}"
CUDA_PROVIDER_CHECK = """
import ctypes, pathlib, onnxruntime as ort
ort.preload_dlls(directory="")
ctypes.CDLL(str(pathlib.Path(ort.__file__).parent / "capi" / "libonnxruntime_providers_cuda.so"))
print(ort.__version__, " ".join(ort.get_available_providers()))
"""


def hardened_run(image: str, *args: str, volumes: dict[Path, str] = {}, entrypoint: str | None = None):
    """`docker run` as compose.yaml runs a service: no network, read-only, no capabilities, uid 1000."""
    command = ["docker", "run", "--rm", "--network", "none", "--read-only", "--tmpfs", "/tmp", "--cap-drop", "ALL",
               "--security-opt", "no-new-privileges:true", "--user", "1000:1000"]
    for source, target in volumes.items():
        command += ["-v", f"{source}:{target}"]
    if entrypoint:
        command += ["--entrypoint", entrypoint]
    return subprocess.run([*command, image, *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def gpu_image(built, repo):
    """The GPU variant (make images GPU=1), built offline like the rest."""
    subprocess.run(["docker", "compose", "-f", str(repo / "compose.yaml"), "-f", str(repo / "compose.gpu.yaml"),
                    "build", "tb-caverns-algorithm"], check=True, capture_output=True, text=True)
    return GPU_IMAGE


def test_gpu_image_carries_cuda_12_onnxruntime_and_its_libraries(gpu_image):
    result = hardened_run(gpu_image, "-c", CUDA_PROVIDER_CHECK, entrypoint="python3")
    assert result.returncode == 0, result.stderr[-2000:]
    version, providers = result.stdout.split()[0], result.stdout.split()[1:]
    assert version == "1.26.0" and "CUDAExecutionProvider" in providers  # and its CUDA/cuDNN libraries load


def test_gpu_image_runs_on_cpu_without_a_gpu_and_predicts_as_the_cpu_image(gpu_image, built, cohort, tmp_path):
    gpu_out, cpu_out = open_dir(tmp_path / "gpu"), open_dir(tmp_path / "cpu")
    result = hardened_run(gpu_image, volumes={cohort / "input": "/input:ro", gpu_out: "/output"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "provider CPUExecutionProvider" in result.stdout + result.stderr  # no GPU here: CPU, and logged
    cpu = hardened_run(f"medchallenge/tb-caverns-algorithm:{VERSION}", volumes={cohort / "input": "/input:ro",
                                                                             cpu_out: "/output"})
    assert cpu.returncode == 0, cpu.stderr[-3000:]
    for case in sorted(cpu_out.glob("TST_*.json")):
        on_cpu, on_gpu_image = (json.loads(p.read_text()) for p in (case, gpu_out / case.name))
        assert [b["voxel_bbox"] for b in on_gpu_image["boxes"]] == [b["voxel_bbox"] for b in on_cpu["boxes"]], case.name
        for a, b in zip(on_gpu_image["boxes"], on_cpu["boxes"]):
            assert a["probability"] == pytest.approx(b["probability"], abs=1e-5)
