"""The Dockerfiles of every image, written from one template and the challenge registry.

    python -m medchallenge.dockerfiles          # rewrite algorithms/*/, evaluators/*/ and gateway/Dockerfile
    python -m medchallenge.dockerfiles --check  # exit 1 naming each Dockerfile that differs (tests/test_registry.py)

Each container folder keeps a plain Dockerfile of its own (as grand-challenge-forge's examples do); they differ only
in labels, extras, entry script, the model of an algorithm and the build arguments of a configuration image, so
none is edited by hand. Every image: `python:3.11-slim` (linux/amd64), a venv in /opt/venv filled offline from the
wheelhouse bind mount (no wheel enters a layer), user uid 1000, code in /opt/app, an exec-form entrypoint that needs
no arguments. Build arguments that bake a scoring configuration in are declared after the install, so that the
configurations of one evaluator share its layers.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from . import __version__
from .registry import CHALLENGES, Challenge

HEADER = """\
{title}
# Written by `python -m medchallenge.dockerfiles` from medchallenge.registry: do not edit by hand.
# Build context: the repository root; wheels from ./wheelhouse (make wheels), bind-mounted so that they never enter
# an image layer.
FROM --platform=linux/amd64 python:3.11-slim
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PATH=/opt/venv/bin:$PATH \\
    MPLCONFIGDIR=/tmp/matplotlib XDG_CACHE_HOME=/tmp/cache
"""
MOUNTS = """\
RUN --mount=type=bind,source=wheelhouse,target=/wheels \\
    --mount=type=bind,source=requirements,target=/src/requirements \\
    --mount=type=bind,source=shared,target=/src/shared,rw \\
    python3 -m venv /opt/venv \\
"""
PIP = "pip install --no-cache-dir --no-index --find-links /wheels -c /src/requirements/runtime.txt"
USER = "useradd --uid 1000 --create-home --no-log-init user"
GPU_VARIANT = """\
# ONNXRUNTIME_VARIANT=gpu (make images GPU=1) installs onnxruntime-gpu with the CUDA 12 libraries of
# requirements/gpu.txt instead of the CPU build; that image runs on the CPU too where no GPU is visible.
ARG ONNXRUNTIME_VARIANT=cpu
"""
FOOTER = """\
LABEL org.opencontainers.image.title="{image_title}" \\
      org.opencontainers.image.description="{description}" \\
      org.opencontainers.image.version="{version}" \\
      org.opencontainers.image.source="https://github.com/medchallenge/medchallenge" \\
      org.opencontainers.image.licenses="Apache-2.0"
USER 1000:1000
ENTRYPOINT ["python3", "/opt/app/{script}"]
"""


def _comment(text: str) -> str:
    return textwrap.fill(text, 118, initial_indent="# ", subsequent_indent="# ")


def _package(extras: tuple[str, ...]) -> str:
    return f'"/src/shared[{",".join(extras)}]"' if extras else "/src/shared"


def _baked(baked: dict[str, str], default_title: str) -> str:
    """Build arguments of a configuration image, declared after the install and baked in as its environment."""
    if not baked:
        return ""
    return ("".join(f"ARG {name}={value}\n" for name, value in baked.items())
            + f"ARG IMAGE_TITLE={default_title}\n"
            + "".join(f"ENV {name}=${{{name}}}\n" for name in baked))


def algorithm_dockerfile(challenge: Challenge) -> str:
    """The algorithm image: the challenge's extras, its model baked under /opt/app/model, a GPU variant; where its
    editions differ (`Challenge.algorithm_editions`) one image per edition, the option baked in as for evaluators."""
    algorithm = challenge.algorithm
    cpu_extras = _package(algorithm.extras)
    gpu_extras = _package(tuple(e for e in algorithm.extras if e != "onnx")).strip('"')
    folder = f"algorithms/{challenge.module}"
    baked = dict(challenge.default.edition.build_args) if challenge.algorithm_editions else {}
    about = (f"{challenge.title} algorithm; the model is baked under /opt/app/model, a model file in /opt/ml/model "
             "overrides it." + (f" One image per edition ({', '.join(baked)} baked in)." if baked else ""))
    return (HEADER.format(title=_comment(about))
            + GPU_VARIANT + MOUNTS
            + ' && if [ "$ONNXRUNTIME_VARIANT" = gpu ]; \\\n'
            + f'    then packages="--find-links /wheels/gpu -c /src/requirements/gpu.txt {gpu_extras} '
              f'onnxruntime-gpu[cuda,cudnn]"; \\\n'
            + f'    else packages="{cpu_extras.strip(chr(34))}"; fi \\\n'
            + f" && {PIP} $packages \\\n && {USER}\n"
            + f"WORKDIR /opt/app\nCOPY {folder}/inference.py /opt/app/\nCOPY {folder}/model/ /opt/app/model/\n"
            + _baked(baked, f"medchallenge-{challenge.default.name}-algorithm")
            + FOOTER.format(image_title="${IMAGE_TITLE}" if baked else f"medchallenge-{challenge.name}-algorithm",
                            description=algorithm.description, version=__version__, script="inference.py"))


def evaluator_dockerfile(challenge: Challenge) -> str:
    """The evaluator image; a challenge with several configurations gets their build arguments, baked as ENV."""
    baked = dict(challenge.default.edition.build_args)
    title = "${IMAGE_TITLE}" if baked else f"medchallenge-{challenge.name}-evaluator"
    about = (f"{challenge.title} evaluator, one image per scoring configuration ({', '.join(baked)} baked in, so "
             "that it scores so with no arguments and no environment, as on grand-challenge)." if baked
             else f"{challenge.title} evaluator.")
    return (HEADER.format(title=_comment(about)) + MOUNTS
            + f" && {PIP} {_package(challenge.evaluator_extras)} \\\n && {USER}\n"
            + f"WORKDIR /opt/app\nCOPY evaluators/{challenge.module}/evaluate.py /opt/app/\n"
            + _baked(baked, f"medchallenge-{challenge.default.name}-evaluator")
            + FOOTER.format(image_title=title, description=challenge.evaluator_description, version=__version__,
                            script="evaluate.py"))


GATEWAY_DESCRIPTION = ("DICOM gateway between a hospital PACS and the algorithms (pynetdicom Storage SCP, on-disk "
                       "queue)")


JOB_RUNNER_DESCRIPTION = ("The hospital gateway's job runner: runs the routes' algorithm images as grand-challenge "
                          "does (holds the Docker socket, no network)")
DOCKER_CLIENT = "wheelhouse/debs/docker.io.deb"
JOB_RUNNER = f"""\
{_comment("Stage job-runner (compose.hospital.yaml's job-runner service, `--job-runner`): the gateway's image and "
          "the Docker client, /usr/bin/docker of Debian bookworm's docker.io package (make wheels: "
          f"{DOCKER_CLIENT}); nothing else of that package enters the image.")}
