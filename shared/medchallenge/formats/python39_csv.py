"""Lines for `csv.reader` as Python 3.9's csv module takes them: a line holding a NUL character is refused.

Python 3.9's reader raises `_csv.Error: line contains NUL` on such a line; Python 3.11 reads the NUL as an ordinary
character. The official ImageCLEFmed Caption and TB caverns evaluators ran on Python 3.9, so they could not read such
a file: wrapping the file in `lines` keeps the project from scoring it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import InputError


def lines(handle: Iterable[str], path: Path) -> Iterator[str]:
    """The lines of `handle`, stopping with an InputError naming the file and line at the first one with a NUL."""
    for number, line in enumerate(handle, start=1):
        if "\x00" in line:
            raise InputError(f"{path}: line {number}: line contains NUL (a NUL byte), which Python 3.9's csv module, "
                             "the official evaluator's, cannot read")
        yield line
