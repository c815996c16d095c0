"""Logging for the entry points: progress on stdout, warnings and errors on stderr.

grand-challenge shows the last stderr line of a failed job as its error, so stderr carries only what needs
attention. The level comes from `LOG_LEVEL` (grand-challenge sets it), default INFO.
"""

from __future__ import annotations

import logging
import os
import sys


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
