"""Text operations as Python 3.9 performs them (Unicode 13.0), on whichever interpreter runs the project.

The ImageCLEFmed Caption 2021/2022 evaluators ran on Python 3.9; Python 3.11 has Unicode 14.0, where 40 code points
change case mapping, about 300 change how `str.lower()` reads the context of a capital sigma, and 525 become word
characters for `re` (U+A7C0 and U+A7C1 are one concept after `upper()` in 3.11, two in 3.9; a Unicode 14 letter
after "cannot" stops NLTK's split). Every Unicode-dependent step of the caption scoring goes through this module:
`lower`, `upper`, `split` and `strip` (whitespace), and the regular-expression pieces `WORD`, `SPACE` and
`ignorecase` (explicit classes instead of `\\w`, `\\s` and `(?i)`), with `builtin_regex_exact` telling where a pattern
in the running interpreter's classes matches as Python 3.9's would.

The data, medchallenge/official/data/unicode13.json (tools/make_unicode13_table.py, run with Python 3.9.18 and each
runtime), holds Python 3.9's behaviour only where an interpreter of a given Unicode version differs, keyed by that
version; the running interpreter's own behaviour is used everywhere else, so strings without an affected character take
the built-in (fast) path: ASCII text at once (`str.isascii()` is O(1)), other text after one search for them.
tests/reference compares every code point with Python 3.9.18, regenerates the running interpreter's entry, and
fuzzes the whole caption pipeline against Python 3.9.
"""

from __future__ import annotations

import itertools
import re
import unicodedata

from .unicode_tables import code_points, load

DATA_FILE = "unicode13.json"
CAPITAL_SIGMA, SMALL_SIGMA, FINAL_SIGMA = "\u03a3", "\u03c3", "\u03c2"


def _load_entry() -> tuple[dict, dict]:
    """The table's reference part and its entry for the running interpreter's Unicode version."""
    table = load(DATA_FILE)
    entry = table["runtimes"].get(unicodedata.unidata_version)
    if entry is None:
        raise RuntimeError(f"medchallenge/official/data/{DATA_FILE} has no entry for Unicode "
                           f"{unicodedata.unidata_version} (this interpreter); the caption evaluators cannot reproduce "
                           f"Python 3.9's text handling here. Add it with tools/make_unicode13_table.py (tabulated: "
                           f"{', '.join(sorted(table['runtimes']))})")
    return table["reference"], entry


def _char_class(points) -> str:
    """A regex character class of exactly these code points, in runs ('' when there are none)."""
    runs: list[list[int]] = []
    for cp in sorted(set(points)):
        if runs and runs[-1][1] == cp - 1:
            runs[-1][1] = cp
        else:
            runs.append([cp, cp])
    body = "".join(f"\\U{first:08x}" if first == last else f"\\U{first:08x}-\\U{last:08x}" for first, last in runs)
    return f"[{body}]" if body else ""


class _Changed:
    """The characters where the running interpreter differs from Python 3.9 for one operation."""

    def __init__(self, points) -> None:
        points = sorted(set(points))
        self.first = chr(points[0]) if points else None
        self.pattern = re.compile(f"({_char_class(points)})") if points else None  # capturing: split keeps them

    def found(self, text: str) -> bool:
        """Whether `text` holds one of them (a scan for the text's largest character first: cheap, and enough for
        most text, e.g. Latin with accents)."""
        return self.first is not None and text != "" and max(text) >= self.first \
            and self.pattern.search(text) is not None

    def mapped(self, text: str, table: dict[str, str], builtin) -> str:
        """`builtin` (a context-free per-character mapping) on the text between these characters, `table` on them."""
        return "".join(table[part] if odd else builtin(part) for odd, part in
                       zip(itertools.cycle((False, True)), self.pattern.split(text)))


def _corrected(builtin: str, diff: dict[str, list[str]]) -> str:
    """A one-character regex: the running `builtin` class (e.g. \\w) with Python 3.9's value where they differ."""
    removed, added = _char_class(code_points(diff["false"])), _char_class(code_points(diff["true"]))
    pattern = f"(?!{removed}){builtin}" if removed else builtin
    return f"(?:{pattern}|{added})" if added else f"(?:{pattern})"


_REFERENCE, _ENTRY = _load_entry()
_LOWER = {chr(int(cp, 16)): value for cp, value in _ENTRY["lower"].items()}
_UPPER = {chr(int(cp, 16)): value for cp, value in _ENTRY["upper"].items()}
_SIGMA_CLASS = {chr(cp): kind for kind, ranges in _ENTRY["sigma"].items() for cp in code_points(ranges)}
_SPACE = {chr(cp): value == "true" for value, ranges in _ENTRY["space"].items() for cp in code_points(ranges)}
_LOWER_CHANGED = _Changed(map(ord, _LOWER))
_UPPER_CHANGED = _Changed(map(ord, _UPPER))
_SIGMA_CHANGED = _Changed(map(ord, _SIGMA_CLASS))
_SPACE_CHANGED = _Changed(map(ord, _SPACE))
_REGEX_CHANGED = _Changed([*code_points(_ENTRY["word"]["true"]), *code_points(_ENTRY["word"]["false"]),
                          *code_points(_ENTRY["re_space"]["true"]), *code_points(_ENTRY["re_space"]["false"])])
