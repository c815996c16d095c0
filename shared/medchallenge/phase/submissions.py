"""The phase's submissions file: one `[[submission]]` per team, its algorithm image and optionally its model.

    [[submission]]
    team = "alpha"
    image = "alpha-algorithm.tar.gz"   # a `docker save` archive (.tar, .tar.gz, .tgz, .tar.xz), or a tag the engine has
    model = "alpha-model.tar.gz"       # optional: the algorithm's model tarball, for /opt/ml/model
    memory_gb = 16                     # optional: the algorithm's memory (grand-challenge: per algorithm)
    gpu = true                         # optional: the algorithm asks for a GPU

It carries the teams' data only: the Slurm backend's options are the site's (`phase run --slurm-config`, the
command line: phase.slurm_options); a [slurm] table is refused, saying where its options went.
Everything in it comes from outside: a team name becomes a folder name, so it is checked strictly; archive and model
paths are relative to the file's folder and must stay inside it (symlinks followed), so the file cannot make the
phase read elsewhere. Every number is bounded where it is read (a submission's memory out of bounds refuses that
submission alone, `Submission.refused`). Every problem is one line naming the
file, the submission and what is wrong.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import InputError
from ..jobs.conditions import MAX_MEMORY_GB, RESERVED_MEMORY_GB, within

MAX_FILE_BYTES = 1 << 20
MAX_SUBMISSIONS = 10_000
TEAM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz")
IMAGE_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}")
KEYS = {"team", "image", "model", "memory_gb", "gpu"}


@dataclass(frozen=True)
class Submission:
    """One team's submission: an image tag or archive, an optional model tarball, its memory and GPU request."""

    team: str
    image: str  # as written in the file
    archive: Path | None  # the `docker save` archive, resolved; None: `image` is a tag
    model: Path | None = None
    memory_gb: float | None = None  # None: the phase's
    gpu: bool | None = None  # None: the phase's
    refused: str | None = None  # why its jobs cannot be planned (a value out of range): refused alone, one line


@dataclass(frozen=True)
class SubmissionsFile:
    submissions: list[Submission]


def _inside(base: Path, text: str, where: str) -> Path:
    """A path of the file, relative to its folder and inside it."""
    relative = PurePosixPath(text)
    if not text or relative.is_absolute() or ".." in relative.parts or "\\" in text:
        raise InputError(f"{where}: {text!r} must be a path relative to the submissions file's folder, inside it")
    path = (base / relative).resolve()
    if base.resolve() not in path.parents:
        raise InputError(f"{where}: {text!r} leads outside the submissions file's folder")
    if not path.is_file():
        raise InputError(f"{where}: {text!r} is not a file")
    return path


def _submission(base: Path, entry: Any, where: str) -> Submission:
    if not isinstance(entry, dict):
        raise InputError(f"{where}: expected a table ([[submission]])")
    unknown = sorted(set(entry) - KEYS)
    if unknown:
        raise InputError(f"{where}: unknown key(s) {', '.join(repr(k[:40]) for k in unknown)} (known: "
                         f"{', '.join(sorted(KEYS))})")
    team = entry.get("team")
    if team is None:
        raise InputError(f"{where}: team is missing (every [[submission]] names its team)")
    if not isinstance(team, str) or not TEAM_NAME.fullmatch(team):
        raise InputError(f"{where}: team must be 1-64 letters, digits, '-' or '_', starting with a letter or digit "
                         "(it names the submission's folder)")
    where = f"{where} (team {team})"
    image = entry.get("image")
    if not isinstance(image, str) or not image:
        raise InputError(f"{where}: image must be a tag or a `docker save` archive's path")
    archive = _inside(base, image, f"{where}: image") if image.endswith(ARCHIVE_SUFFIXES) else None
    if archive is None and not IMAGE_TAG.fullmatch(image):
        raise InputError(f"{where}: image {image[:80]!r} is neither an archive ({', '.join(ARCHIVE_SUFFIXES)}) nor "
                         "an image reference")
    model = entry.get("model")
    if model is not None and not isinstance(model, str):
        raise InputError(f"{where}: model must be the model tarball's path")
    memory = entry.get("memory_gb")
    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, (int, float))):
        raise InputError(f"{where}: memory_gb must be a number of GB above 1")
    refused = None
    if memory is not None and not within(memory, RESERVED_MEMORY_GB, MAX_MEMORY_GB):
        refused = (f"{where}: memory_gb = {memory:g}: must be a number of GB above {RESERVED_MEMORY_GB} and at most "
                   f"{MAX_MEMORY_GB}")
        memory = None
    gpu = entry.get("gpu")
    if gpu is not None and not isinstance(gpu, bool):
        raise InputError(f"{where}: gpu must be true or false")
    return Submission(team, image, archive, _inside(base, model, f"{where}: model") if model else None,
                      float(memory) if memory is not None else None, gpu, refused)


def read_submissions(path: Path) -> SubmissionsFile:
    """The submissions of `path`, checked; InputError with one line for the first problem."""
    if not path.is_file():
        raise InputError(f"{path}: not a submissions file")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise InputError(f"{path}: larger than {MAX_FILE_BYTES} bytes; a submissions file lists teams")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a TOML file ({str(exc)[:200]})") from None
    except RecursionError:
        raise InputError(f"{path}: nested too deeply to be a submissions file") from None
    if "slurm" in data:
        raise InputError(f"{path}: [slurm]: the submissions file carries no scheduler options; give them as the "
                         "site's (`phase run --slurm-config site.toml` or --partition, --account, --max-parallel, "
                         "--sbatch-option: docs/scale.md)")
    unknown = sorted(set(data) - {"submission"})
    if unknown:
        raise InputError(f"{path}: unknown table(s) {', '.join(repr(k[:40]) for k in unknown)} (known: submission)")
    entries = data.get("submission")
    if not isinstance(entries, list) or not entries:
        raise InputError(f"{path}: no [[submission]]")
    if len(entries) > MAX_SUBMISSIONS:
        raise InputError(f"{path}: {len(entries)} submissions, more than {MAX_SUBMISSIONS}")
    base = path.parent
    submissions = [_submission(base, entry, f"{path}: submission {i}") for i, entry in enumerate(entries, start=1)]
    seen: dict[str, str] = {}
    for submission in submissions:
        key = submission.team.lower()
        if key in seen:
            raise InputError(f"{path}: team {submission.team} is listed twice (as {seen[key]} before; team names "
                             "differ in more than case)")
        seen[key] = submission.team
    return SubmissionsFile(submissions)
