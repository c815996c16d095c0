"""The container contract: grand-challenge paths as defaults, flags and env vars as overrides.

Algorithm images: `/input/inputs.json` present -> one-case GC mode, absent -> batch mode over every case in the
input folder. Evaluators read either a challenge's run file or GC's `/input/predictions.json` layout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InputError

GC_INPUT = "/input"
GC_OUTPUT = "/output"
GC_MODEL = "/opt/ml/model"
GC_GROUND_TRUTH = "/opt/ml/input/data/ground_truth"

# flag -> (environment variables in order of preference, GC default)
PATH_OPTIONS = {
    "input": (("INPUT_DIR", "HOLOSCAN_INPUT_PATH"), GC_INPUT),
    "output": (("OUTPUT_DIR", "HOLOSCAN_OUTPUT_PATH"), GC_OUTPUT),
    "model": (("MODEL_DIR", "HOLOSCAN_MODEL_PATH"), GC_MODEL),
    "ground_truth": (("GROUND_TRUTH_DIR",), GC_GROUND_TRUTH),
}

IMAGE_SUFFIXES = (".nii.gz", ".nii", ".mha", ".mhd", ".nrrd", ".tif", ".tiff", ".jpg", ".jpeg", ".png", ".dcm")


def default_path(name: str) -> Path:
    """The path for `name` from its environment variables, else the grand-challenge default."""
    env_names, default = PATH_OPTIONS[name]
    for env in env_names:
        if os.environ.get(env):
            return Path(os.environ[env])
    return Path(default)


def add_path_arguments(parser: argparse.ArgumentParser, *names: str) -> None:
    """Add `--input`, `--output`, `--model`, `--ground-truth` (as named) with env/GC defaults."""
    for name in names:
        env_names, default = PATH_OPTIONS[name]
        parser.add_argument(
            f"--{name.replace('_', '-')}",
            type=Path,
            default=default_path(name),
            help=f"default: ${env_names[0]} or {default}",
        )


def strip_image_suffix(name: str) -> str:
    """`TST_001.nii.gz` -> `TST_001`; names without a known image suffix are returned unchanged."""
    lower = name.lower()
    for suffix in IMAGE_SUFFIXES:
        if lower.endswith(suffix):
            return name[: -len(suffix)]
    return name


def read_json_file(path: Path):
    """Parse a JSON file, naming it in the error if it is not valid JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None


@dataclass
class SocketValue:
    """One socket value of a GC job: where its data is on disk and, for images, the uploaded file's name."""

    slug: str
    relative_path: str
    super_kind: str
    path: Path
    image_name: str | None = None
    value: object = None

    def image_file(self) -> Path:
        """The single image file inside an image socket's folder."""
        if self.path.is_file():
            return self.path
        files = sorted(p for p in self.path.glob("*") if p.is_file() and not p.name.startswith("."))
        if len(files) != 1:
            raise InputError(f"{self.path}: expected exactly one image file for socket '{self.slug}', found {len(files)}")
        return files[0]


def _socket_value(entry: object, base: Path, where: str) -> SocketValue:
    interface = entry.get("interface") if isinstance(entry, dict) else None
    slug = interface.get("slug") if isinstance(interface, dict) else None
    relative_path = interface.get("relative_path") if isinstance(interface, dict) else None
    if not isinstance(slug, str) or not isinstance(relative_path, str):
        raise InputError(f"{where}: socket value without a string interface.slug and interface.relative_path")
    image = entry.get("image") or {}
    if isinstance(image, dict) and image.get("name") is not None and not isinstance(image["name"], str):
        raise InputError(f"{where}: image.name of socket '{slug}' must be a string")
    return SocketValue(
        slug=slug,
        relative_path=relative_path,
        super_kind=interface.get("super_kind", ""),
        path=base / relative_path,
        image_name=image.get("name") if isinstance(image, dict) else None,
        value=entry.get("value"),
    )


def read_inputs_json(input_dir: Path) -> dict[str, SocketValue] | None:
    """GC one-case mode: the job's socket values by slug, or None when there is no inputs.json (batch mode)."""
    path = input_dir / "inputs.json"
    if not path.is_file():
        return None
    entries = read_json_file(path)
    if not isinstance(entries, list):
        raise InputError(f"{path}: expected a JSON list of socket values")
    return {sv.slug: sv for sv in (_socket_value(e, input_dir, f"{path}[{i}]") for i, e in enumerate(entries))}


@dataclass
class GCJob:
    """One successful algorithm job from /input/predictions.json."""

    pk: str
    inputs: dict[str, SocketValue] = field(default_factory=dict)
    outputs: dict[str, SocketValue] = field(default_factory=dict)

    def case_name(self, slug: str) -> str:
        """The original upload name of the input image in socket `slug` (the case identity)."""
        socket = self.inputs.get(slug)
        if socket is None or not socket.image_name:
            raise InputError(f"predictions.json: job {self.pk} has no image name for input socket '{slug}'")
        return socket.image_name

    def output(self, slug: str) -> SocketValue:
        """The output socket `slug` of this job."""
        if slug not in self.outputs:
            raise InputError(f"predictions.json: job {self.pk} has no output socket '{slug}'")
        return self.outputs[slug]


def read_predictions_json(input_dir: Path) -> list[GCJob] | None:
    """GC evaluation layout: the successful jobs, or None when there is no predictions.json."""
    path = input_dir / "predictions.json"
    if not path.is_file():
        return None
    entries = read_json_file(path)
    if not isinstance(entries, list):
        raise InputError(f"{path}: expected a JSON list of jobs")
    jobs = []
    for index, entry in enumerate(entries):
        where = f"{path}[{index}]"
        if not isinstance(entry, dict) or "pk" not in entry:
            raise InputError(f"{where}: job without pk")
        if entry.get("status", "Succeeded") != "Succeeded":
            continue
        pk = str(entry["pk"])
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", pk):
            raise InputError(f"{where}: job pk {pk!r} is not a plain folder name")
        job_out = input_dir / pk / "output"
        sockets = {}
        for key, base in (("inputs", input_dir), ("outputs", job_out)):
            values = entry.get(key, [])
            if not isinstance(values, list):
                raise InputError(f"{where}: job {pk}: '{key}' must be a list of socket values")
            sockets[key] = {s.slug: s for s in (_socket_value(v, base, f"{where}.{key}[{i}]")
                                                 for i, v in enumerate(values))}
        jobs.append(GCJob(pk=pk, inputs=sockets["inputs"], outputs=sockets["outputs"]))
    return jobs


def jobs_by_case(jobs: list[GCJob], input_slug: str) -> dict[str, GCJob]:
    """Map GC jobs to case names (the input image's upload name); a case twice is an error."""
    cases: dict[str, GCJob] = {}
    for job in jobs:
        name = job.case_name(input_slug)
        if name in cases:
            raise InputError(f"predictions.json: case {name} appears in jobs {cases[name].pk} and {job.pk}")
        cases[name] = job
    return cases