FROM gateway AS job-runner
USER root
RUN --mount=type=bind,source=wheelhouse/debs,target=/debs \\
    dpkg-deb --fsys-tarfile /debs/docker.io.deb | tar -xO ./usr/bin/docker > /usr/local/bin/docker \\
 && chmod 755 /usr/local/bin/docker && docker --version
LABEL org.opencontainers.image.title="medchallenge-job-runner" \\
      org.opencontainers.image.description="{JOB_RUNNER_DESCRIPTION}"
USER 1000:1000
"""

SLURM_GATEWAY_DESCRIPTION = ("The hospital gateway as a Slurm submit host: Slurm's client commands for routes with "
                             "backend slurm (the site's slurm.conf and munge socket mounted read-only)")
SLURM_CLIENT = "wheelhouse/debs/slurm"
GATEWAY_SLURM = f"""\
{_comment("Stage gateway-slurm (compose.hospital-slurm.yaml: a gateway whose routes run on a Slurm cluster): the "
          "gateway's image and Slurm's client commands, Debian bookworm's slurm-client with what it needs beyond "
          f"the base image (make wheels: {SLURM_CLIENT}/, its major version the cluster's); the site's slurm.conf "
          "and munge socket are mounted read-only at run time, so munge's own key is not kept.")}
FROM gateway AS gateway-slurm
USER root
RUN --mount=type=bind,source={SLURM_CLIENT},target=/debs \\
    DEBIAN_FRONTEND=noninteractive dpkg -i /debs/*.deb >/dev/null && rm -f /etc/munge/munge.key \\
 && command -v sbatch squeue scontrol && dpkg-query -W slurm-client
LABEL org.opencontainers.image.title="medchallenge-gateway-slurm" \\
      org.opencontainers.image.description="{SLURM_GATEWAY_DESCRIPTION}"
USER 1000:1000
"""


def gateway_dockerfile() -> str:
    """The hospital gateway's image (compose.hospital.yaml): the package with its DICOM network extras; its stage
    job-runner adds the Docker client for the job-runner service, its stage gateway-slurm Slurm's client commands."""
    header = HEADER.format(title=_comment("The hospital DICOM gateway (medchallenge gateway; stage gateway), its "
                                          "job runner (stage job-runner) and the gateway as a Slurm submit host "
                                          "(stage gateway-slurm); configuration in /etc/medchallenge/gateway.toml."))
    return (header.replace("python:3.11-slim\n", "python:3.11-slim AS gateway\n", 1)
            + MOUNTS + f" && {PIP} {_package(('dicom', 'gateway'))} \\\n && {USER}\n"
            + "WORKDIR /opt/app\nCOPY gateway/gateway.py /opt/app/\n"
            + FOOTER.format(image_title="medchallenge-gateway", description=GATEWAY_DESCRIPTION,
                            version=__version__, script="gateway.py")
            + "\n" + JOB_RUNNER + "\n" + GATEWAY_SLURM)


def dockerfiles() -> dict[str, str]:
    """Every Dockerfile of the repository, by path relative to its root."""
    files = {"gateway/Dockerfile": gateway_dockerfile()}
    for challenge in CHALLENGES.values():
        files[f"evaluators/{challenge.module}/Dockerfile"] = evaluator_dockerfile(challenge)
        if challenge.algorithm:
            files[f"algorithms/{challenge.module}/Dockerfile"] = algorithm_dockerfile(challenge)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m medchallenge.dockerfiles", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=Path("."), help="the repository root (default: here)")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if a Dockerfile differs")
    args = parser.parse_args(argv)
    differing = []
    for relative, text in dockerfiles().items():
        path = args.root / relative
        if path.is_file() and path.read_text() == text:
            continue
        differing.append(relative)
        if not args.check:
            path.write_text(text)
    for relative in differing:
        print(f"{'differs' if args.check else 'written'}: {relative}")
    return 1 if args.check and differing else 0


if __name__ == "__main__":
    sys.exit(main())
