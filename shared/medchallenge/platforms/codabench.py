"""`make codabench`: per scoring configuration a Codabench competition bundle, `OUT/<configuration>.zip`.

The bundle (format: Codabench's documentation `Yaml-Structure.md` and `Competition-Bundle-Structure.md`, and its
unpacker `src/apps/competitions/unpackers/v2.py`) holds `competition.yaml` (version 2), a logo, the terms and a
participants' page with the submission format, one phase with one task whose `scoring_program/` runs the project's
evaluator and whose `reference_data/` is the ground truth, the sample submission as a solution, and one leaderboard
with a column for every aggregate, the official ranking metric first (Codabench ranks by the first column). The
leaderboard's `submission_rule` is `Force_Best`: every finished submission is scored and each participant's best one
is on the leaderboard without a click, as the challenges published their results (ImageCLEFmed Caption: "only the
best runs of each team"; RibFrac and object-CXR ranked each team by its best result). Codabench's default (`Add`)
would show nothing until each participant adds a submission by hand.

How Codabench's compute worker scores (`compute_worker/compute_worker.py`): it runs the competition's
`docker_image` with the scoring program at /app/program (the working directory), the reference data at
/app/input/ref, the participant's results at /app/input/res, /app/output for the scores, and `command` of
`scoring_program/metadata.yaml` as the container's command, which the image's entry point (`evaluate.py`) receives as
its arguments; it then reads /app/output/scores.json, a flat {column key: value} object, which the evaluator's
`--scores` writes. The worker creates /app/output as root and does not set a user, so the image it runs is the
configuration's evaluator image with `USER 0:0` (`medchallenge/<configuration>-evaluator-codabench`: two lines
over the evaluator image that `make save` writes, `codabench-image.Dockerfile` in the bundle; `make codabench-images`).

The ground truth and the sample submission are the demo data unless told otherwise, as `make gc-pack`:
`<PREFIX>_GROUND_TRUTH` and `<PREFIX>_PREDICTIONS` (the folders compose.yaml mounts). The columns are the aggregates
of that sample scored against that ground truth by the evaluator (the same code, here), so they are what the bundle's
scoring gives.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import struct
import subprocess
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path

from .. import __version__
from ..errors import InputError, report_errors
from ..grand_challenge.pack import mounted_folder, archive_members, check_ground_truth
from ..io import atomic_output
from ..logs import setup_logging
from ..registry import CONFIGURATIONS, Configuration
from .aicrowd import run_evaluator

log = logging.getLogger("medchallenge.codabench")

BUNDLES = {configuration.name: configuration for configuration in CONFIGURATIONS}
PHASE_START = "2025-01-01 00:00:00"  # an organiser sets the real dates in Codabench's editor
SCORES = "/app/output/scores.json"
# aggregates where a smaller value is better (every ranking metric is higher-is-better)
LOWER_IS_BETTER = frozenset({"average_fp_at_max_recall"})
ZIP_TIME = (1980, 1, 1, 0, 0, 0)
# each participant's best submission on the leaderboard, automatically (see the module's docstring)
SUBMISSION_RULE = "Force_Best"


def image_tag() -> str:
    """The tag of the project's images, as compose.yaml names them."""
    return os.environ.get("MEDCHALLENGE_VERSION") or __version__


def codabench_image(configuration: Configuration) -> str:
    return f"{configuration.service.image}-codabench:{image_tag()}"


def codabench_dockerfile(configuration: Configuration) -> str:
    """The Codabench image: the evaluator image, run as root (the worker's /app/output belongs to root)."""
    return (f"# {configuration.name} evaluator for Codabench's compute worker, which creates /app/output as root and\n"
            "# runs the competition image without a user: the evaluator image with root as its user.\n"
            f"FROM {configuration.service.image}:{image_tag()}\nUSER 0:0\n")


