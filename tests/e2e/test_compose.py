"""The images as built by docker compose: hardened as the contract requires, and the GPU variant of the algorithm
images (the end-to-end runs of every algorithm are in test_algorithm_compose.py).

These tests need a Docker engine with Compose v2; with REQUIRE_DOCKER=1 (CI) a missing engine fails them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import open_dir, readable
from medchallenge.contract import GC_GROUND_TRUTH
from medchallenge.registry import CHALLENGES

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
    return readable(root)


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


def test_compose_evaluator_reviews_the_mounted_inputs_and_as_on_grand_challenge_writes_no_review(built, cohort,
                                                                                                 tmp_path):
    """compose.yaml mounts the challenge's input/ (read-only) into its evaluator: one `docker compose run` writes
    review.html with a figure per CT beside metrics.json. Grand-challenge mounts no images folder: the same image
    run as it runs it (no arguments, its two folders) writes metrics.json alone, with the same numbers."""
    configuration = CHALLENGES["tb-caverns"].default
    service = configuration.service
    predictions, metrics = open_dir(tmp_path / "predictions"), open_dir(tmp_path / "metrics")
    env = {**configuration.algorithm_service.environment(input=cohort / "input", predictions=predictions),
           **service.environment(predictions=predictions, ground_truth=cohort / "ground_truth", metrics=metrics)}
    result = built("run", "--rm", service.name, env=env, check=False)
    built("down", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    page = (metrics / "review.html").read_text()
    drawn = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,', page)
    assert len(drawn) == len(list((cohort / "input").glob("*.nii.gz"))) > 0
    as_on_grand_challenge = open_dir(tmp_path / "gc")
    result = hardened_run(f"{service.image}:{VERSION}", volumes={predictions: "/input:ro",
                                                                 cohort / "ground_truth": f"{GC_GROUND_TRUTH}:ro",
                                                                 as_on_grand_challenge: "/output"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert [p.name for p in as_on_grand_challenge.iterdir()] == ["metrics.json"]
    assert "review" not in result.stdout + result.stderr  # not a word: no images is the normal case there
    aggregates = [json.loads((folder / "metrics.json").read_text())["aggregates"]
                  for folder in (metrics, as_on_grand_challenge)]
    assert aggregates[0] == aggregates[1]


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
