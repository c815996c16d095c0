"""Images the project did not write (tests/external_images): grand-challenge-forge's algorithm template for two
challenges and a participant's realistic-size models (nnU-Net's default 3-D U-Net, a ResNet-50), built offline and
run by the one job runner (medchallenge.jobs.run_job) on small synthetic cases, on the CPU."""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import docker_problem
from external_images import build, generate_forge, participant_models

from medchallenge.jobs import JobLimits, run_job, upload_case
from medchallenge.jobs.docker_run import DockerImage
from medchallenge.registry import CHALLENGES

NAME_PREFIX = "medchallenge-job-external"
LIMITS = JobLimits(memory_gb=4, time_limit_s=300)


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
def cases(tmp_path_factory) -> dict[str, list[Path]]:
    """Two small synthetic cases per challenge: 64 x 64 x 32 CTs, 256-pixel radiographs."""
    root = tmp_path_factory.mktemp("external_cases")
    python = [sys.executable, "-m", "medchallenge.synth"]
    subprocess.run([*python, "tb-caverns", "--out", str(root / "tb"), "--cases", "2", "--seed", "5",
                    "--shape", "64", "64", "32"], check=True, capture_output=True)
    subprocess.run([*python, "object-cxr-images", "--out", str(root / "cxr"), "--images", "2", "--seed", "3",
                    "--size", "256"], check=True, capture_output=True)
    return {"tb-caverns": sorted((root / "tb" / "input").glob("*.nii.gz")),
            "object-cxr": sorted((root / "cxr" / "input").glob("*.jpg"))}


@pytest.fixture(scope="module")
def participant_tarballs(tmp_path_factory) -> dict[str, Path]:
    """The realistic-size models as model tarballs (seeded random weights, written here, never committed)."""
    out = tmp_path_factory.mktemp("participant_models")
    tarballs = {}
    for name, expected in (("unet3d", 31.19e6), ("resnet50", 23.56e6)):
        tarballs[name], parameters = participant_models.write_model_tarball(name, out)
        assert abs(parameters - expected) < 0.01e6, (name, parameters)
    return tarballs


def run_cases(image: str, challenge: str, cases: list[Path], model: Path | None, work: Path):
    """One job per case with the challenge's interface, as pre-flight runs them."""
    interface = CHALLENGES[challenge].interface
    results = []
    for index, case in enumerate(cases):
        uploaded = upload_case(case, work / "store")
        results.append(run_job(DockerImage(image, name_prefix=NAME_PREFIX), [uploaded.value(1_000_000 + index,
                               interface.inputs[0])], list(interface.outputs), work / f"job{index}",
                               model=model, limits=LIMITS, gpu="off"))
    return results


def assert_succeeded(results, challenge: str) -> None:
    slugs = {s.slug for s in CHALLENGES[challenge].interface.outputs}
    for result in results:
        assert result.status == "succeeded", (result.error, result.stderr_tail[-5:])
        assert {o.socket.slug for o in result.outputs if o.error is None and o.value is not None} == slugs
        assert result.peak_memory_bytes and result.wall_seconds > 0 and result.used_gpu in (False, None)


@pytest.mark.parametrize("challenge", generate_forge.CHALLENGE_NAMES)
def test_forge_image_passes_the_job_runner(challenge, docker_images, cases, tmp_path):
    """The forge image reads its input socket and the model tarball's subfolder as generated, and writes valid
    output sockets: the model tarball is the template's model/ folder packed as its do_save.sh packs it."""
    model = tmp_path / "model.tar.gz"
    with tarfile.open(model, "w:gz") as tar:
        tar.add(generate_forge.OUT / challenge / "model", arcname=".")
    results = run_cases(docker_images[f"forge-{challenge}"], challenge, cases[challenge], model, tmp_path)
    assert_succeeded(results, challenge)
    assert "For instance: some weights for your model." in "\n".join(results[0].stdout_tail)


@pytest.mark.parametrize(("model_name", "challenge"), [("unet3d", "tb-caverns"), ("resnet50", "object-cxr")])
def test_participant_model_on_small_inputs(model_name, challenge, docker_images, cases, participant_tarballs,
                                           tmp_path):
    """The realistic-size models run on the CPU within the job limits and write valid output sockets."""
    results = run_cases(docker_images["participant"], challenge, cases[challenge][:1],
                        participant_tarballs[model_name], tmp_path)
    assert_succeeded(results, challenge)
    log = "\n".join(results[0].stdout_tail)
    assert f"{model_name}.onnx: ONNX Runtime" in log and "CPUExecutionProvider" in log
    # the weights alone are over 90 MB: the peak shows the model was loaded, not a stub
    assert results[0].peak_memory_bytes > 200e6
