"""Atomic file output and metrics.json writing; paths as users type them."""

from __future__ import annotations

import errno
import json
import math
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def user_path(text: str) -> Path:
    """A path option as a user typed it (the commands' argparse type): `~` expanded, which a shell leaves as it is
    in `--output=~/x` and which a program given the words without a shell receives."""
    return Path(text).expanduser()


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc` is a write refused for want of space (the disk or a quota full)."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL


def file_mode() -> int:
    """The mode a new file gets under this process's umask (read without changing it: other threads write too)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o644


@contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """A temporary file path beside `path` (ending in `suffix`, for writers that choose the format by it); renamed
    over `path` only if the block succeeds, removed otherwise."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".part{suffix}", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, file_mode())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


@contextmanager
def atomic_output(path: str | os.PathLike, mode: str = "w", durable: bool = True) -> Iterator[BinaryIO]:
    """Open a temporary file beside `path`; rename it over `path` only if the block succeeds. `durable`: on disk
    before the rename (fsync); a writer of thousands of files passes False and makes them durable at once
    (os.sync) before it records that they are there."""
    with atomic_path(path) as tmp, open(tmp, mode) as handle:
        yield handle
        handle.flush()
        if durable:
            os.fsync(handle.fileno())


def write_text_atomic(path: str | os.PathLike, text: str, durable: bool = True) -> None:
    """Write text to `path` atomically."""
    with atomic_output(path, "w", durable) as handle:
        handle.write(text)


def write_dicom_atomic(path: str | os.PathLike, dataset) -> Path:
    """Write a pydicom Dataset as a DICOM Part 10 file atomically; returns the path."""
    with atomic_output(path, "wb") as handle:
        dataset.save_as(handle, enforce_file_format=True)
    return Path(path)


def write_image_atomic(path: str | os.PathLike, image) -> None:
    """Write a SimpleITK image (format by suffix: .nii.gz, .mha, ...) atomically, zlib level 1 (fast)."""
    import SimpleITK as sitk

    path = Path(path)
    suffix = "".join(path.suffixes[-2:]) if path.name.endswith(".nii.gz") else path.suffix
    with atomic_path(path, suffix) as tmp:
        sitk.WriteImage(image, str(tmp), True, 1)


def check_finite(value: Any, where: str = "$") -> None:
    """Raise ValueError naming the first non-finite number or non-JSON value inside `value`."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"non-finite number {value!r} at {where}")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            check_finite(item, f"{where}.{key}")
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            check_finite(item, f"{where}[{index}]")
        return
    raise TypeError(f"value of type {type(value).__name__} at {where} is not JSON")


def write_json_atomic(path: str | os.PathLike, value: Any, indent: int | None = 2, durable: bool = True) -> None:
    """Write `value` as strict JSON (finite numbers only) atomically (`durable`: atomic_output's)."""
    check_finite(value)
    write_text_atomic(path, json.dumps(value, indent=indent, allow_nan=False) + "\n", durable)


def write_metrics(path: str | os.PathLike, aggregates: dict, case: dict, meta: dict) -> dict:
    """Write metrics.json in the project's shape: {"aggregates", "case", "meta"}."""
    metrics = {"aggregates": aggregates, "case": case, "meta": meta}
    write_json_atomic(path, metrics)
    return metrics
