"""Small helpers shared by the tests."""

from __future__ import annotations

import os
from pathlib import Path


def open_dir(path: Path) -> Path:
    """A folder the containers' uid 1000 can write."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o777)
    return path
