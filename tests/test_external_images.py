"""Images the project did not write (tests/external_images): grand-challenge-forge's algorithm template for two
challenges and a participant's realistic-size models (nnU-Net's default 3-D U-Net, a ResNet-50), built offline and
run through `medchallenge preflight` (jobs and scoring) on two small synthetic cases each, on the CPU."""

from __future__ import annotations

import filecmp
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import docker_problem
from external_images import build, generate_forge, participant_models

from medchallenge import preflight

def test_forge_templates_are_what_the_generator_writes(tmp_path):
    """The committed templates are byte for byte what generate_forge.py makes with the pinned forge."""
    generate_forge.main(["--out", str(tmp_path)])
    for name in generate_forge.CHALLENGE_NAMES:
        comparison = filecmp.dircmp(tmp_path / name, generate_forge.OUT / name)
        differing = []

        def collect(c, prefix=""):
            differing.extend(prefix + n for n in c.left_only + c.right_only + c.diff_files + c.funny_files)
            for sub, child in c.subdirs.items():
                collect(child, f"{prefix}{sub}/")

        collect(comparison)
        assert not differing, f"{name}: regenerate tests/external_images/forge ({differing})"
        source = (generate_forge.OUT / name / "inference.py").read_text()
        assert "torch" not in source and "load_image_file_as_array" in source and "write_json_file" in source


@pytest.fixture(scope="module")
def docker_images():
    """The external images, built offline from the wheelhouse (make wheels)."""
    problem = docker_problem()
    if problem:
        if os.environ.get("REQUIRE_DOCKER") == "1" or os.environ.get("CI") == "true":
            pytest.fail(f"Docker is required (REQUIRE_DOCKER=1 or CI=true) but {problem}")
        pytest.skip(f"Docker not available: {problem}")
    try:
        return {name: build.build(name) for name in build.IMAGES}
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"building {exc.cmd}: {exc.stderr[-2000:]}")


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """(cases, ground truth) of two small synthetic cases per challenge: 64 x 64 x 32 CTs, 256-pixel radiographs."""
    root = tmp_path_factory.mktemp("external_cases")
    python = [sys.executable, "-m", "medchallenge.synth"]
    subprocess.run([*python, "tb-caverns", "--out", str(root / "tb"), "--cases", "2", "--seed", "5",
                    "--shape", "64", "64", "32"], check=True, capture_output=True)
    subprocess.run([*python, "object-cxr-images", "--out", str(root / "cxr"), "--images", "2", "--seed", "3",
                    "--size", "256"], check=True, capture_output=True)
    return {"tb-caverns": (root / "tb" / "input", root / "tb" / "ground_truth"),
            "object-cxr": (root / "cxr" / "input", root / "cxr" / "ground_truth")}


@pytest.fixture(scope="module")
def participant_tarballs(tmp_path_factory) -> dict[str, Path]:
    """The realistic-size models as model tarballs (seeded random weights, written here, never committed)."""
    out = tmp_path_factory.mktemp("participant_models")
    tarballs = {}
    for name, expected in (("unet3d", 31.19e6), ("resnet50", 23.56e6)):
        tarballs[name], parameters = participant_models.write_model_tarball(name, out)
        assert abs(parameters - expected) < 0.01e6, (name, parameters)
    return tarballs


def run_preflight(image: str, challenge: str, cases: tuple[Path, Path], model: Path, out: Path) -> dict:
    """`medchallenge preflight` on the CPU with the ground truth; its preflight.json."""
    inputs, ground_truth = cases
    status = preflight.main(["--challenge", challenge, "--image", image, "--cases", str(inputs), "--ground-truth",
                             str(ground_truth), "--model", str(model), "--gpu", "off", "--memory-gb", "4",
                             "--time-limit", "300", "--bootstrap", "100", "--output", str(out)])
    report = json.loads((out / "preflight.json").read_text())
    assert status == 0 and report["ready"], [(j["case"], j["error"], j["stderr_tail"][-3:]) for j in report["jobs"]]
    assert report["summary"]["num_succeeded"] == 2 and not report["summary"]["used_gpu"]
    for job in report["jobs"]:
        assert job["outputs"] and all(o["valid"] for o in job["outputs"])
        assert job["peak_memory_bytes"] and job["wall_seconds"] > 0
    assert report["evaluation"]["error"] is None and report["evaluation"]["aggregates"]
    return report


@pytest.mark.parametrize("challenge", generate_forge.CHALLENGE_NAMES)
def test_forge_image_passes_preflight(challenge, docker_images, cases, tmp_path):
    """The forge image reads its input socket and the model tarball's subfolder as generated and writes valid
    output sockets, which the challenge's evaluator scores: the model tarball is the template's model/ folder packed
    as its do_save.sh packs it."""
    model = tmp_path / "model.tar.gz"
    with tarfile.open(model, "w:gz") as tar:
        tar.add(generate_forge.OUT / challenge / "model", arcname=".")
    report = run_preflight(docker_images[f"forge-{challenge}"], challenge, cases[challenge], model, tmp_path / "out")
    assert "For instance: some weights for your model." in "\n".join(report["jobs"][0]["stdout_tail"])


@pytest.mark.parametrize(("model_name", "challenge"), [("unet3d", "tb-caverns"), ("resnet50", "object-cxr")])
def test_participant_model_passes_preflight_on_small_inputs(model_name, challenge, docker_images, cases,
                                                            participant_tarballs, tmp_path):
    """The realistic-size models run on the CPU within the job limits and write valid output sockets."""
    report = run_preflight(docker_images["participant"], challenge, cases[challenge], participant_tarballs[model_name],
                           tmp_path / "out")
    for job in report["jobs"]:
        log = "\n".join(job["stdout_tail"])
        assert f"{model_name}.onnx: ONNX Runtime" in log and "CPUExecutionProvider" in log
        # the weights alone are over 90 MB: the peak shows the model was loaded, not a stub
        assert job["peak_memory_bytes"] > 200e6
