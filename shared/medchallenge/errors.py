"""One clear line for bad input, and a non-zero exit instead of a traceback."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., int | None])


class InputError(Exception):
    """Bad input: the message names the file, the line or case, and what is wrong."""


def note_or_refuse(message: str, strict: bool, scored_as: str) -> list[str]:
    """Something the official code accepts but the challenge's rules forbid: the `meta.notes` line saying how it was
    scored, or with `--strict` the error."""
    if strict:
        raise InputError(f"{message}; --strict refuses them")
    return [f"{message}: {scored_as}"]


def report_errors(main: F) -> F:
    """Wrap an entry point: an InputError becomes one line on stderr and exit status 1."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except InputError as exc:
            logging.getLogger("medchallenge").debug("input error", exc_info=True)
            print(f"error: {exc}", file=sys.stderr)
            return 1
        except MemoryError:
            print("error: out of memory (an input far larger than the challenge's data, or too little memory for "
                  "this container)", file=sys.stderr)
            return 1

    return wrapper  # type: ignore[return-value]
