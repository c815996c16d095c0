"""`int()` and `float()` of participant text as the official interpreters read it, on whichever interpreter runs.

CPython parses a number from text by first turning each character that its Unicode database calls a decimal digit
into the ASCII digit and each whitespace character into a space, then reading ASCII. Newer interpreters know more
digits: Python 3.11 (Unicode 14.0) reads the Tangsa digits U+16AC0..U+16AC9 that Python 3.9 (13.0), the TB caverns
evaluator's interpreter, refuses; Python 3.9 reads the segmented digits U+1FBF0..U+1FBF9, Nyiakeng Puachue Hmong
U+1E140.. and Wancho U+1E2F0.. that Python 3.7 (11.0), object-CXR's `froc.py`'s, refuses. Each official interpreter
has one `OfficialNumbers` here, keyed by its Unicode version: the same first step done with that interpreter's own
digits and whitespace (medchallenge/official/data/decimal_digits.json, probed from the interpreter itself by
tools/make_decimal_digits_table.py), then the running interpreter's ASCII parsing, which has not changed since 3.7.
A character that is neither (nor ASCII) makes the text no number, as it does in every CPython. ASCII text (nearly
all of it) goes straight to the built-in. tests/reference checks every code point and a fuzz of number-like text
against Python 3.9.18 and 3.7.16, on each interpreter from 3.10 to 3.13.
"""

from __future__ import annotations

from .unicode_tables import code_points, load

DATA_FILE = "decimal_digits.json"


class OfficialNumbers:
    """`int()` and `float()` of one official interpreter, given by its Unicode version (e.g. "13.0.0")."""

    def __init__(self, unidata_version: str) -> None:
        entry = load(DATA_FILE)["interpreters"][unidata_version]
        self.python = entry["python"]
        self._to_ascii = {cp: digit for digit, runs in entry["digits"].items() for cp in code_points(runs)}
        self._to_ascii.update(dict.fromkeys(code_points(entry["space"]), " "))

    def _ascii(self, text: str, kind: str) -> str:
        if text.isascii():
            return text
        translated = text.translate(self._to_ascii)
        if not translated.isascii():
            raise ValueError(f"could not convert string to {kind} as Python {self.python} does: {text!r}")
        return translated

    def int(self, text: str) -> int:
        """`int(text)` (base 10) as the official interpreter computes it; ValueError where it raises one."""
        return int(self._ascii(text, "int"))

    def float(self, text: str) -> float:
        """`float(text)` as the official interpreter computes it; ValueError where it raises one."""
        return float(self._ascii(text, "float"))


PYTHON_3_9 = OfficialNumbers("13.0.0")
"""Python 3.9: the TB caverns evaluator's interpreter."""
PYTHON_3_7 = OfficialNumbers("11.0.0")
"""Python 3.7: object-CXR's `froc.py`."""
