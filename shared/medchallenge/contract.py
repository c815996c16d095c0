"""The container contract: grand-challenge paths as defaults, flags and env vars as overrides.

Algorithm images: `/input/inputs.json` present -> one-case GC mode, absent -> batch mode over every case in the
input folder. Evaluators read either a challenge's run file or GC's `/input/predictions.json` layout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InputError
from .io import user_path
from .limits import load_json

GC_INPUT = "/input"
GC_OUTPUT = "/output"
GC_MODEL = "/opt/ml/model"
GC_GROUND_TRUTH = "/opt/ml/input/data/ground_truth"
# Not grand-challenge's (its evaluator gets no images): where compose.yaml mounts a challenge's test images (its
# algorithm's input/) into the evaluator, for review.html; absent or empty, there is no review.
EVALUATOR_IMAGES = "/opt/ml/input/data/images"
GC_LAYOUT = "grand-challenge predictions.json"  # metrics.json `meta.layout` of an evaluation read from GC's layout

# flag -> (environment variables in order of preference, GC default)
PATH_OPTIONS = {
    "input": (("INPUT_DIR", "HOLOSCAN_INPUT_PATH"), GC_INPUT),
    "output": (("OUTPUT_DIR", "HOLOSCAN_OUTPUT_PATH"), GC_OUTPUT),
    "model": (("MODEL_DIR", "HOLOSCAN_MODEL_PATH"), GC_MODEL),
    "ground_truth": (("GROUND_TRUTH_DIR",), GC_GROUND_TRUTH),
}

# An upload's image suffix: an image or archive format, optionally compressed (`.nii.gz`, `.tar.gz`); any case.
IMAGE_SUFFIX = re.compile(
    r"\.(?:nii|mha|mhd|nrrd|nhdr|tiff?|jpe?g|png|bmp|dcm|svs|ndpi|zip|tar|tgz)(?:\.(?:gz|bz2|xz|zip))?$",
    re.IGNORECASE,
)
DICOM_HINT = ("grand-challenge renames DICOM uploads to '<StudyInstanceUID>-<index>', so upload each case as an image "
              "file named after its ground-truth case")
NAMES_SHOWN = 5


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
            type=user_path,
            default=default_path(name),
            help=f"default: ${env_names[0]} or {default}",
        )


def strip_image_suffix(name: str) -> str:
    """`TST_001.nii.gz` -> `TST_001`, `case.01.MHA` -> `case.01`; names without an image suffix are unchanged."""
    stem = IMAGE_SUFFIX.sub("", name)
    return stem or name


def case_key(name: str) -> str:
    """The name cases are matched by: no folders, no image suffix (`test/08001.jpg` and `08001.png` -> `08001`)."""
    return strip_image_suffix(name.replace("\\", "/").rsplit("/", 1)[-1])


def name_list(names: Sequence[str], shown: int = NAMES_SHOWN) -> str:
    """`a, b, c and 4 more`: the first few names of a list, for messages and notes."""
    text = ", ".join(names[:shown])
    return text + (f" and {len(names) - shown} more" if len(names) > shown else "")


def read_json_file(path: Path):
    """Parse a JSON file, naming it in the error if it is not valid JSON or nested too deeply (limits.load_json)."""
    try:
        return load_json(path.read_text(encoding="utf-8"), path)
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
        if files[0].is_symlink():
            raise InputError(f"{self.path}: the image file of socket '{self.slug}' is a symbolic link; refused")
        return files[0]


def _socket_value(entry: object, base: Path, where: str) -> SocketValue:
    interface = entry.get("interface") if isinstance(entry, dict) else None
    slug = interface.get("slug") if isinstance(interface, dict) else None
    relative_path = interface.get("relative_path") if isinstance(interface, dict) else None
    if not isinstance(slug, str) or not isinstance(relative_path, str):
        raise InputError(f"{where}: socket value without a string interface.slug and interface.relative_path")
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", slug):
        raise InputError(f"{where}: interface.slug is not a socket slug (letters, digits, '-', '_', '.')")
    path = base / relative_path
    parts = relative_path.replace("\\", "/").split("/")
    if relative_path.startswith(("/", "\\")) or ".." in parts or not path.resolve().is_relative_to(base.resolve()):
        raise InputError(f"{where}: interface.relative_path of socket '{slug}' leaves {base}; refused")
    image = entry.get("image") or {}
    if isinstance(image, dict) and image.get("name") is not None and not isinstance(image["name"], str):
        raise InputError(f"{where}: image.name of socket '{slug}' must be a string")
    return SocketValue(
        slug=slug,
        relative_path=relative_path,
        super_kind=interface.get("super_kind", ""),
        path=path,
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
    sockets = {sv.slug: sv for sv in (_socket_value(e, input_dir, f"{path}[{i}]") for i, e in enumerate(entries))}
    for socket in sockets.values():
        if socket.image_name is not None and not is_plain_file_name(socket.image_name):
            raise InputError(f"{path}: image.name of socket '{socket.slug}' is not a plain file name (a path, a "
                             "control character or more than 255 characters); refused")
    return sockets


def is_plain_file_name(name: str) -> bool:
    """Whether `name` is a file name as grand-challenge keeps an upload's (panimg): no folder, not `.` or `..`,
    printable, at most 255 characters."""
    return (0 < len(name) <= 255 and name not in (".", "..") and "/" not in name and "\\" not in name
            and name.isprintable())


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


@dataclass
class CaseMatch:
    """GC jobs matched to ground-truth cases: the job of each case (in ground-truth order), and the cases
    without a successful job."""

    jobs: dict[str, GCJob]
    missing: list[str]

    def missing_notes(self, scored_as: str) -> list[str]:
        """The `meta.notes` line naming the cases without a job and how they were scored (none if all have one)."""
        if not self.missing:
            return []
        return [f"predictions.json: no successful job for {len(self.missing)} of "
                f"{len(self.missing) + len(self.jobs)} ground-truth case(s) ({name_list(self.missing)}): "
                f"{scored_as}; --strict refuses such cases"]


def match_jobs(jobs: list[GCJob], input_slug: str, case_ids: Sequence[str], *, strict: bool = False,
               key: Callable[[str], str] = case_key, ground_truth: str = "ground truth") -> CaseMatch:
    """Match each job to the ground-truth case whose `key` (default: name without folders and image suffix)
    equals the `key` of the job's input image upload name.

    Errors: two cases with one key, a job matching no case (named by pk and upload name), two jobs for one case,
    and with `strict` a case without a job (a failed job on grand-challenge).
    """
    by_key: dict[str, str] = {}
    for case_id in case_ids:
        k = key(case_id)
        if k in by_key and by_key[k] != case_id:
            raise InputError(f"{ground_truth}: cases {by_key[k]!r} and {case_id!r} are both named {k!r} without "
                             "folders and image suffix; grand-challenge jobs are matched by that name")
        by_key[k] = case_id
    matched: dict[str, GCJob] = {}
    for job in jobs:
        name = job.case_name(input_slug)
        case_id = by_key.get(key(name))
        if case_id is None:
            raise InputError(f"predictions.json: job {job.pk}: input image {name!r} ('{input_slug}') matches no "
                             f"ground-truth case (compared as {key(name)!r}); {DICOM_HINT}")
        if case_id in matched:
            other = matched[case_id]
            raise InputError(f"predictions.json: jobs {other.pk} ({other.case_name(input_slug)!r}) and {job.pk} "
                             f"({name!r}) are both case {case_id!r}")
        matched[case_id] = job
    missing = [case_id for case_id in dict.fromkeys(case_ids) if case_id not in matched]
    if strict and missing:
        raise InputError(f"predictions.json: no successful job for {len(missing)} ground-truth case(s) "
                         f"({name_list(missing)}); --strict refuses missing cases")
    return CaseMatch({c: matched[c] for c in dict.fromkeys(case_ids) if c in matched}, missing)
