"""object-CXR file formats: ground-truth `annotations.csv`, `localization.csv` and `classification.csv`.

The official `froc.py` parses these by hand (docs/metrics/object-cxr.md §1, §5): the file is read in text mode
(universal newlines, so CRLF files read like LF files), the first line is skipped unconditionally, every other line
is `line.strip('\\n').split(',')` with exactly 2 fields, objects/predictions are `;`-joined and their fields
single-space separated, numbers are parsed with Python's `float` (froc.py ran on Python 3.7: its `float()`, whose
Unicode 11.0 digits medchallenge.official.numbers keeps).

These readers accept exactly what that parser accepts and score it the same way. Where the official parser would
crash (a double or trailing space, a field that is not a number) or silently change the meaning (a header-less file
losing its first data line), they raise one `InputError` naming the file and line. Blank lines are skipped and
reported in `notes` instead. In the ground truth, froc.py reads an empty object (`;;`, a leading or trailing `;`)
or an object with a leading space as an object of type '' that is never hit: kept so, and noted.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..contract import name_list
from ..errors import InputError
from ..official.numbers import PYTHON_3_7

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
    Malformed objects (wrong coordinate count) have the type UNKNOWN_TYPE and their reason in `malformed`.
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
    malformed: dict[int, str] = field(default_factory=dict)  # object -> 'line L: object K (...) ...'
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


def _read_text(path: Path) -> bytes:
    """The file's UTF-8 bytes with line ends normalised as Python's text mode does (universal newlines)."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not raw:
        raise InputError(f"{path}: empty file, expected a header line")
    return raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def _read_lines(path: Path) -> list[str]:
    """The file's lines as Python's text mode yields them, without the line ends."""
    lines = _read_text(path).decode("utf-8").split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _check_header(path: Path, first_line: str, columns: str, looks_like_data) -> None:
    """Line 1 is skipped unconditionally by the official parser: refuse a file whose line 1 is data."""
    fields = first_line.split(",")
    if len(fields) == 2 and looks_like_data(fields[1]):
        raise InputError(
            f"{path}: line 1: looks like data ({first_line[:60]!r}), expected a header line such as '{columns}' "
            "(the official parser skips line 1 unconditionally)"
        )


def _blank_note(path: Path, blank: list[int]) -> list[str]:
    if not blank:
        return []
    shown = ", ".join(map(str, blank[:5])) + (", ..." if len(blank) > 5 else "")
    return [f"{path.name}: skipped {len(blank)} blank line(s) (line {shown}); the official parser would stop with an error"]


def _data_lines(path: Path, lines: list[str], columns: str, looks_like_data) -> tuple[list[tuple[int, str, str]], list[str]]:
    """(line number, image path, value) per data line after the header; blank lines skipped and noted."""
    _check_header(path, lines[0], columns, looks_like_data)
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
    return rows, _blank_note(path, blank)


@dataclass
class _Table:
    """A two-column file split without per-field Python work: rows, and the tokens of their second field.

    Segments are the ';'-separated parts of a non-empty second field (objects, predictions); tokens are the
    non-empty runs between single spaces and ';'. A segment starting with a space or empty (ground truth only)
    has no token at its start.
    """

    path: Path
    line_numbers: np.ndarray  # file line number (1-based) per row
    image_paths: list[str]
    token_start: np.ndarray  # byte offsets into `data`
    token_end: np.ndarray
    token_segment: np.ndarray  # global segment number of each token
    segment_start: np.ndarray  # byte offset of each segment
    segment_row: np.ndarray
    data: bytes
    notes: list[str]

    def line_of_row(self, row: int) -> int:
        return int(self.line_numbers[row])

    def token_text(self, k: int) -> str:
        return self.data[self.token_start[k]:self.token_end[k]].decode("utf-8")


