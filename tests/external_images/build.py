"""Build the images of tests/external_images offline, as their own Dockerfiles say, from the project's wheelhouse.

    .venv/bin/python tests/external_images/build.py [NAME ...] [--gpu]

Each image's folder is its build context, as for `docker build FOLDER` (the forge template's do_build.sh); the
wheels come from `wheelhouse/` beside the Dockerfile (bind-mounted in the RUN step that installs them, never in a
layer), so the build copies the folder to build/external-images/<name>/ and hard-links the repository's wheelhouse
(`make wheels`; `make wheels-gpu` for --gpu) into it. The build runs through Docker Compose's builder (BuildKit),
which this project's images use too; a plain `docker build` needs the buildx plugin for `RUN --mount`.
Tags: medchallenge-external/<name>[-gpu]:$MEDCHALLENGE_VERSION (default 0.1.0).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
IMAGES = {
    "forge-tb-caverns": HERE / "forge" / "tb-caverns",
    "forge-object-cxr": HERE / "forge" / "object-cxr",
    "participant": HERE / "participant",
}
GPU_IMAGES = ("participant",)  # the images with an ONNXRUNTIME_VARIANT build argument


def image_tag(name: str, gpu: bool = False) -> str:
    return f"medchallenge-external/{name}{'-gpu' if gpu else ''}:{os.environ.get('MEDCHALLENGE_VERSION', '0.1.0')}"


def _link_tree(source: Path, target: Path, pattern: str) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for wheel in source.glob(pattern):
        try:
            os.link(wheel, target / wheel.name)
        except OSError:  # another file system: copy
            shutil.copy2(wheel, target / wheel.name)


def build(name: str, gpu: bool = False, wheelhouse: Path = REPO / "wheelhouse", source: Path | None = None) -> str:
    """Build image `name` (its GPU variant with `gpu`) from its folder, or from `source` (a folder of another
    image: a generated challenge pack's); returns its tag. Raises CalledProcessError with the build's output when
    the build fails."""
    if gpu and name not in GPU_IMAGES:
        raise ValueError(f"{name} has no GPU variant")
    needed = [wheelhouse / ".complete"] + ([wheelhouse / "gpu" / ".complete"] if gpu else [])
    missing = [str(path.parent) for path in needed if not path.is_file()]
    if missing:
        raise FileNotFoundError(f"no complete wheelhouse at {', '.join(missing)}: run make wheels"
                                f"{' wheels-gpu' if gpu else ''}")
    staging = REPO / "build" / "external-images" / (name + ("-gpu" if gpu else ""))
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source or IMAGES[name], staging)
    _link_tree(wheelhouse, staging / "wheelhouse", "*.whl")
    if gpu:
        _link_tree(wheelhouse / "gpu", staging / "wheelhouse" / "gpu", "*.whl")
    tag = image_tag(name, gpu)
    service = {"image": tag, "platform": "linux/amd64", "build": {"context": "."}}
    if name in GPU_IMAGES:
        service["build"]["args"] = {"ONNXRUNTIME_VARIANT": "gpu" if gpu else "cpu"}
    (staging / "compose.json").write_text(json.dumps({"services": {"image": service}}))
    subprocess.run(["docker", "compose", "--project-name", "medchallenge-external", "--project-directory",
                    str(staging), "-f", str(staging / "compose.json"), "build", "image"],
                   env=dict(os.environ, COMPOSE_BAKE="false"), check=True, capture_output=True, text=True)
    return tag


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"default: all of {', '.join(IMAGES)}")
    parser.add_argument("--gpu", action="store_true", help=f"the GPU variant ({', '.join(GPU_IMAGES)})")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(IMAGES))
    if unknown:
        parser.error(f"unknown image(s) {', '.join(unknown)}; known: {', '.join(IMAGES)}")
    for name in args.names or (GPU_IMAGES if args.gpu else IMAGES):
        try:
            print(build(name, args.gpu))
        except subprocess.CalledProcessError as exc:
            print(exc.stdout[-3000:], exc.stderr[-3000:])
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
