"""Logging for the entry points: progress on stdout, warnings and errors on stderr.

grand-challenge shows the last stderr line of a failed job as its error, so stderr carries only what needs
attention. The level comes from `LOG_LEVEL` (grand-challenge sets it), default INFO.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback


def setup_logging() -> None:
    """Configure the root logger once (a no-op when it already has handlers, as logging.basicConfig is)."""
    root = logging.getLogger()
    if root.handlers:
        return
    formatter = logging.Formatter("%(message)s")
    progress = logging.StreamHandler(sys.stdout)
    progress.addFilter(lambda record: record.levelno < logging.WARNING)
    problems = logging.StreamHandler(sys.stderr)
    problems.setLevel(logging.WARNING)
    for handler in (progress, problems):
        handler.setFormatter(formatter)
        root.addHandler(handler)
    root.setLevel(os.environ.get("LOG_LEVEL", "INFO").upper())
    logging.getLogger("highdicom").setLevel(logging.WARNING)  # it logs every attribute it copies at INFO


def escape(text: str) -> str:
    """Text from outside (a DICOM header, a peer's AE title) made safe for one log line: every character that is not
    printable (newlines, NUL, escape sequences, Unicode separators and format characters) written as its escape, so
    that no outside text can start a line of its own or hide what follows."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class OneLineRecords(logging.Filter):
    """A handler filter: a record's text escaped to one line. A library's exception (pynetdicom puts what a peer
    sent into its exceptions, and logs one per malformed request) becomes its type and escaped message at the end of
    the line; the project's own tracebacks keep their frames, their last line escaped."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            kind, error, trace = record.exc_info
            told = escape(f"{kind.__name__}: {error}")
            if record.name.startswith("medchallenge"):
                record.exc_text = "Traceback (most recent call last):\n" + "".join(traceback.format_tb(trace)) + told
            else:
                message, record.exc_info, record.exc_text = f"{message} ({told})", None, None
        record.msg, record.args = escape(message), None
        return True


def log_one_line_per_record() -> None:
    """For a server whose log lines carry outside text (the gateway): OneLineRecords on every root handler."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, OneLineRecords) for f in handler.filters):
            handler.addFilter(OneLineRecords())