_IGNORECASE_AS_PYTHON39 = not _ENTRY["ignorecase"]

WORD = _corrected(r"\w", _ENTRY["word"])
"""One character that Python 3.9's `re` matches with `\\w` (a regex fragment)."""
SPACE = _corrected(r"\s", _ENTRY["re_space"])
"""One character that Python 3.9's `re` matches with `\\s` (a regex fragment)."""
_WHITESPACE_RUN = re.compile(_corrected(r"\s", _ENTRY["space"]) + "+")  # `str.isspace()`, not re's \s


def builtin_regex_exact(text: str) -> bool:
    """Whether a pattern in the running interpreter's `\\w`, `\\W`, `\\b`, `\\s` and `(?i)` (ASCII letters) matches
    `text` exactly as Python 3.9 would: the text is ASCII, or none of its characters is classed differently and `(?i)`
    treats the ASCII letters as Python 3.9 did."""
    return text.isascii() or (_IGNORECASE_AS_PYTHON39 and not _REGEX_CHANGED.found(text))


def ignorecase(literal: str) -> str:
    """A regex matching `literal` as Python 3.9's `re` matches it under `(?i)`: each ASCII letter becomes the class
    of characters it matches there (e.g. k -> [Kk\\u212a]); other characters are escaped."""
    classes = _REFERENCE["ignorecase"]
    return "".join(_char_class(map(ord, classes[ch])) if ch in classes else re.escape(ch) for ch in literal.lower())


def lower(text: str) -> str:
    """`text.lower()` as in Python 3.9: full case mapping, U+03A3 final or not by Unicode 13's cased and
    case-ignorable characters."""
    if text.isascii():
        return text.lower()
    sigma_as_builtin = CAPITAL_SIGMA not in text or not _SIGMA_CHANGED.found(text)
    if sigma_as_builtin and not _LOWER_CHANGED.found(text):
        return text.lower()
    if CAPITAL_SIGMA not in text:  # lower() is per character then
        return _LOWER_CHANGED.mapped(text, _LOWER, str.lower)
    return "".join(_final_sigma(text, i) if ch == CAPITAL_SIGMA else _LOWER.get(ch) or ch.lower()
                   for i, ch in enumerate(text))


def _sigma_class(ch: str) -> str:
    """"cased" (cased, not case-ignorable), "ignorable" (case-ignorable) or "other", as Python 3.9's lower() sees
    `ch` (the running interpreter's probed through the Final_Sigma rule, unless the table says otherwise)."""
    kind = _SIGMA_CLASS.get(ch)
    if kind is not None:
        return kind
    if ("A" + CAPITAL_SIGMA + ch).lower()[1] == SMALL_SIGMA:
        return "cased"
    return "ignorable" if ("A" + CAPITAL_SIGMA + ch + "A").lower()[1] == SMALL_SIGMA else "other"


def _final_sigma(text: str, i: int) -> str:
    """CPython's handle_capital_sigma: final when a cased character precedes (case-ignorables skipped) and none
    follows (case-ignorables skipped)."""
    j = i - 1
    while j >= 0 and _sigma_class(text[j]) == "ignorable":
        j -= 1
    final = j >= 0 and _sigma_class(text[j]) == "cased"
    if final:
        j = i + 1
        while j < len(text) and _sigma_class(text[j]) == "ignorable":
            j += 1
        final = j == len(text) or _sigma_class(text[j]) != "cased"
    return FINAL_SIGMA if final else SMALL_SIGMA


def upper(text: str) -> str:
    """`text.upper()` as in Python 3.9 (full case mapping, no context)."""
    if text.isascii() or not _UPPER_CHANGED.found(text):
        return text.upper()
    return _UPPER_CHANGED.mapped(text, _UPPER, str.upper)


def split(text: str) -> list[str]:
    """`text.split()` (no separator) with Python 3.9's whitespace."""
    if text.isascii() or not _SPACE_CHANGED.found(text):
        return text.split()
    return [part for part in _WHITESPACE_RUN.split(text) if part]


def strip(text: str) -> str:
    """`text.strip()` (no argument) with Python 3.9's whitespace."""
    if text.isascii() or not _SPACE_CHANGED.found(text):
        return text.strip()
    start, end = 0, len(text)
    while start < end and _is_space(text[start]):
        start += 1
    while end > start and _is_space(text[end - 1]):
        end -= 1
    return text[start:end]


def _is_space(ch: str) -> bool:
    value = _SPACE.get(ch)
    return ch.isspace() if value is None else value
