"""Two-stage evaluation (as picai_eval does): per-case records, then one aggregate step.

Stage 1 turns each case into a plain JSON-serialisable record; records can be cached in a folder, so a run
resumes after a failure and shards (`--shard K/N`) can run on different machines. Stage 2 aggregates all records.
The evaluator command (medchallenge.evaluator) runs both stages.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import stat
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from .contract import name_list
from .errors import InputError
from .io import write_json_atomic, write_text_atomic
from .limits import check_text_size


def parse_shard(text: str | None, records: Path | None) -> tuple[int, int] | None:
    """'2/4' -> (2, 4); a shard needs a records folder, where the shards' records meet."""
    if text is None:
        return None
    match = re.fullmatch(r"(\d+)/(\d+)", text)
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise InputError(f"--shard {text!r}: expected K/N with 1 <= K <= N")
    if records is None:
        raise InputError("--shard needs --records (the folder where the shards' per-case records meet)")
    return int(match[1]), int(match[2])


RUNTIME_OPTIONS = {"input", "output", "ground_truth", "workers", "records", "shard", "no_progress", "no_plots",
                   "bootstrap", "bootstrap_seed", "bootstrap_level",
                   "no_plot", "images", "review"}
FINGERPRINT_FILE = ".inputs-fingerprint"  # not *.json: a folder of records is its *.json files


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
    and text files beyond the size limits (limits.check_text_size), before any parser reads them."""
    if not root.exists() and not root.is_symlink():
        return  # the reader names what is missing
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


def _check_fingerprint(records: Path, fingerprint: str) -> None:
    """Records of other inputs or options must not be reused: refuse a records folder that holds them."""
    path = records / FINGERPRINT_FILE
    if path.is_file():
        if path.read_text().strip() != fingerprint:
            raise InputError(f"{records}: holds records of other inputs or options; use an empty records folder")
    else:
        write_text_atomic(path, fingerprint + "\n")


def _record_path(records: Path, case_id: str) -> Path:
    """One file per case; ids changed by the file-name sanitising get a hash so that no two ids share a file."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", case_id)
    if name != case_id or name.startswith("."):
        name += "-" + hashlib.sha256(case_id.encode()).hexdigest()[:10]
    return records / (name + ".json")


def compute_records(
    case_ids: Sequence[str],
    per_case: Callable[[str], dict],
    *,
    workers: int = 0,
    records: Path | None = None,
    shard: tuple[int, int] | None = None,
    progress: bool = True,
    description: str = "cases",
    fingerprint: str | None = None,
) -> dict[str, dict]:
    """Stage 1: `per_case(case_id)` for every case (in parallel when workers != 1), reusing cached records.

    `per_case` must be picklable (a module-level function or a functools.partial of one). With `records`, a
    `fingerprint` (input_fingerprint) makes sure stored records come from the same inputs and options.
    """
    if records is not None and fingerprint is not None:
        _check_fingerprint(records, fingerprint)
    selected = list(case_ids)
    if shard is not None:
        k, n = shard
        selected = selected[k - 1 :: n]
    results: dict[str, dict] = {}
    todo = []
    for case_id in selected:
        cached = _record_path(records, case_id) if records else None
        if cached is not None and cached.is_file():
            results[case_id] = json.loads(cached.read_text())
        else:
            todo.append(case_id)
    workers = workers or os.cpu_count() or 1
    workers = min(workers, len(todo)) or 1

    def store(case_id: str, record: dict) -> None:
        results[case_id] = record
        if records is not None:
            write_json_atomic(_record_path(records, case_id), record, indent=None)

    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc=description, unit="case", disable=None)
    if workers == 1:
        for case_id in todo:
            store(case_id, per_case(case_id))
            if bar:
                bar.update()
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            # a few chunks of cases per worker: a task per case would cost more than a cheap case itself
            chunk = -(-len(todo) // (4 * workers))
            computed = pool.map(per_case, todo, chunksize=chunk)
            try:
                for case_id, record in zip(todo, computed):
                    store(case_id, record)
                    if bar:
                        bar.update()
            except BrokenProcessPool:
                unfinished = [case_id for case_id in todo if case_id not in results]
                raise InputError(f"a worker process died (killed, e.g. out of memory) while scoring one of "
                                 f"{name_list(unfinished[:chunk * workers])}; rerun with --workers 1 to see which"
                                 + (" (finished records are kept in --records)" if records else "")) from None
    if bar:
        bar.close()
    return {case_id: results[case_id] for case_id in selected}
