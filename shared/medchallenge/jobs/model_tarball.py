"""/opt/ml/model as grand-challenge fills it: the algorithm's model tarball extracted by the sagemaker shim (Python's
tarfile with the 'data' filter, files given to the image's user). Every member is checked first, and a link, a device,
a FIFO, an absolute path or a member outside the folder refuses the whole tarball with one line; so does a tarball whose
members' sizes (from their headers, before anything is written) exceed its budget.

A phase unpacks each model once (`unpack_model_once`, keyed by the tarball's hash) and mounts it read-only into each
of its jobs, instead of a copy per job. An evaluation's ground_truth.tar.gz is unpacked by the same rules (`what`
names it in a refusal), as the shim unpacks it into /opt/ml/input/data/ground_truth."""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

from ..limits import Limit
from .errors import EmulationError

# The sum of the members' sizes, from their headers, before anything is written.
MAX_MODEL_BYTES = Limit("MEDCHALLENGE_MAX_MODEL_BYTES", 20 << 30, "bytes")


def _member_problem(member: tarfile.TarInfo) -> str | None:
    name = PurePosixPath(member.name)
    if name.is_absolute():
        return "an absolute path"
    if ".." in name.parts:
        return "a path outside the model folder (..)"
    if member.issym() or member.islnk():
        return "a link"
    if member.ischr() or member.isblk():
        return "a device"
    if member.isfifo():
        return "a FIFO"
    if not (member.isfile() or member.isdir()):
        return "neither a file nor a folder"
    return None


def _check_members(model: Path, archive: tarfile.TarFile, target: Path, budget: int | None,
                   what: str) -> list[tarfile.TarInfo]:
    members, total = [], 0
    for index, member in enumerate(archive, start=1):
        problem = _member_problem(member)
        if problem:
            raise EmulationError(f"{what} {model.name}: member {index} is {problem}; grand-challenge's {what} "
                                 "tarballs hold regular files and folders only")
        total += member.size
        if total > MAX_MODEL_BYTES.value():
            raise MAX_MODEL_BYTES.refuse(model, f"members of at least {total} bytes")
        if budget is not None and total > budget:
            raise EmulationError(f"{what} {model.name}: members of at least {total} bytes, more than the job's disk "
                                 f"limit of {budget} bytes (where grand-challenge unpacks it)")
        members.append(member)
    free = shutil.disk_usage(target).free
    if total > free:
        raise EmulationError(f"{what} {model.name}: {total} bytes to extract, {free} free under {target}")
    return members


def extract_model(model: Path, target: Path, budget: int | None = None, what: str = "model") -> None:
    """Fill `target` (/opt/ml/model) from a `.tar`/`.tar.gz` model tarball, or copy a folder (a model folder of the
    project's compose setup); links and special files refused either way, and a tarball unpacking to more than
    `budget` bytes."""
    target.mkdir(parents=True, exist_ok=True)
    if model.is_dir():
        for path in sorted(model.rglob("*")):
            if path.is_symlink() or not (path.is_file() or path.is_dir()):
                raise EmulationError(f"model folder {model}: {path.relative_to(model)} is a link or a special file")
        shutil.copytree(model, target, dirs_exist_ok=True)
    else:
        try:
            with tarfile.open(model) as archive:
                members = _check_members(model, archive, target, budget, what)
                archive.extractall(target, members=members, filter="data")
        except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
            if isinstance(exc, OSError) and exc.filename:
                raise EmulationError(f"{what} {model.name}: cannot extract: {exc.strerror}") from None
            raise EmulationError(f"{what} {model.name}: not a readable tar or tar.gz file "
                                 f"({type(exc).__name__})") from None
    for path in [target, *target.rglob("*")]:  # the shim chowns to the image's user; here: readable by any uid
        os.chmod(path, 0o777 if path == target else 0o755 if path.is_dir() else 0o644)


def unpack_model_once(model: Path, target: Path, budget: int, what: str = "model") -> Path:
    """`target` filled from `model` unless it already was (complete: it appears by a rename once unpacked), for jobs
    to share read-only; a refused model leaves nothing."""
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        extract_model(model, partial, budget, what)
        os.chmod(partial, 0o755)  # readable by any container user, writable by none
        os.rename(partial, target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target
