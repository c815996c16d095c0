"""Small helpers shared by the tests."""

from __future__ import annotations

import os
from pathlib import Path


def open_dir(path: Path) -> Path:
    """A folder the containers' uid 1000 can write."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o777)
    return path


def record_or_die(case_id: str) -> dict:
    """A per-case step whose worker process is killed (as by the OOM killer) on case "die"."""
    import signal

    if case_id == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    return {"case": case_id}
