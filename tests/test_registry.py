"""The challenge registry against what it names: compose.yaml (written by hand), modules, entry scripts, Dockerfiles."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

from medchallenge import __version__, dockerfiles
from medchallenge.contract import EVALUATOR_IMAGES, GC_GROUND_TRUTH
from medchallenge.registry import CHALLENGES, CONFIGURATIONS, SERVICES, Service


def compose_services(text: str) -> dict[str, list[str]]:
    """compose.yaml's services: name -> the stripped lines of its block (the file keeps one style, two-space
    indents, so its blocks can be read without a YAML parser)."""
    services: dict[str, list[str]] = {}
    block: list[str] | None = None
    in_services = False
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):
            in_services, block = line == "services:", None
        elif in_services and (name := re.fullmatch(r" {2}([\w-]+):", line)):
            block = services.setdefault(name[1], [])
        elif block is not None:
            block.append(line.strip())
    return services


@pytest.fixture(scope="module")
def compose(repo: Path) -> dict[str, list[str]]:
    return compose_services((repo / "compose.yaml").read_text())


def test_compose_has_exactly_the_registry_services(compose):
    assert sorted(compose) == sorted(service.name for service in SERVICES)


def test_every_algorithm_service_has_its_gpu_variant(repo):
    """compose.gpu.yaml overrides each algorithm service: the -gpu image, onnxruntime-gpu, CUDA strictly, one GPU."""
    gpu = compose_services((repo / "compose.gpu.yaml").read_text())
    algorithms = [service for service in SERVICES if service.name.endswith("-algorithm")]
    assert algorithms and sorted(gpu) == sorted(service.name for service in algorithms)
    for service in algorithms:
        assert gpu[service.name][0] == f"image: {service.image}-gpu:${{MEDCHALLENGE_VERSION:-{__version__}}}"
        assert {"args: {ONNXRUNTIME_VARIANT: gpu}", "MEDCHALLENGE_DEVICE: cuda",
                "devices: [{driver: nvidia, count: 1, capabilities: [gpu]}]"} <= set(gpu[service.name])


@pytest.mark.parametrize("service", SERVICES, ids=[s.name for s in SERVICES])
def test_compose_service_matches_the_registry(compose, service: Service):
    block = compose[service.name]
    text = "\n".join(block)
    assert f"image: {service.image}:${{MEDCHALLENGE_VERSION:-{__version__}}}" in block
    assert re.findall(r"dockerfile: ([^,}\s]+)", text) == [service.dockerfile]
    args = re.findall(r"args: \{(.*)\}", text)
    pairs = [pair.split(":", 1) for arg in args for pair in arg.split(",")]
    assert {key.strip(): value.strip().strip('"') for key, value in pairs} == dict(service.build_args)
    assert [line[2:] for line in block if line.startswith("- ${")] == [mount.volume for mount in service.mounts]
    assert re.findall(r"^([\w-]+): \{condition: service_completed_successfully\}$", text, re.M) == (
        [service.depends_on] if service.depends_on else [])
    assert "<<: *hardening" in block


@pytest.mark.parametrize("configuration", CONFIGURATIONS, ids=[c.name for c in CONFIGURATIONS])
def test_evaluator_gets_its_algorithms_input_read_only_as_the_review_images(configuration):
    """The folder the algorithm reads (one variable for both) is the evaluator's EVALUATOR_IMAGES, read-only, where
    review.html finds the case images; the algorithm writes no file there."""
    images, algorithm = configuration.service.mount("images"), configuration.algorithm_service
    assert images.target == f"{EVALUATOR_IMAGES}:ro" and EVALUATOR_IMAGES != GC_GROUND_TRUTH
    assert (images.variable, images.default) == (algorithm.mount("input").variable, algorithm.mount("input").default)
    assert algorithm.mount("input").target == "/input:ro"


@pytest.mark.parametrize("name", CHALLENGES)
def test_every_name_the_registry_derives_exists(repo, name):
    challenge = CHALLENGES[name]
    evaluator = importlib.import_module(challenge.evaluator_module)
    assert evaluator.EVALUATOR.challenge == name
    assert importlib.util.find_spec(challenge.generator_module) is not None
    entry = repo / "evaluators" / challenge.module / "evaluate.py"
    assert f"from {challenge.evaluator_module} import main" in entry.read_text()
    assert len(entry.read_text().splitlines()) == 6
    assert (repo / "evaluators" / challenge.module / "Dockerfile").is_file()
    if challenge.algorithm:
        assert importlib.util.find_spec(challenge.algorithm.module) is not None
        assert (repo / challenge.algorithm_service.dockerfile).is_file()


def test_spellings_are_derived_from_the_one_name():
    names = {c.name: (c.service.name, c.variable_prefix, c.demo_folder) for c in CONFIGURATIONS}
    assert names == {
        "tb-caverns": ("tb-caverns-evaluator", "TB_CAVERNS", "tb_caverns"),
        "ribfrac": ("ribfrac-evaluator", "RIBFRAC", "ribfrac"),
        "ribfrac-legacy": ("ribfrac-legacy-evaluator", "RIBFRAC_LEGACY", "ribfrac"),
        "object-cxr": ("object-cxr-evaluator", "OBJECT_CXR", "object_cxr"),
        "imageclef-caption-2022": ("caption-2022-evaluator", "CAPTION_2022", "caption_2022"),
        "imageclef-caption-2021": ("caption-2021-evaluator", "CAPTION_2021", "caption_2021"),
    }


def test_every_dockerfile_is_written_from_the_registry(repo, capsys):
    assert dockerfiles.main(["--root", str(repo), "--check"]) == 0, capsys.readouterr().out
    assert sorted(dockerfiles.dockerfiles()) == sorted(
        str(p.relative_to(repo)) for p in [*repo.glob("algorithms/*/Dockerfile"), *repo.glob("evaluators/*/Dockerfile"),
                                           repo / "gateway" / "Dockerfile"])


def test_a_hand_edited_dockerfile_is_named(tmp_path, capsys):
    for relative, text in dockerfiles.dockerfiles().items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    edited = tmp_path / "evaluators" / "ribfrac" / "Dockerfile"
    edited.write_text(edited.read_text().replace("USER 1000:1000", "USER root"))
    assert dockerfiles.main(["--root", str(tmp_path), "--check"]) == 1
    assert capsys.readouterr().out.strip() == "differs: evaluators/ribfrac/Dockerfile"


def test_algorithm_services_one_per_edition_where_the_editions_differ():
    services = {c.name: c.algorithm_service for c in CONFIGURATIONS if c.algorithm_service}
    assert {name: (s.name, s.image, dict(s.build_args).get("CAPTION_EDITION")) for name, s in services.items()} == {
        "tb-caverns": ("tb-caverns-algorithm", "medchallenge/tb-caverns-algorithm", None),
        # RibFrac's editions score the same predictions: one algorithm service for both
        "ribfrac": ("ribfrac-algorithm", "medchallenge/ribfrac-algorithm", None),
        "ribfrac-legacy": ("ribfrac-algorithm", "medchallenge/ribfrac-algorithm", None),
        "object-cxr": ("object-cxr-algorithm", "medchallenge/object-cxr-algorithm", None),
        "imageclef-caption-2022": ("caption-2022-algorithm", "medchallenge/imageclef-caption-2022-algorithm", "2022"),
        "imageclef-caption-2021": ("caption-2021-algorithm", "medchallenge/imageclef-caption-2021-algorithm", "2021"),
    }
    for configuration in CONFIGURATIONS:
        algorithm = configuration.algorithm_service
        assert configuration.service.depends_on == (algorithm.name if algorithm else None)
    assert CHALLENGES["imageclef-caption"].input_generator == "imageclef-caption-images"
    assert CHALLENGES["tb-caverns"].input_generator == "tb-caverns"
    assert CHALLENGES["ribfrac"].input_generator == "ribfrac-ct"
