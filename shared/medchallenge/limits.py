"""Limits on what an evaluator or algorithm reads: a hostile or mistaken input beyond them is refused with one line
before it can exhaust memory (docs: README "Hostile inputs"). Each is set by an environment variable.

The defaults sit far above the challenges' real inputs (test sets of 50 to 7,601 cases; CTs up to about 700 slices)
and keep the peak memory of every reader within the compose memory limit (`make bench`, hostile-input peaks).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path

import numpy as np

from .errors import InputError

TEXT_SUFFIXES = (".csv", ".txt", ".tsv")  # run files and ground-truth tables: line-based
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Limit:
    """One limit: its environment variable, its default and what it counts."""

    variable: str
    default: int
    unit: str

    def value(self) -> int:
        text = os.environ.get(self.variable, "")
        try:
            value = int(text) if text else self.default
        except ValueError:
            value = 0
        if value < 1:
            raise InputError(f"${self.variable}={text!r}: expected a positive whole number of {self.unit}")
        return value

    def refuse(self, path: object, found: str) -> InputError:
        return InputError(f"{path}: {found}, more than the limit of {self.value()} {self.unit} "
                          f"(${self.variable} sets it)")


# 512 x 512 x 1024: above RibFrac's thinnest CTs (about 700 slices of 512 x 512)
MAX_VOXELS = Limit("MEDCHALLENGE_MAX_VOXELS", 512 * 512 * 1024, "voxels")
# 8192 x 8192: above the largest radiograph detectors (43 cm at 0.1 mm) and any published figure; a 2-D image costs
# 10 to 17 bytes per pixel while it is decoded (16-bit PNG in the caption algorithm), one decode per core
MAX_PIXELS = Limit("MEDCHALLENGE_MAX_PIXELS", 8192 * 8192, "pixels")
MAX_TEXT_BYTES = Limit("MEDCHALLENGE_MAX_TEXT_BYTES", 64 << 20, "bytes")
MAX_TEXT_LINES = Limit("MEDCHALLENGE_MAX_TEXT_LINES", 1_000_000, "lines")
# one line of object-CXR's localization.csv at 1 MiB holds some 50,000 points: the limit on points per image
MAX_LINE_BYTES = Limit("MEDCHALLENGE_MAX_LINE_BYTES", 1 << 20, "bytes per line")
# grand-challenge's predictions.json nests 8 levels with a point-set socket value inside, a polygon set 10
MAX_JSON_DEPTH = Limit("MEDCHALLENGE_MAX_JSON_DEPTH", 64, "levels of nesting")

_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def check_image_size(where: object, size: tuple[int, ...], components: int = 1,
                     found: str = "the header declares") -> None:
    """Refuse an image (decoded, or a grid to be resampled to) of more pixels than MAX_PIXELS (a 2-D image: two
    axes, or a third of length 1; colour channels not counted) or voxels than MAX_VOXELS (a volume; times its
    components), before its memory is allocated: the one check of every reader and resampler (a decompression bomb,
    a header that lies, an absurd spacing)."""
    size = tuple(int(d) for d in size)
    planar = len(size) <= 2 or all(d == 1 for d in size[2:])
    limit, components = (MAX_PIXELS, 1) if planar else (MAX_VOXELS, components)
    count = math.prod(size) * components
    if count > limit.value():
        shape = " x ".join(str(d) for d in size) + (f" x {components} components" if components > 1 else "")
        raise limit.refuse(where, f"{found} {count} {limit.unit} ({shape})")


def check_text_size(path: Path) -> None:
    """Refuse a text or JSON input over MAX_TEXT_BYTES, and a line-based one (TEXT_SUFFIXES) over MAX_TEXT_LINES or
    with a line over MAX_LINE_BYTES, reading it as a stream (nothing kept) before any parser holds it in memory."""
    suffix = path.suffix.lower()
    if suffix not in (*TEXT_SUFFIXES, ".json"):
        return
    size = path.stat().st_size
    if size > MAX_TEXT_BYTES.value():
        raise MAX_TEXT_BYTES.refuse(path, f"{size} bytes")
    if suffix == ".json":
        return
    max_lines, max_line = MAX_TEXT_LINES.value(), MAX_LINE_BYTES.value()
    # line ends as Python's text mode sees them: \n, \r\n or \r (a \r\n counts once in the line count)
    newlines = returns = line_start = offset = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            buf = np.frombuffer(chunk, dtype=np.uint8)
            ends = np.flatnonzero((buf == 10) | (buf == 13)) + offset
            if len(ends):
                longest = int(np.max(np.diff(ends, prepend=line_start - 1)) - 1)
                if longest > max_line:
                    raise MAX_LINE_BYTES.refuse(path, f"a line of {longest} bytes")
                line_start = int(ends[-1]) + 1
            newlines += chunk.count(b"\n")
            returns += chunk.count(b"\r")
            offset += len(chunk)
            if offset - line_start > max_line:
                raise MAX_LINE_BYTES.refuse(path, f"a line of at least {offset - line_start} bytes")
            if max(newlines, returns) > max_lines:
                raise MAX_TEXT_LINES.refuse(path, f"at least {max(newlines, returns)} lines")
    lines = max(newlines, returns) + (offset > line_start)
    if lines > max_lines:
        raise MAX_TEXT_LINES.refuse(path, f"{lines} lines")


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON text, counted outside its strings without parsing it."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(accumulate(map(_BRACKET_STEP.__getitem__, brackets)), default=0)


def load_json(text: str, where: object, **options):
    """`json.loads(text, **options)`, refusing text nested deeper than MAX_JSON_DEPTH before the parser recurses
    into it (it recurses once per level: 100,000 levels end in a RecursionError); the one JSON parser of every
    outside input. A JSONDecodeError is raised as json.loads raises it."""
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH.value():
        raise MAX_JSON_DEPTH.refuse(where, f"JSON nested {depth} levels deep")
    try:
        return json.loads(text, **options)
    except RecursionError:  # a limit set above what the parser can recurse
        raise InputError(f"{where}: JSON nested {depth} levels deep, more than the parser can read "
                         f"(${MAX_JSON_DEPTH.variable} is set to {MAX_JSON_DEPTH.value()})") from None
