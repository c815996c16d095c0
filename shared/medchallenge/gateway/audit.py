"""The audit log: one JSON line per association and per study (who, from where, what, when, result), appended to a
file the gateway never rewrites."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class AuditLog:
    """Appends records to `path` (opened in append mode for every record, fsync'd: a crash loses no line before
    it, and no record is ever changed)."""

    def __init__(self, path: Path):
        self.path = path
        self.lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, kind: str, **fields) -> None:
        line = json.dumps({"time": utc_now(), "event": kind, **fields}, ensure_ascii=True, sort_keys=True,
                          default=str)
        with self.lock, open(self.path, "a", encoding="ascii") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())