def _split_table(path: Path, columns: str, looks_like_data, empty_segments: bool = False) -> _Table:
    """Split `path` as the official parser does (§1, §5), vectorised over bytes; errors name the line.

    Every space must be followed by a field (froc.py's `float('')` fails otherwise). With `empty_segments`
    (the ground truth), a segment may be empty or start with a space: froc.py reads an object of type '' there.
    Otherwise (predictions, whose every field is a float) a ';' or space must have a field on both sides.
    """
    data = _read_text(path)
    buf = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(buf == 10)
    if data[-1:] != b"\n":
        ends = np.r_[ends, len(data)]
    starts = np.r_[0, ends[:-1] + 1]
    _check_header(path, data[starts[0]:ends[0]].decode("utf-8"), columns, looks_like_data)
    commas = np.flatnonzero(buf == 44)
    comma_line = np.searchsorted(ends, commas)
    per_line = np.bincount(comma_line, minlength=len(ends))
    per_line[0] = 1  # the header is never parsed
    blank = []
    for line in np.flatnonzero(per_line != 1).tolist():
        text = data[starts[line]:ends[line]]
        if per_line[line] == 0 and not text.strip():
            blank.append(line + 1)
            continue
        raise InputError(f"{path}: line {line + 1}: expected 2 comma-separated fields ({columns}), "
                         f"found {per_line[line] + 1}")
    rows = np.flatnonzero(per_line == 1)[1:]
    comma = commas[np.searchsorted(commas, starts[rows])]
    image_paths = [data[a:b].decode("utf-8") for a, b in zip(starts[rows].tolist(), comma.tolist())]
    value_start, value_end = comma + 1, ends[rows]

    # bytes inside the second fields; separators; token characters
    marks = np.zeros(len(buf) + 1, dtype=np.int8)
    marks[value_start] += 1
    marks[value_end] -= 1
    in_value = np.cumsum(marks[:-1], dtype=np.int8).view(bool)
    is_space = (buf == 32) & in_value
    is_semicolon = (buf == 59) & in_value
    is_token = in_value & ~is_space & ~is_semicolon
    padded = np.r_[False, is_token, False]
    if empty_segments:
        sep_pos = np.flatnonzero(is_space)
        bad = ~padded[sep_pos + 2]  # a space before another space, a ';' or the line end
        problem = "empty field after a space in the annotation (a double or trailing space)"
    else:
        sep_pos = np.flatnonzero(is_space | is_semicolon)
        bad = ~padded[sep_pos] | ~padded[sep_pos + 2]  # separator after the comma, before the line end, or doubled
        problem = "empty field in the second column (a double, leading or trailing space, or ';;' / a trailing ';')"
    if bad.any():
        row = int(np.searchsorted(value_start, sep_pos[np.argmax(bad)], side="right") - 1)
        raise InputError(f"{path}: line {int(rows[row]) + 1}: {problem}; froc.py fails on float('')")
    edges = np.diff(padded.view(np.int8))
    token_start = np.flatnonzero(edges == 1)
    token_end = np.flatnonzero(edges == -1)
    segment_start = np.sort(np.r_[value_start[value_end > value_start], np.flatnonzero(is_semicolon) + 1],
                            kind="stable")
    return _Table(path, rows + 1, image_paths, token_start, token_end,
                  np.searchsorted(segment_start, token_start, side="right") - 1, segment_start,
                  np.searchsorted(value_start, segment_start, side="right") - 1, data, _blank_note(path, blank))


_POWERS_OF_TEN = 10.0 ** np.arange(16)
_MAX_FAST_DIGITS = 15  # below 2**53: mantissa and 10**scale exact, so one division is correctly rounded


def _parse_numbers(tokens: list[str], path: Path, number: int, what: str) -> list[float]:
    """float() of each token (as the official parser), requiring finite values and no empty fields."""
    values = []
    for token in tokens:
        if token == "":
            raise InputError(f"{path}: line {number}: empty field in {what} (double, leading or trailing space?)")
        try:
            value = PYTHON_3_7.float(token)
        except ValueError:
            raise InputError(f"{path}: line {number}: {token!r} in {what} is not a number") from None
        if not math.isfinite(value):
            raise InputError(f"{path}: line {number}: {token!r} in {what} is not a finite number")
        values.append(value)
    return values


def _token_numbers(table: _Table, tokens: np.ndarray, describe, finite: bool = True) -> np.ndarray:
    """Python's float() of the selected tokens, bit for bit, vectorised for plain decimals.

    A token `-?digits[.digits]` with at most 15 digits is mantissa / 10**scale with both exact in float64, so one
    IEEE division gives the correctly rounded value, which is what float() returns. Every other token (exponent,
    '+', whitespace, underscores, long mantissas, inf/nan) goes through float() itself. `describe(k)` names token k
    in an error: '(line, what)'. With `finite`, NaN and infinities are errors.
    """
    buf = np.frombuffer(table.data, dtype=np.uint8)
    start, length = table.token_start[tokens], table.token_end[tokens] - table.token_start[tokens]
    n = len(tokens)
    mantissa = np.zeros(n)
    digits = np.zeros(n, dtype=np.int64)
    scale = np.zeros(n, dtype=np.int64)
    dots = np.zeros(n, dtype=np.int64)
    other = length > _MAX_FAST_DIGITS + 2
    negative = buf[start] == 45 if n else np.zeros(0, dtype=bool)
    for j in range(int(min(length.max(initial=0), _MAX_FAST_DIGITS + 2))):
        active = length > j
        char = buf[np.where(active, start + j, 0)]
        digit = active & (char - 48 <= 9)
        dot = active & (char == 46)
        other |= active & ~digit & ~dot & ~((char == 45) & (j == 0))
        mantissa = np.where(digit, mantissa * 10 + (char - 48), mantissa)
        scale += digit & (dots > 0)
        digits += digit
        dots += dot
    fast = ~other & (dots <= 1) & (digits >= 1) & (digits <= _MAX_FAST_DIGITS)
    values = mantissa / _POWERS_OF_TEN[np.minimum(scale, 15)]
    values = np.where(negative, -values, values)
    for k in np.flatnonzero(~fast).tolist():
        text = table.token_text(tokens[k])
        line, what = describe(k)
        try:
            values[k] = PYTHON_3_7.float(text)
        except ValueError:
            raise InputError(f"{table.path}: line {line}: {text!r} in {what} is not a number") from None
        if finite and not math.isfinite(values[k]):
            raise InputError(f"{table.path}: line {line}: {text!r} in {what} is not a finite number")
    return values


