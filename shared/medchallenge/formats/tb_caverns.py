"""ImageCLEF 2022 TB caverns file formats: ground-truth box CSV, id list, run file, GC box JSON.

Spec: docs/metrics/tb-caverns-2022.md §1; the run-file rules of the task page: §5.
Inputs the official code crashed on (header or blank line in a run file, non-integer coordinates, short rows, a line
with a NUL byte, which Python 3.9's csv module refuses) are errors naming the line; coordinates are read as Python
3.9's `int()` reads them (its Unicode 13.0 digits: medchallenge.official.numbers). Rules the task page states but the
official metric never checked (ordered corners, known file names) are warnings, or errors with `strict=True`.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..contract import read_json_file
from ..errors import InputError
from ..official.numbers import PYTHON_3_9
from . import python39_csv

Box = tuple[int, int, int, int, int, int]
# §1.4: coordinates beyond this cannot be a CT's (NIfTI-1 stores at most 32767 voxels per axis). Within it every box
# volume and sum of volumes stays below 2**53, so the official int64 arithmetic neither wraps (it does from about
# 2.1 million per axis) nor rounds, and its IoU equals the exact one computed here.
MAX_COORDINATE = 65535


def _read_rows(path: Path) -> list[list[str]]:
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            return list(csv.reader(python39_csv.lines(handle, path), delimiter=",", quoting=csv.QUOTE_NONE))
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{path}: not a UTF-8 CSV file ({exc})") from None


def _is_int(text: str) -> bool:
    """Whether the official `int()` reads `text` (surrounding spaces, a sign, underscores between digits, the decimal
    digits of Python 3.9's Unicode 13.0)."""
    try:
        PYTHON_3_9.int(text)
    except ValueError:
        return False
    return True


def check_coordinates(where: str, box: Sequence[int]) -> None:
    """§1.4: refuse a coordinate that no CT can have (beyond ±MAX_COORDINATE), where the official int64 box
    arithmetic would eventually wrap."""
    outside = next((value for value in box if abs(value) > MAX_COORDINATE), None)
    if outside is not None:
        raise InputError(f"{where}: coordinate {outside} is outside -{MAX_COORDINATE}..{MAX_COORDINATE}, which no CT "
                         "has (the official int64 box arithmetic wraps for such boxes)")


def _parse_box(path: Path, line: int, row: list[str]) -> Box:
    if len(row) < 7:
        raise InputError(f"{path}: line {line}: expected a file name and 6 coordinates, found {len(row)} fields")
    try:
        box: Box = tuple(PYTHON_3_9.int(value) for value in row[1:7])  # type: ignore[assignment]
    except ValueError:
        raise InputError(f"{path}: line {line}: coordinates must be integers, got {','.join(row[1:7])!r}") from None
    check_coordinates(f"{path}: line {line}", box)
    return box


def byte_order_mark_warning(path: Path) -> str | None:
    """A warning when `path` starts with a UTF-8 byte-order mark, which the official code (like this evaluator)
    reads as part of the first field: an id list's first id, or a run file's first file name, then differ."""
    try:
        with open(path, "rb") as handle:
            if handle.read(3) == b"\xef\xbb\xbf":
                return (f"{path}: starts with a UTF-8 byte-order mark, read as part of the first field as the official "
                        "code did; remove it if that is not intended")
    except OSError:
        return None
    return None


def read_gt_boxes(path: Path) -> dict[str, list[Box]]:
    """§1: ground-truth boxes by file name (`id` + `.nii.gz`), rows in file order; the header line is skipped."""
    rows = _read_rows(path)
    if not rows:
        raise InputError(f"{path}: empty file (expected the header line; the official code fails here)")
    boxes: dict[str, list[Box]] = {}
    for line, row in enumerate(rows[1:], start=2):
        if not row:
            raise InputError(f"{path}: line {line}: blank line")
        boxes.setdefault(row[0] + ".nii.gz", []).append(_parse_box(path, line, row))
    return boxes


def read_all_ids(path: Path) -> list[str]:
    """§1: the id list, first field of each row verbatim (with `.nii.gz`), duplicates collapsed, no header."""
    ids: dict[str, None] = {}
    for line, row in enumerate(_read_rows(path), start=1):
        if not row:
            raise InputError(f"{path}: line {line}: blank line")
        ids.setdefault(row[0], None)
    if not ids:
        raise InputError(f"{path}: the id list is empty (the official score divides by its length)")
    return list(ids)


@dataclass
class RunFile:
    """Predicted boxes by file name in file order, and the rule violations that were only warnings."""

    boxes: dict[str, list[Box]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _check_seed_rules(where: str, name: str, box: Box, known_ids: set[str] | None, strict: bool, run: RunFile) -> None:
    problems = []
    if not (box[0] < box[3] and box[1] < box[4] and box[2] < box[5]):
        problems.append("corners must be ordered X1<X2, Y1<Y2, Z1<Z2 (the official metric scores such a box IoU 0)")
    if known_ids is not None and name not in known_ids:
        problems.append(f"unknown file name {name!r} (the official metric ignores its boxes)")
    for problem in problems:
        if strict:
            raise InputError(f"{where}: {problem}")
        run.warnings.append(f"{where}: {problem}")


def read_run_file(path: Path, known_ids: set[str] | None = None, strict: bool = False) -> RunFile:
    """A submission: `<file name>,X1,Y1,Z1,X2,Y2,Z2` per line, no header, no blank lines; several lines per case."""
    run = RunFile()
    for line, row in enumerate(_read_rows(path), start=1):
        where = f"{path}: line {line}"
        if not row:
            raise InputError(f"{where}: blank line (the run file must have none)")
        if line == 1 and len(row) >= 2 and not _is_int(row[1]):
            raise InputError(f"{where}: looks like a header; the run file must have none")
        box = _parse_box(path, line, row)
        if len(row) > 7:
            run.warnings.append(f"{where}: {len(row) - 7} extra field(s) ignored")
        _check_seed_rules(where, row[0], box, known_ids, strict, run)
        run.boxes.setdefault(row[0], []).append(box)
    return run


def read_box_json(path: Path, case_name: str, known_ids: set[str] | None = None, strict: bool = False,
                  run: RunFile | None = None) -> RunFile:
    """One GC job's `tb-cavern-boxes.json` (`{"boxes": [{"voxel_bbox": [6 ints], ...}]}`), added to `run`."""
    run = run if run is not None else RunFile()
    document = read_json_file(path)
    entries = document.get("boxes") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise InputError(f"{path}: expected an object with a list 'boxes' (case {case_name})")
    for index, entry in enumerate(entries):
        where = f"{path}: boxes[{index}]"
        bbox = entry.get("voxel_bbox") if isinstance(entry, dict) else None
        if not (isinstance(bbox, list) and len(bbox) == 6 and all(type(v) is int for v in bbox)):
            raise InputError(f"{where}: voxel_bbox must be a list of 6 integers")
        box: Box = tuple(bbox)  # type: ignore[assignment]
        check_coordinates(where, box)
        _check_seed_rules(where, case_name, box, known_ids, strict, run)
        run.boxes.setdefault(case_name, []).append(box)
    run.boxes.setdefault(case_name, [])
    return run


RUN_FILE_FORBIDDEN = ","  # a file name with a comma would shift the coordinates of its line


def run_file_text(boxes: Iterable[tuple[str, Sequence[int]]]) -> str:
    """The run file: one line `TST_001.nii.gz,X1,Y1,Z1,X2,Y2,Z2` per (file name, box), in the given order."""
    return "".join(f"{name}," + ",".join(str(int(v)) for v in box) + "\n" for name, box in boxes)