def build_image(configuration: Configuration) -> str:
    """Build the Codabench image of `configuration` over its evaluator image (which must exist); its name."""
    name = codabench_image(configuration)
    result = subprocess.run(["docker", "build", "-q", "-t", name, "-"], input=codabench_dockerfile(configuration),
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise InputError(f"docker build of {name} failed: {result.stderr.strip().splitlines()[-1:]}")
    return name


def scoring_command() -> str:
    """metadata.yaml's command: the evaluator's arguments (the image's entry point is the evaluator)."""
    return (f"--input /app/input/res --ground-truth /app/input/ref --output /app/output --scores {SCORES} "
            "--no-progress")


def _yaml(value, indent: int = 0) -> str:
    """`value` (dicts, lists, strings, numbers, booleans) as block YAML; strings double-quoted (JSON escapes)."""
    pad = " " * indent
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}{key}:\n{_yaml(item, indent + 2)}")
            else:
                lines.append(f"{pad}{key}: {_scalar(item)}")
        return "\n".join(lines)
    lines = []
    for item in value:
        if isinstance(item, (dict, list)) and item:
            text = _yaml(item, indent + 2)
            lines.append(f"{pad}- {text[indent + 2:]}")
        else:
            lines.append(f"{pad}- {_scalar(item)}")
    return "\n".join(lines)


def _scalar(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (dict, list)):
        return "{}" if isinstance(value, dict) else "[]"
    return json.dumps(str(value), ensure_ascii=False)


def logo_png(size: int = 64) -> bytes:
    """A plain square PNG (Codabench requires a logo)."""
    row = b"\x00" + bytes((40, 90, 160)) * size
    raw = zlib.compress(row * size, 9)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def columns(configuration: Configuration, aggregates: dict[str, float]) -> list[dict]:
    """A leaderboard column per aggregate: the official ranking metrics first (in their order), then the rest."""
    from importlib import import_module

    ranking = import_module(configuration.challenge.evaluator_module).EVALUATOR.ranking
    keys = [key for key in ranking if key in aggregates] + [key for key in aggregates if key not in ranking]
    return [{"title": key, "key": key, "index": index, "sorting": "asc" if key in LOWER_IS_BETTER else "desc",
             "precision": 4} for index, key in enumerate(keys)]


def participants_page(configuration: Configuration) -> str:
    formats = configuration.challenge.submissions
    files = ", ".join(f"`{name}`" for f in formats for name in f.files)
    parts = [f"# {configuration.title}: how to submit\n",
             f"Submit one zip file holding your results at its top level (no folder inside): {files}.\n"]
    for submission in formats:
        title = f"## {submission.task}\n\n" if submission.task else ""
        parts.append(f"{title}{submission.contents}.\n")
    if len(formats) > 1:
        parts.append("Either or both tasks may be submitted; the scores of what the zip holds are shown.\n")
    parts.append(f"Scoring runs the medchallenge evaluator `{configuration.name}` ({configuration.service.image}, "
                 "the same code as on grand-challenge and AIcrowd): every aggregate of its metrics.json is a "
                 "column, the official ranking metric first. A submission the evaluator refuses fails with one "
                 "`error:` line in the scoring output naming the file and what is wrong.\n")
    return "\n".join(parts)


def competition(configuration: Configuration, aggregates: dict[str, float], has_solution: bool) -> dict:
    """competition.yaml as a dict."""
    task = {"index": 0, "name": configuration.title, "description": f"scored by the {configuration.name} evaluator",
            "scoring_program": "scoring_program/", "reference_data": "reference_data/"}
    return {
        "version": 2,
        "title": configuration.title,
        "description": f"{configuration.title}, scored by the medchallenge evaluator ({configuration.name}).",
        "image": "logo.png",
        "terms": "terms.md",
        "docker_image": codabench_image(configuration),
        "pages": [{"title": "Submission", "file": "submission.md"}, {"title": "Terms", "file": "terms.md"}],
        "phases": [{"index": 0, "name": "Test", "description": "results submissions", "start": PHASE_START,
                    "tasks": [0]}],
        "tasks": [task],
        **({"solutions": [{"index": 0, "path": "solution/", "tasks": [0]}]} if has_solution else {}),
        "leaderboards": [{"title": "Results", "key": "main", "submission_rule": SUBMISSION_RULE,
                          "columns": columns(configuration, aggregates)}],
    }