def _segment_number(table: _Table, segment: int) -> int:
    """1-based position of a segment (object or prediction) within its line."""
    row = table.segment_row[segment]
    return int(segment - np.searchsorted(table.segment_row, row) + 1)


def _annotation_is_data(text: str) -> bool:
    """True if `text` is a valid, non-header annotation field ('' or objects of known types)."""
    if text == "":
        return True
    for obj in text.split(";"):
        fields = obj.split(" ")
        if fields[0] not in TYPE_CODES:
            return False
        try:
            [PYTHON_3_7.float(t) for t in fields[1:]]
        except ValueError:
            return False
    return True


def read_ground_truth(path: Path, strict: bool = False) -> GroundTruth:
    """Parse `image_path,annotation` (§1): objects `TYPE c1 c2 ...` joined by ';', types compared as strings.

    As froc.py reads them: an empty object (`;;`, a leading or trailing `;`) or one starting with a space has the
    type '' and, like any type other than 0/1/2, is an object that is never hit (noted); its fields after the type
    must still be numbers. A rectangle or ellipse without exactly 4 coordinates or a polygon with an odd count is
    kept in `malformed` (froc.py fails only when a point is tested against it) and never hit. Coordinates of
    well-formed rectangles, ellipses and polygons must be finite. `strict` refuses all of these objects.
    """
    path = Path(path)
    table = _split_table(path, "image_path,annotation", _annotation_is_data, empty_segments=True)
    n_objects = len(table.segment_start)
    # the type is the token at the start of the segment; a segment without one has the type ''
    is_type = table.token_start == table.segment_start[table.token_segment]
    type_start = np.zeros(n_objects, dtype=np.int64)
    type_end = np.zeros(n_objects, dtype=np.int64)
    type_start[table.token_segment[is_type]] = table.token_start[is_type]
    type_end[table.token_segment[is_type]] = table.token_end[is_type]
    type_byte = np.frombuffer(table.data, dtype=np.uint8)[type_start] if n_objects else np.zeros(0, dtype=np.uint8)
    code = np.where((type_end - type_start == 1) & (type_byte >= 48) & (type_byte <= 50), type_byte - 48,
                    UNKNOWN_TYPE).astype(np.int8)
    coordinate_tokens = np.flatnonzero(~is_type)
    coordinate_segment = table.token_segment[coordinate_tokens]

    def describe(k: int) -> tuple[int, str]:
        segment = coordinate_segment[k]
        return table.line_of_row(table.segment_row[segment]), f"object {_segment_number(table, segment)}"

    values = _token_numbers(table, coordinate_tokens, describe, finite=False)
    counts = np.bincount(coordinate_segment, minlength=n_objects)
    boxed = code <= ELLIPSE
    wrong = (boxed & (counts != 4)) | ((code == POLYGON) & (counts % 2 == 1))
    malformed: dict[int, str] = {}
    for segment in np.flatnonzero(wrong).tolist():
        where = f"line {table.line_of_row(table.segment_row[segment])}: object {_segment_number(table, segment)}"
        if code[segment] == POLYGON:
            malformed[segment] = f"{where} (polygon) has an odd number of coordinates ({counts[segment]})"
        else:
            shape = "rectangle" if code[segment] == RECTANGLE else "ellipse"
            malformed[segment] = f"{where} ({shape}) needs 4 coordinates x1 y1 x2 y2, found {counts[segment]}"
    unknown = np.flatnonzero(code == UNKNOWN_TYPE)
    refused = np.flatnonzero(wrong | (code == UNKNOWN_TYPE))
    if strict and len(refused):
        segment = int(refused[0])
        if segment in malformed:
            raise InputError(f"{path}: {malformed[segment]}; --strict refuses it (froc.py fails only when a "
                             "point is tested against it)")
        kind = table.data[type_start[segment]:type_end[segment]].decode("utf-8")
        where = f"{path}: line {table.line_of_row(table.segment_row[segment])}: " \
                f"object {_segment_number(table, segment)}"
        what = f"has the type {kind!r}" if kind else "is empty or starts with a space (';;', a leading or trailing ';')"
        raise InputError(f"{where} {what}; --strict refuses it (froc.py counts it as an object that is never hit)")
    code[wrong] = UNKNOWN_TYPE
    non_finite = np.flatnonzero(~np.isfinite(values) & (code != UNKNOWN_TYPE)[coordinate_segment])
    if len(non_finite):
        line, what = describe(int(non_finite[0]))
        text = table.token_text(coordinate_tokens[non_finite[0]])
        raise InputError(f"{path}: line {line}: {text!r} in {what} is not a finite number")
    offset = np.cumsum(counts) - counts
    boxes = np.full((n_objects, 4), np.nan)
    box_segments = np.flatnonzero(code <= ELLIPSE)
    boxes[box_segments] = values[offset[box_segments, None] + np.arange(4)]
    polygon_values = values[(code == POLYGON)[coordinate_segment]]
    vertex_counts = np.where(code == POLYGON, counts // 2, 0)

    image_index: dict[str, int] = {}
    row_image = np.fromiter((image_index.setdefault(p, len(image_index)) for p in table.image_paths),
                            dtype=np.int64, count=len(table.image_paths))
    object_image = row_image[table.segment_row]
    notes = list(table.notes)
    lines_per_image = np.bincount(row_image, minlength=len(image_index))
    if (lines_per_image > 1).any():
        example = list(image_index)[int(np.argmax(lines_per_image > 1))]
        notes.append(
            f"{path.name}: {int((lines_per_image > 1).sum())} image(s) listed on several lines (e.g. {example!r}): "
            "each line counts as an image and their objects are merged, as in the official script"
        )
    kinds: dict[str, list[int]] = {}
    for segment in unknown.tolist():
        kinds.setdefault(table.data[type_start[segment]:type_end[segment]].decode("utf-8"), []).append(segment)
    empty = kinds.pop("", [])
    if empty:
        images = list(dict.fromkeys(table.image_paths[table.segment_row[s]] for s in empty))
        notes.append(f"{path.name}: {len(empty)} empty object(s) (';;', a leading or trailing ';', or a leading "
                     f"space) on {len(images)} image(s) ({name_list(images)}): froc.py reads each as an object of type "
                     "'' that is never hit; counted so, which lowers the sensitivity")
    if kinds:
        listed = ", ".join(f"{k!r} ({len(n)})" for k, n in sorted(kinds.items()))
        notes.append(f"{path.name}: objects of unknown type {listed} are counted but can never be hit, "
                     "as in the official script")
    return GroundTruth(
        path=path,
        image_paths=list(image_index),
        num_image=len(table.image_paths),
        object_image=object_image,
        object_type=code,
        boxes=boxes,
        vertex_start=np.r_[0, np.cumsum(vertex_counts)].astype(np.int64),
        vertices_x=np.ascontiguousarray(polygon_values[0::2]),
        vertices_y=np.ascontiguousarray(polygon_values[1::2]),
        malformed=malformed,
        notes=notes,
    )


def _triples_are_data(text: str) -> bool:
    if text == "":
        return True
    if not _TRIPLES.fullmatch(text):
        return False
    try:
        [PYTHON_3_7.float(t) for t in text.replace(";", " ").split(" ")]
    except ValueError:
        return False
    return True


def read_localization(path: Path) -> Localization:
    """Parse `image_path,prediction` (§1): '' or `prob x y` triples joined by ';', single spaces, exactly 3 floats.
    NaN and infinities are kept: froc.py reads them with float() and compares them like any number."""
    path = Path(path)
    table = _split_table(path, "image_path,prediction", _triples_are_data)
    fields = np.bincount(table.token_segment, minlength=len(table.segment_row))
    wrong = np.flatnonzero(fields != 3)
    if len(wrong):
        segment = int(wrong[0])
        raise InputError(
            f"{path}: line {table.line_of_row(table.segment_row[segment])}: prediction "
            f"{_segment_number(table, segment)} must be 'probability x y' separated by single spaces, "
            f"found {fields[segment]} field(s)"
        )

    def describe(k: int) -> tuple[int, str]:
        segment = table.token_segment[k]
        return table.line_of_row(table.segment_row[segment]), f"prediction {_segment_number(table, segment)}"

    values = _token_numbers(table, np.arange(len(table.token_start)), describe, finite=False)
    return Localization(
        path=path,
        line_image_paths=table.image_paths,
        line_numbers=table.line_numbers.tolist(),
        triples_per_line=np.bincount(table.segment_row, minlength=len(table.image_paths)).astype(np.int64),
        probability=values[0::3].copy(),
        x=values[1::3].copy(),
        y=values[2::3].copy(),
        notes=table.notes,
    )


def _probability_is_data(text: str) -> bool:
    try:
        PYTHON_3_7.float(text)
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
