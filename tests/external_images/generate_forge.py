"""Regenerate the grand-challenge-forge algorithm templates of tests/external_images/forge/ (images the project did
not write, for the pre-flight and gateway tests).

    .venv/bin/python tests/external_images/generate_forge.py [--out tests/external_images/forge]

Per challenge: an algorithm-template context made from the challenge's sockets (medchallenge.sockets, as
grand-challenge serialises them, each output with an example value in the challenge's format: an empty
prediction), rendered by the pinned `grand-challenge-forge algorithm` (requirements/dev.txt), then patched to build
offline; every patch must apply exactly once, so a forge release that changes its template stops here:

- the base image `pytorch/pytorch` becomes the project's offline base `python:3.11-slim`, where a venv provides
  the `python` and pip the template calls (that base is Debian's python3 without them);
- pip installs `requirements.txt` (SimpleITK, numpy, as generated) from the wheelhouse bind-mounted at build time
  (`wheelhouse/` beside the Dockerfile, see build.py) instead of from PyPI;
- torch is dropped: the template imports it only to print whether CUDA is visible and to run a 10 -> 1 linear layer
  on random numbers, and PyPI's torch is the CUDA build (about 0.9 GB, plus about 2.5 GB of nvidia-* wheels), too
  big for an offline wheelhouse and CI; pre-flight reports GPU use itself.

The reading of inputs.json and of the input socket and the writing of the output sockets stay as generated. The
forge's `test/` folder (a stub input with a random file name) is not kept: pre-flight uses the project's cases.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "shared"))

from medchallenge.registry import CHALLENGES  # noqa: E402

FORGE_VERSION = "0.7.5"
OUT = Path(__file__).resolve().parent / "forge"

# Output socket -> the example value the template writes: an empty prediction in the challenge's format.
EXAMPLE_VALUES: dict[str, object] = {
    "tb-cavern-boxes": {"version": 1, "boxes": []},
    "foreign-object-likelihood": 0.5,
    "foreign-objects": {"name": "Foreign objects", "type": "Multiple points", "points": [],
                        "version": {"major": 1, "minor": 0}},
}
CHALLENGE_NAMES = ("tb-caverns", "object-cxr")

TORCH_BLOCK = '''    # Process the inputs: any way you'd like, here we show-case torch
    _show_torch_cuda_info()

    # Example how to set torch to use the GPU (if available)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(f"Using device: {device}")
    model = torch.nn.Linear(10, 1).to(device)
    input = torch.randn(1, 10).to(device)
    output = model(input)

'''
TORCH_INFO = '''def _show_torch_cuda_info():
    print("=+=" * 10)
    print("Collecting Torch CUDA information")
    print(f"Torch CUDA is available: {(available := torch.cuda.is_available())}")
    if available:
        print(f"\\tnumber of devices: {torch.cuda.device_count()}")
        print(f"\\tcurrent device: { (current_device := torch.cuda.current_device())}")
        print(f"\\tproperties: {torch.cuda.get_device_properties(current_device)}")
    print("=+=" * 10)


'''
# The project's offline python:3.11-slim (.ci/provision-docker.sh: Debian 12's python3 and python3-venv) has no
# `python` command and no pip; a venv that also sees the user site-packages stands in for the official image's Python.
OFFLINE_BASE = """# medchallenge: the offline base python:3.11-slim instead of pytorch/pytorch (torch dropped, see
# tests/external_images/generate_forge.py); packages from the wheelhouse mounted at build time. That base is
# Debian's python3 without pip or a `python` command: a venv that sees the user site-packages stands in.
RUN python3 -m venv --system-site-packages /opt/python
ENV PATH=/opt/python/bin:$PATH
"""
PATCHES: dict[str, list[tuple[str, str]]] = {
    "Dockerfile": [
        ("FROM --platform=linux/amd64 pytorch/pytorch AS example-algorithm-amd64\n"
         "# Use a 'large' base container to show-case how to load pytorch and use the GPU (when enabled)\n",
         "FROM --platform=linux/amd64 python:3.11-slim AS example-algorithm-amd64\n"
         + OFFLINE_BASE),
        ("RUN python -m pip install \\\n",
         "RUN --mount=type=bind,source=wheelhouse,target=/wheels python -m pip install \\\n"
         "    --no-index --find-links /wheels \\\n"),
    ],
    "inference.py": [
        ("import torch\n", ""),
        (TORCH_BLOCK, ""),
        (TORCH_INFO, ""),
    ],
}
DROPPED = ("test",)
# the challenge pack's example evaluation method: the same base and wheelhouse changes (it installs as its user)
EVALUATION_PATCHES: dict[str, list[tuple[str, str]]] = {
    "Dockerfile": [
        ("FROM --platform=linux/amd64 docker.io/library/python:3.11-slim AS example-evaluation-amd64\n",
         "FROM --platform=linux/amd64 docker.io/library/python:3.11-slim AS example-evaluation-amd64\n"
         + OFFLINE_BASE.replace(" instead of pytorch/pytorch (torch dropped, see\n# tests/external_images/"
                                "generate_forge.py)", " (see\n# tests/external_images/generate_forge.py)")),
        ("RUN python -m pip install \\\n",
         "RUN --mount=type=bind,source=wheelhouse,target=/wheels python -m pip install \\\n"
         "    --no-index --find-links /wheels \\\n"),
    ],
}


def forge_context(challenge_name: str) -> dict:
    """The forge's algorithm-template context for one challenge's interface."""
    interface = CHALLENGES[challenge_name].interface

    def socket(s, output: bool) -> dict:
        value = s.serialize()
        if output:
            value["example_value"] = EXAMPLE_VALUES[s.slug]
        return value

    return {"algorithm": {
        "title": f"{challenge_name} example algorithm", "slug": challenge_name,
        "url": f"https://grand-challenge.org/algorithms/{challenge_name}/",
        "algorithm_interfaces": [{"inputs": [socket(s, False) for s in interface.inputs],
                                  "outputs": [socket(s, True) for s in interface.outputs]}],
    }}


def patch(path: Path, replacements: list[tuple[str, str]]) -> None:
    """Apply each (old, new) replacement to `path`; each `old` must occur exactly once."""
    text = path.read_text()
    for old, new in replacements:
        if text.count(old) != 1:
            raise SystemExit(f"{path}: the forge template changed ({text.count(old)} matches of {old[:60]!r}); "
                             f"update {Path(__file__).name} for grand-challenge-forge != {FORGE_VERSION}")
        text = text.replace(old, new)
    path.write_text(text)


def generate(challenge_name: str, out: Path) -> Path:
    """Render and patch the template of one challenge into `out/<challenge>`; returns that folder."""
    forge = shutil.which("grand-challenge-forge", path=str(Path(sys.executable).parent))
    if forge is None:
        raise SystemExit(f"grand-challenge-forge=={FORGE_VERSION} is not installed beside {sys.executable} "
                         "(requirements/dev.txt; make venv)")
    with tempfile.TemporaryDirectory() as scratch:
        context = Path(scratch) / "context.json"
        context.write_text(json.dumps(forge_context(challenge_name), indent=2))
        subprocess.run([forge, "algorithm", "--output", f"{scratch}/out", str(context)], check=True,
                       stdout=subprocess.DEVNULL)
        rendered = Path(scratch) / "out" / f"{challenge_name}-template"
        for name in DROPPED:
            shutil.rmtree(rendered / name)
        for name, replacements in PATCHES.items():
            patch(rendered / name, replacements)
        target = out / challenge_name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(rendered, target)
    return target


def generate_pack(pack_context: Path, out: Path) -> dict[str, Path]:
    """`grand-challenge-forge pack` of a pack context with one phase, its example algorithm and example evaluation
    method patched to build offline as above (each patch applied exactly once) into `out`; returns their folders
    and the pack's example model and ground truth folders: {"algorithm", "evaluation", "model", "ground_truth"}."""
    forge = shutil.which("grand-challenge-forge", path=str(Path(sys.executable).parent))
    if forge is None:
        raise SystemExit(f"grand-challenge-forge=={FORGE_VERSION} is not installed beside {sys.executable}")
    context = json.loads(pack_context.read_text())
    (phase,) = context["challenge"]["phases"]
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([forge, "pack", "--output", str(out / "pack"), str(pack_context)], check=True,
                   stdout=subprocess.DEVNULL)
    folder = out / "pack" / f"{context['challenge']['slug']}-challenge-pack" / phase["slug"]
    algorithm, evaluation = folder / "example-algorithm", folder / "example-evaluation-method"
    for name, replacements in PATCHES.items():
        patch(algorithm / name, replacements)
    for name, replacements in EVALUATION_PATCHES.items():
        patch(evaluation / name, replacements)
    return {"algorithm": algorithm, "evaluation": evaluation, "model": algorithm / "model",
            "ground_truth": evaluation / "ground_truth"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    for name in CHALLENGE_NAMES:
        print(generate(name, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
