"""Content hashes of a phase's inputs (cases, archives, models), remembered by (path, size, mtime) in OUT so that a
rerun does not read gigabytes of archives again."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from ..io import write_json_atomic

CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_json(value: object) -> str:
    """The hash of a JSON value written canonically (sorted keys, no spaces)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class HashCache:
    """Facts computed from a file's bytes (its sha256, an archive's image digest), kept while its size and
    modification time stay the same."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.entries: dict[str, dict] = json.loads(path.read_text())
        except (OSError, ValueError):
            self.entries = {}
        self.changed = False

    def get(self, file: Path, kind: str, compute: Callable[[Path], str]) -> str:
        stat = file.stat()
        key = f"{kind}:{file.resolve()}"
        stamp = [stat.st_size, stat.st_mtime_ns]
        entry = self.entries.get(key)
        if isinstance(entry, dict) and entry.get("stamp") == stamp and isinstance(entry.get("value"), str):
            return entry["value"]
        value = compute(file)
        self.entries[key] = {"stamp": stamp, "value": value}
        self.changed = True
        return value

    def save(self) -> None:
        if self.changed:
            write_json_atomic(self.path, self.entries, indent=None)
            self.changed = False
