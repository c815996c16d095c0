"""A submission's image: its digest (what identifies its jobs), and an uploaded `docker save` archive loaded into a
node's engine once, whatever the number of the phase's tasks that start there at the same time.

The archive is a participant's upload: only its `manifest.json` is read here (size-checked before it is parsed),
and the engine itself loads the image."""

from __future__ import annotations

import fcntl
import json
import re
import subprocess
import tarfile
import tempfile
from pathlib import Path

from ..errors import InputError

MAX_MANIFEST_BYTES = 1 << 20
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
CONFIG = re.compile(r"(?:blobs/sha256/)?([0-9a-f]{64})(?:\.json)?")
LOAD_TIMEOUT_S = 3600


class EngineError(Exception):
    """The container engine failed for a reason outside the job (not installed, not answering, out of disk)."""


def archive_digest(archive: Path) -> str:
    """The image ID (`sha256:` of its configuration) of a single-image `docker save` archive, from its
    manifest.json (Docker's legacy layout and the OCI layout Docker 25+ writes both carry it)."""
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                if member.name.lstrip("./") != "manifest.json":
                    continue
                if not member.isfile() or member.size > MAX_MANIFEST_BYTES:
                    raise InputError(f"image archive {archive.name}: manifest.json is not a small regular file")
                manifest = json.loads(tar.extractfile(member).read())
                break
            else:
                raise InputError(f"image archive {archive.name}: no manifest.json (not made by `docker save`)")
    except (tarfile.TarError, EOFError, OSError, ValueError, UnicodeDecodeError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"image archive {archive.name}: not a readable `docker save` archive "
                         f"({type(exc).__name__})") from None
    if not isinstance(manifest, list) or len(manifest) != 1 or not isinstance(manifest[0], dict):
        raise InputError(f"image archive {archive.name}: holds {len(manifest) if isinstance(manifest, list) else 0} "
                         "images; a submission is one image")
    found = CONFIG.fullmatch(str(manifest[0].get("Config", "")))
    if not found:
        raise InputError(f"image archive {archive.name}: its manifest names no image configuration")
    return f"sha256:{found.group(1)}"


def _engine(engine: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([engine, *args], capture_output=True, text=True, timeout=timeout, errors="replace")
    except FileNotFoundError:
        raise EngineError(f"{engine} is not installed (no `{engine}` on PATH)") from None
    except subprocess.TimeoutExpired:
        raise EngineError(f"`{engine} {args[0]} {args[1]}` did not answer in {timeout:g} s") from None


def local_digest(engine: str, reference: str) -> str | None:
    """The ID of `reference` (a tag or an ID) in this machine's engine, or None where it has no such image."""
    result = _engine(engine, "image", "inspect", "--format", "{{.Id}}", reference)
    digest = result.stdout.strip()
    if result.returncode != 0 or not digest:
        return None
    digest = digest if digest.startswith("sha256:") else f"sha256:{digest}"  # podman prints the bare hex
    return digest if DIGEST.fullmatch(digest) else None


def tag_digest(engine: str, reference: str) -> str:
    """The ID of a tagged image this machine's engine has (the tag may be moved later: the ID is what ran)."""
    digest = local_digest(engine, reference)
    if digest is None:
        raise InputError(f"image {reference}: not found by this machine's {engine} (load or pull it, or give the "
                         "`docker save` archive)")
    return digest


def ensure_loaded(engine: str, archive: Path, digest: str) -> None:
    """Load `archive` into this node's engine unless it has `digest` already; one loader per node and digest (a
    lock file in the node's temporary folder), the others wait and find it loaded."""
    if local_digest(engine, digest) is not None:
        return
    lock = Path(tempfile.gettempdir()) / f"medchallenge-image-{digest.removeprefix('sha256:')}.lock"
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        if local_digest(engine, digest) is not None:
            return
        loaded = _engine(engine, "load", "--input", str(archive), timeout=LOAD_TIMEOUT_S)
        if loaded.returncode != 0:
            last = (loaded.stderr.strip().splitlines() or [f"status {loaded.returncode}"])[-1][:300]
            raise InputError(f"image archive {archive.name}: `{engine} load` failed: {last}")
        if local_digest(engine, digest) is None:
            raise InputError(f"image archive {archive.name}: `{engine} load` did not give image {digest[:19]} that "
                             "its manifest names")
