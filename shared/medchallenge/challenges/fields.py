"""A definition file's tables read as outside input: each key taken once with its type and bounds checked, every
key not taken refused, each problem one InputError line naming the file and the key (`FILE: [leaderboard]
score_jsonpath: ...`). The file's own text is never echoed beyond a short, cleaned excerpt of a key."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from ..errors import InputError
from ..jobs.runner import printable

T = TypeVar("T")
KEY_CHARACTERS = 40  # of a key the file names, as an error line shows it
SLUG = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")  # grand-challenge's slugs (Django's slugify: lower case, at most 64)
JSON_PATH = re.compile(r"[^.\s\[\]]+(\.[^.\s\[\]]+)*")  # dotted keys, as grand-challenge's leaderboard paths are
MAX_ITEMS = 256  # sockets, columns, patterns of one list
MAX_TEXT = 512  # characters of one string value
_MISSING = object()


def shown_key(key: object) -> str:
    return printable(str(key), KEY_CHARACTERS) or "''"


class Table:
    """One table of a definition file: `take` each key, then `finish` (unknown keys refused)."""

    def __init__(self, data: object, source: Path, where: str) -> None:
        self.source, self.where = source, where
        if not isinstance(data, dict):
            raise self.error("", "expected a table")
        self.data = data
        self.taken: set[str] = set()

    def error(self, key: str, problem: str) -> InputError:
        place = " ".join(part for part in (self.where, shown_key(key) if key else "") if part)
        return InputError(f"{self.source}: {place}: {problem}")

    def take(self, key: str, kind: type | tuple[type, ...], default: Any = _MISSING) -> Any:
        """The value of `key`, of `kind` (bool is no number here); `default` where it is absent, else an error."""
        self.taken.add(key)
        if key not in self.data:
            if default is _MISSING:
                raise self.error(key, "required")
            return default
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            names = " or ".join({str: "a string", int: "a whole number", float: "a number", bool: "true or false",
                                 list: "a list", dict: "a table", type(None): "null"}[k] for k in kinds)
            raise self.error(key, f"expected {names}")
        if isinstance(value, str) and (len(value) > MAX_TEXT or not value.strip()):
            raise self.error(key, f"expected a non-empty string of at most {MAX_TEXT} characters")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.error(key, "expected a finite number")
        if isinstance(value, list) and len(value) > MAX_ITEMS:
            raise self.error(key, f"{len(value)} items, at most {MAX_ITEMS}")
        return value

    def choice(self, key: str, choices: dict[str, T], default: Any = _MISSING) -> T:
        """One of `choices`' keys, mapped to its value."""
        if key not in self.data and default is not _MISSING:
            self.taken.add(key)
            return default
        value = self.take(key, str)
        if value not in choices:
            raise self.error(key, f"expected one of {', '.join(dict.fromkeys(choices))}")
        return choices[value]

    def number(self, key: str, low: float, high: float, default: Any = _MISSING, whole: bool = False) -> Any:
        value = self.take(key, int if whole else (int, float), default)
        if key in self.data and not low <= value <= high:
            raise self.error(key, f"expected {low:g} to {high:g}")
        return value

    def slug(self, key: str) -> str:
        value = self.take(key, str)
        if not SLUG.fullmatch(value):
            raise self.error(key, "expected a slug: lower-case letters, digits, - and _, at most 64 characters")
        return value

    def json_path(self, key: str, default: Any = _MISSING) -> Any:
        value = self.take(key, str, default)
        if key in self.data and not JSON_PATH.fullmatch(value):
            raise self.error(key, "expected a dotted path of keys into metrics.json (aggregates.dice.mean)")
        return value

    def tables(self, key: str, default: Any = _MISSING) -> list[Table]:
        """A list of tables (`[[key]]`), each read with its index in the error lines."""
        items = self.take(key, list, default)
        return [Table(item, self.source, f"{self.where} {key}[{index}]".strip()) for index, item in enumerate(items)]

    def table(self, key: str, required: bool = True) -> Table:
        return Table(self.take(key, dict, _MISSING if required else {}), self.source, f"[{key}]")

    def strings(self, key: str, check: Callable[[str], str | None] | None = None) -> tuple[str, ...]:
        """A non-empty list of distinct strings, each passing `check` (its problem, or None)."""
        items = self.take(key, list)
        if not items or not all(isinstance(item, str) and 0 < len(item) <= MAX_TEXT for item in items):
            raise self.error(key, f"expected a non-empty list of strings of at most {MAX_TEXT} characters")
        if len(set(items)) != len(items):
            raise self.error(key, "the same entry twice")
        for item in items:
            problem = check(item) if check else None
            if problem:
                raise self.error(key, f"{printable(item, KEY_CHARACTERS)}: {problem}")
        return tuple(items)

    def finish(self) -> None:
        unknown = sorted(set(map(str, self.data)) - self.taken)
        if unknown:
            raise self.error(unknown[0], "unknown key (a misspelling? docs/own-challenge.md lists every key)")


def relative_pattern_problem(pattern: str) -> str | None:
    """Why `pattern` is not a relative path or glob inside its folder (absolute, `..`, a backslash, empty parts)."""
    path = PurePosixPath(pattern)
    if path.is_absolute() or "\\" in pattern or any(part in ("..", "") for part in pattern.split("/")):
        return "expected a relative path inside its folder (no leading /, no .., no \\)"
    return None


def file_inside(source: Path, key_table: Table, key: str) -> Path | None:
    """The file `key` names, relative to the definition's folder and inside it (links resolved), or None where the
    key is absent; it must exist."""
    value = key_table.take(key, str, None)
    if value is None:
        return None
    problem = relative_pattern_problem(value)
    folder = source.parent.resolve()
    target = (folder / value).resolve()
    if problem or not target.is_relative_to(folder):
        raise key_table.error(key, "expected a path relative to the definition's folder, inside it")
    if not target.is_file():
        raise key_table.error(key, f"{printable(value, KEY_CHARACTERS)}: not found beside the definition")
    return target


def distinct(values: Sequence[str], table: Table, key: str, what: str) -> None:
    """Each of `values` once, else an error naming the first repeated."""
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise table.error(key, f"{what} {printable(value, KEY_CHARACTERS)} declared twice")
        seen.add(value)
