"""What the evaluator command checks and keys on its inputs: no links or special files and no oversized text in a
submission (before any parser reads it), and digests of the whole input and ground-truth files, which tie --records
folders to the inputs they were computed from (input_fingerprint) and key caches of parsed inputs (input_state)."""

from __future__ import annotations

import argparse
import hashlib
import json
import stat
from pathlib import Path

from ..errors import InputError
from ..limits import check_text_size

RUNTIME_OPTIONS = {"input", "output", "ground_truth", "workers", "records", "shard", "no_progress", "no_plots",
                   "bootstrap", "bootstrap_seed", "bootstrap_level",
                   "no_plot", "images", "review"}


def _content_digest(path: Path) -> bytes:
    """The whole file's BLAKE2b digest, read in 1 MiB chunks (a changed byte anywhere changes it)."""
    digest = hashlib.blake2b(digest_size=32)
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.digest()


def _files(root: Path) -> list[Path]:
    return [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())


def input_fingerprint(args: argparse.Namespace) -> str:
    """What the records depend on: the input and ground-truth files (relative names and whole contents) and the
    evaluator options that change numbers. Independent of where the folders are, so shards on other machines agree."""
    digest = hashlib.sha256()
    for root in (args.input, args.ground_truth):
        for path in _files(root):
            name = path.relative_to(root) if path != root else path.name
            digest.update(f"{name}:{_content_digest(path).hex()}\n".encode())
    options = {k: str(v) for k, v in sorted(vars(args).items()) if k not in RUNTIME_OPTIONS}
    digest.update(json.dumps(options, sort_keys=True).encode())
    return digest.hexdigest()


def input_state(*roots: Path) -> str:
    """A key that changes whenever an input file does: every file's path and whole contents (mtimes can miss an
    edit within one clock tick). For caching parsed inputs within one process."""
    digest = hashlib.sha256()
    for root in roots:
        for path in _files(root):
            digest.update(f"{path}\0".encode() + _content_digest(path))
    return digest.hexdigest()


def check_regular_files(root: Path, what: str = "predictions") -> None:
    """Refuse what a submission could use to read files outside its folder or to mislead: symbolic links (to the
    ground truth, say), hard links, and anything that is not a regular file or folder (devices, FIFOs, sockets);
    and text files beyond the size limits (limits.check_text_size), before any parser reads them. The folder named
    on the command line may itself be a link (the user's own choice of path); what is in it may not."""
    if not root.exists() and not root.is_symlink():
        return  # the reader names what is missing
    if root.is_dir():
        root = root.resolve()
    paths = [root] if not root.is_dir() or root.is_symlink() else [root, *root.rglob("*")]
    for path in paths:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            raise InputError(f"{path}: a symbolic link in the {what}; only regular files are read")
        if stat.S_ISREG(info.st_mode):
            if info.st_nlink > 1:
                raise InputError(f"{path}: a hard link ({info.st_nlink} names) in the {what}; only files of their "
                                 "own are read")
            check_text_size(path)
        elif not stat.S_ISDIR(info.st_mode):
            raise InputError(f"{path}: not a regular file (a device, FIFO or socket) in the {what}")