def _add(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, ZIP_TIME)
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)


def _add_folder(archive: zipfile.ZipFile, folder: Path, prefix: str) -> None:
    for path in archive_members(folder):
        if path.is_file():
            _add(archive, f"{prefix}/{path.relative_to(folder).as_posix()}", path.read_bytes())


def bundle(configuration: Configuration, ground_truth: Path, sample: Path, out: Path) -> Path:
    """Write OUT/<configuration>.zip: the bundle scoring `configuration` against `ground_truth`, with `sample` (a
    results folder) as its solution and the source of its columns."""
    check_ground_truth(configuration, ground_truth)
    with tempfile.TemporaryDirectory(prefix="medchallenge-codabench-") as work:
        aggregates = run_evaluator(configuration, sample, ground_truth, Path(work) / "output")["aggregates"]
    definition = competition(configuration, aggregates, has_solution=True)
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w") as archive:
        _add(archive, "competition.yaml", (f"# Written by `make codabench` (medchallenge {__version__}).\n"
                                           + _yaml(definition) + "\n").encode())
        _add(archive, "logo.png", logo_png())
        _add(archive, "submission.md", participants_page(configuration).encode())
        _add(archive, "terms.md", b"# Terms\n\nSet by the organisers. The scoring program is the medchallenge "
                                  b"evaluator (Apache-2.0).\n")
        _add(archive, "scoring_program/metadata.yaml",
             (f"# The arguments of the evaluator, the entry point of {codabench_image(configuration)}; it writes "
              f"metrics.json and\n# scores.json to /app/output.\n"
              + _yaml({"command": scoring_command()}) + "\n").encode())
        _add(archive, "codabench-image.Dockerfile", codabench_dockerfile(configuration).encode())
        _add_folder(archive, ground_truth, "reference_data")
        _add_folder(archive, sample, "solution")
    target = out / f"{configuration.name}.zip"
    with atomic_output(target, "wb") as handle:
        handle.write(raw.getvalue())
    log.info("%s: %s (%d columns)", configuration.name, target, len(definition["leaderboards"][0]["columns"]))
    return target


def bundle_all(out: Path) -> list[Path]:
    """Every configuration, from the folders compose.yaml mounts (the demo data unless told otherwise)."""
    return [bundle(c, mounted_folder(c.service.mount("ground_truth")), mounted_folder(c.service.mount("predictions")), out)
            for c in CONFIGURATIONS]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m medchallenge.platforms.codabench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", nargs="?", choices=sorted(BUNDLES), help="the configuration (or --all)")
    parser.add_argument("--all", action="store_true", help="every configuration, from the folders compose.yaml "
                                                           "mounts")
    parser.add_argument("--ground-truth", type=Path, help="the reference data (the evaluator's ground truth)")
    parser.add_argument("--sample", type=Path, help="a results folder: the bundle's solution")
    parser.add_argument("--out", type=Path, default=Path("dist/codabench"), help="default dist/codabench")
    parser.add_argument("--build-images", action="store_true",
                        help="build every configuration's Codabench image from its evaluator image (docker)")
    return parser


@report_errors
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.build_images:
        for configuration in CONFIGURATIONS:
            print(build_image(configuration))
        return 0
    if args.all == (args.config is not None) or (args.config and (args.ground_truth is None or args.sample is None)):
        parser.error("give a configuration with --ground-truth and --sample, or --all")
    setup_logging()
    if args.all:
        bundle_all(args.out)
    else:
        bundle(BUNDLES[args.config], args.ground_truth, args.sample, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
