"""A submission's image: its digest (what identifies its jobs), and an uploaded `docker save` archive loaded into a
node's engine once, whatever the number of the phase's tasks that start there at the same time.

The archive is a participant's upload: it is verified when the phase is planned (phase.archive.verify_archive), and
the engine is given only what was verified, with no tags (phase.archive.write_load_stream): loading it creates or
moves no tag, whatever its manifest says."""

from __future__ import annotations

import fcntl
import logging
import re
import subprocess
import tempfile
import threading
from pathlib import Path

from ..errors import InputError
from .archive import ArchiveChanged, VerifiedImage, write_load_stream

log = logging.getLogger("medchallenge.phase")
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
LOAD_TIMEOUT_S = 3600


class EngineError(Exception):
    """The container engine failed for a reason outside the job (not installed, not answering, out of disk)."""


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


def _load(engine: str, archive: Path, image: VerifiedImage) -> None:
    """`ENGINE load` fed the verified image's stream; EngineError where it fails (the archive was verified: an
    engine that cannot load it is the engine's or the node's fault, or the archive was replaced since)."""
    with tempfile.TemporaryFile() as said:
        try:
            load = subprocess.Popen([engine, "load"], stdin=subprocess.PIPE, stdout=said, stderr=said)
        except FileNotFoundError:
            raise EngineError(f"{engine} is not installed (no `{engine}` on PATH)") from None
        timed_out = threading.Event()
        watchdog = threading.Timer(LOAD_TIMEOUT_S, lambda: (timed_out.set(), load.kill()))  # also one that stops
        watchdog.daemon = True
        watchdog.start()
        changed = None
        try:
            write_load_stream(archive, image, load.stdin)
        except ArchiveChanged as exc:
            changed = str(exc)
        except BrokenPipeError:
            pass  # the engine stopped reading: its status and its last line say why
        except OSError as exc:  # the archive is gone or unreadable
            changed = type(exc).__name__
        finally:
            try:
                load.stdin.close()
            except OSError:
                pass
            status = load.wait()
            watchdog.cancel()
        if timed_out.is_set():
            raise EngineError(f"`{engine} load` did not finish in {LOAD_TIMEOUT_S} s")
        said.seek(max(0, said.seek(0, 2) - 65536))  # its last lines
        last = (said.read().decode(errors="replace").strip().splitlines() or [f"status {status}"])[-1][:300]
    if changed is not None:
        raise EngineError(f"image archive {archive.name} changed since the phase was planned ({changed[:200]}); "
                          "`medchallenge phase run` again verifies it again")
    if status != 0:
        raise EngineError(f"image archive {archive.name}: `{engine} load` failed: {last}")


def ensure_loaded(engine: str, archive: Path, image: VerifiedImage) -> None:
    """Load the verified `image` of `archive` into this node's engine unless it has it already; one loader per node
    and digest (a lock file in the node's temporary folder), the others wait and find it loaded."""
    digest = image.digest
    if local_digest(engine, digest) is not None:
        return
    lock = Path(tempfile.gettempdir()) / f"medchallenge-image-{digest.removeprefix('sha256:')}.lock"
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        if local_digest(engine, digest) is not None:
            return
        log.info("loading image archive %s into %s", archive.name, engine)
        _load(engine, archive, image)
        if local_digest(engine, digest) is None:
            raise EngineError(f"image archive {archive.name}: `{engine} load` did not give image {digest[:19]}")
