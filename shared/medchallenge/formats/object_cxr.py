"""object-CXR file formats: ground-truth `annotations.csv`, `localization.csv` and `classification.csv`.

The official `froc.py` parses these by hand (docs/metrics/object-cxr.md §1, §5): the file is read in text mode
(universal newlines, so CRLF files read like LF files), the first line is skipped unconditionally, every other line
is `line.strip('\\n').split(',')` with exactly 2 fields, objects/predictions are `;`-joined and their fields
single-space separated, numbers are parsed with Python's `float`.

These readers accept exactly what that parser accepts and score it the same way. Where the official parser would
crash (a blank line, a double or trailing space, a field that is not a number) or silently change the meaning
(a header-less file losing its first data line, an empty object from `;;`), they raise one `InputError` naming
the file and line. Blank lines are skipped and reported in `notes` instead.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError

# Object type codes (the official file compares the type as a string: '0', '1', '2'; anything else is an object
# that is counted but can never be hit).
RECTANGLE, ELLIPSE, POLYGON, UNKNOWN_TYPE = 0, 1, 2, 3
TYPE_CODES = {"0": RECTANGLE, "1": ELLIPSE, "2": POLYGON}

# One or more `prob x y` triples joined by ';', fields separated by exactly one space (§1).
_TRIPLES = re.compile(r"[^ ;]+ [^ ;]+ [^ ;]+(?:;[^ ;]+ [^ ;]+ [^ ;]+)*")


@dataclass
class GroundTruth:
    """Parsed annotations: distinct images in first-appearance order and their objects in file order.

    `num_image` counts data lines as the official script does (an image listed twice counts twice, and its
    objects are merged). Objects are numbered in file order; box objects (rectangle, ellipse) keep `x1 y1 x2 y2`
    in `boxes`, polygons their vertices in `vertices_x/vertices_y[vertex_start[k]:vertex_start[k + 1]]`.
    """

    path: Path
    image_paths: list[str]
    num_image: int
    object_image: np.ndarray  # int64 (n_objects,), index into image_paths
    object_type: np.ndarray  # int8 (n_objects,), RECTANGLE / ELLIPSE / POLYGON / UNKNOWN_TYPE
    boxes: np.ndarray  # float64 (n_objects, 4), NaN for polygons and unknown types
    vertex_start: np.ndarray  # int64 (n_objects + 1,), polygon vertex offsets (empty range for non-polygons)
    vertices_x: np.ndarray  # float64
    vertices_y: np.ndarray  # float64
    notes: list[str] = field(default_factory=list)

    @property
    def num_object(self) -> int:
        return len(self.object_type)


@dataclass
class Localization:
    """Parsed localization predictions: per data line its image path, and all triples in file order."""

    path: Path | None
    line_image_paths: list[str]
    line_numbers: list[int]
    triples_per_line: np.ndarray  # int64 (n_lines,)
    probability: np.ndarray  # float64 (n_triples,)
    x: np.ndarray
    y: np.ndarray
    notes: list[str] = field(default_factory=list)


@dataclass
class Classification:
    """Parsed classification predictions: one probability per image path, in file order."""

    path: Path | None
    probability: dict[str, float]
    line_numbers: dict[str, int]
    notes: list[str] = field(default_factory=list)


def _read_lines(path: Path) -> list[str]:
    """The file's lines as Python's text mode yields them (universal newlines), without the line ends."""
    try:
        with open(path, encoding="utf-8", newline=None) as handle:
            text = handle.read()
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    if not lines:
        raise InputError(f"{path}: empty file, expected a header line")
    return lines


def _data_lines(path: Path, lines: list[str], columns: str, looks_like_data) -> tuple[list[tuple[int, str, str]], list[str]]:
    """(line number, image path, value) per data line after the header; blank lines skipped and noted."""
    first = lines[0].split(",")
    if len(first) == 2 and looks_like_data(first[1]):
        raise InputError(
            f"{path}: line 1: looks like data ({lines[0][:60]!r}), expected a header line such as '{columns}' "
            "(the official parser skips line 1 unconditionally)"
        )
    rows = []
    blank = []
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split(",")
        if len(fields) != 2:
            if not line.strip():
                blank.append(number)
                continue
            raise InputError(f"{path}: line {number}: expected 2 comma-separated fields ({columns}), found {len(fields)}")
        rows.append((number, fields[0], fields[1]))
    notes = []
    if blank:
        shown = ", ".join(map(str, blank[:5])) + (", ..." if len(blank) > 5 else "")
        notes.append(f"{path.name}: skipped {len(blank)} blank line(s) (line {shown}); the official parser would stop with an error")
    return rows, notes


def _parse_numbers(tokens: list[str], path: Path, number: int, what: str) -> list[float]:
    """float() of each token (as the official parser), requiring finite values and no empty fields."""
    values = []
    for token in tokens:
        if token == "":
            raise InputError(f"{path}: line {number}: empty field in {what} (double, leading or trailing space?)")
        try:
            value = float(token)
        except ValueError:
            raise InputError(f"{path}: line {number}: {token!r} in {what} is not a number") from None
        if not math.isfinite(value):
            raise InputError(f"{path}: line {number}: {token!r} in {what} is not a finite number")
        values.append(value)
    return values


def _annotation_is_data(text: str) -> bool:
    """True if `text` is a valid, non-header annotation field ('' or objects of known types)."""
    if text == "":
        return True
    for obj in text.split(";"):
        fields = obj.split(" ")
        if fields[0] not in TYPE_CODES:
            return False
        try:
            [float(t) for t in fields[1:]]
        except ValueError:
            return False
    return True


def read_ground_truth(path: Path) -> GroundTruth:
    """Parse `image_path,annotation` (§1): objects `TYPE c1 c2 ...` joined by ';', types compared as strings.

    Rectangles and ellipses need exactly 4 coordinates and polygons an even number (the official script fails
    on anything else when it tests a point against such an object); a type other than 0/1/2 is kept as an object
    that can never be hit (and noted).
    """
    path = Path(path)
    rows, notes = _data_lines(path, _read_lines(path), "image_path,annotation", _annotation_is_data)
    image_index: dict[str, int] = {}
    image_paths: list[str] = []
    line_count: dict[str, int] = {}
    object_image: list[int] = []
    object_type: list[int] = []
    boxes: list[tuple[float, float, float, float]] = []
    vertex_counts: list[int] = []
    vertices: list[float] = []
    unknown: dict[str, int] = {}
    nan_box = (math.nan,) * 4
    for number, image_path, annotation in rows:
        index = image_index.get(image_path)
        if index is None:
            index = image_index[image_path] = len(image_paths)
            image_paths.append(image_path)
            line_count[image_path] = 0
        line_count[image_path] += 1
        if annotation == "":
            continue
        for k, obj in enumerate(annotation.split(";"), start=1):
            if obj == "":
                raise InputError(f"{path}: line {number}: object {k} is empty (';;' or a trailing ';')")
            fields = obj.split(" ")
            what = f"object {k}"
            kind, coordinates = fields[0], _parse_numbers(fields[1:], path, number, what)
            if kind == "":
                raise InputError(f"{path}: line {number}: {what} starts with a space")
            code = TYPE_CODES.get(kind, UNKNOWN_TYPE)
            if code in (RECTANGLE, ELLIPSE):
                if len(coordinates) != 4:
                    shape = "rectangle" if code == RECTANGLE else "ellipse"
                    raise InputError(f"{path}: line {number}: {what} ({shape}) needs 4 coordinates x1 y1 x2 y2, found {len(coordinates)}")
                boxes.append(tuple(coordinates))
                vertex_counts.append(0)
            elif code == POLYGON:
                if len(coordinates) % 2:
                    raise InputError(f"{path}: line {number}: {what} (polygon) has an odd number of coordinates ({len(coordinates)})")
                boxes.append(nan_box)
                vertex_counts.append(len(coordinates) // 2)
                vertices.extend(coordinates)
            else:
                unknown[kind] = unknown.get(kind, 0) + 1
                boxes.append(nan_box)
                vertex_counts.append(0)
            object_image.append(index)
            object_type.append(code)
    duplicated = [p for p, n in line_count.items() if n > 1]
    if duplicated:
        notes.append(
            f"{path.name}: {len(duplicated)} image(s) listed on several lines (e.g. {duplicated[0]!r}): each line "
            "counts as an image and their objects are merged, as in the official script"
        )
    if unknown:
        kinds = ", ".join(f"{k!r} ({n})" for k, n in sorted(unknown.items()))
        notes.append(f"{path.name}: objects of unknown type {kinds} are counted but can never be hit, as in the official script")
    flat = np.asarray(vertices, dtype=np.float64).reshape(-1, 2)
    return GroundTruth(
        path=path,
        image_paths=image_paths,
        num_image=len(rows),
        object_image=np.asarray(object_image, dtype=np.int64),
        object_type=np.asarray(object_type, dtype=np.int8),
        boxes=np.asarray(boxes, dtype=np.float64).reshape(-1, 4),
        vertex_start=np.concatenate(([0], np.cumsum(vertex_counts, dtype=np.int64))),
        vertices_x=np.ascontiguousarray(flat[:, 0]),
        vertices_y=np.ascontiguousarray(flat[:, 1]),
        notes=notes,
    )


def _triples_are_data(text: str) -> bool:
    if text == "":
        return True
    if not _TRIPLES.fullmatch(text):
        return False
    try:
        [float(t) for t in text.replace(";", " ").split(" ")]
    except ValueError:
        return False
    return True


def _locate_bad_triples(path: Path, number: int, prediction: str) -> InputError:
    """The precise error for a prediction field that failed the fast check."""
    for k, triple in enumerate(prediction.split(";"), start=1):
        fields = triple.split(" ")
        if len(fields) != 3:
            return InputError(
                f"{path}: line {number}: prediction {k} ({triple!r}) must be 'probability x y' separated by "
                f"single spaces, found {len(fields)} field(s)"
            )
        _parse_numbers(fields, path, number, f"prediction {k}")
    return InputError(f"{path}: line {number}: malformed prediction field")


def read_localization(path: Path) -> Localization:
    """Parse `image_path,prediction` (§1): '' or `prob x y` triples joined by ';', single spaces, exactly 3 floats."""
    path = Path(path)
    rows, notes = _data_lines(path, _read_lines(path), "image_path,prediction", _triples_are_data)
    line_image_paths, line_numbers, counts, texts = [], [], [], []
    for number, image_path, prediction in rows:
        line_image_paths.append(image_path)
        line_numbers.append(number)
        if prediction == "":
            counts.append(0)
            continue
        if not _TRIPLES.fullmatch(prediction):
            raise _locate_bad_triples(path, number, prediction)
        counts.append(prediction.count(";") + 1)
        texts.append(prediction)
    tokens = " ".join(texts).replace(";", " ").split(" ") if texts else []
    try:
        values = np.fromiter(map(float, tokens), dtype=np.float64, count=len(tokens))
    except ValueError:
        values = None
    if values is None or not np.isfinite(values).all():
        for number, _, prediction in rows:
            if prediction:
                for k, triple in enumerate(prediction.split(";"), start=1):
                    _parse_numbers(triple.split(" "), path, number, f"prediction {k}")
        raise InputError(f"{path}: malformed predictions")  # not reached: the loop above names the line
    return Localization(
        path=path,
        line_image_paths=line_image_paths,
        line_numbers=line_numbers,
        triples_per_line=np.asarray(counts, dtype=np.int64),
        probability=values[0::3].copy(),
        x=values[1::3].copy(),
        y=values[2::3].copy(),
        notes=notes,
    )


def _probability_is_data(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_classification(path: Path) -> Classification:
    """Parse `image_path,prediction` with one finite probability per image; an image twice is an error."""
    path = Path(path)
    rows, notes = _data_lines(path, _read_lines(path), "image_path,prediction", _probability_is_data)
    probability: dict[str, float] = {}
    line_numbers: dict[str, int] = {}
    for number, image_path, text in rows:
        if text == "":
            raise InputError(f"{path}: line {number}: no probability for {image_path!r}")
        (value,) = _parse_numbers([text], path, number, "the probability")
        if image_path in probability:
            raise InputError(f"{path}: line {number}: {image_path!r} already has a probability on line {line_numbers[image_path]}")
        probability[image_path] = value
        line_numbers[image_path] = number
    return Classification(path=path, probability=probability, line_numbers=line_numbers, notes=notes)
