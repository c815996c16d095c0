"""Build the example's three images offline, from a wheelhouse of the wheels their requirements.txt name:

    python examples/lung-nodule/build.py --wheelhouse wheelhouse [--tag 1]

-> lung-nodule-algorithm:1, lung-nodule-evaluation:1, lung-nodule-evaluation-plain:1. Each folder is copied with
the wheels it needs (hard links) into build/lung-nodule/<name>/ and built there with `--build-arg
PIP_OPTIONS=--no-index`; with network, `docker build -t lung-nodule-algorithm:1 examples/lung-nodule/algorithm`
builds the same from PyPI.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
IMAGES = ("algorithm", "evaluation", "evaluation-plain")


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def stage(folder: Path, wheelhouse: Path, target: Path) -> None:
    """`folder` copied to `target`, with target/wheelhouse holding the wheels of its requirements.txt."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(folder, target)
    wanted = {normalised(line.split("==")[0]) for line in (folder / "requirements.txt").read_text().split()}
    (target / "wheelhouse").mkdir()
    for wheel in wheelhouse.glob("*.whl"):
        if normalised(wheel.name.split("-")[0]) in wanted:
            try:
                os.link(wheel, target / "wheelhouse" / wheel.name)
            except OSError:
                shutil.copy2(wheel, target / "wheelhouse" / wheel.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheelhouse", type=Path, required=True)
    parser.add_argument("--tag", default="1")
    parser.add_argument("--build-folder", type=Path, default=Path("build/lung-nodule"))
    parser.add_argument("--only", choices=IMAGES, action="append", help="build this image only (repeatable)")
    args = parser.parse_args(argv)
    for name in args.only or IMAGES:
        target = args.build_folder / name
        stage(HERE / name, args.wheelhouse, target)
        tag = f"lung-nodule-{name}:{args.tag}"
        subprocess.run(["docker", "build", "--quiet", "--build-arg", "PIP_OPTIONS=--no-index", "--tag", tag,
                        str(target)], check=True, env={**os.environ, "DOCKER_BUILDKIT": "0"}, stdout=subprocess.DEVNULL)
        print(tag)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
