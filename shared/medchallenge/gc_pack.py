"""`make gc-pack`: what an organiser uploads to grand-challenge besides the images.

Per challenge, under `OUT/<challenge>/`:
- `ground_truth.tar.gz`: the ground-truth folder's files at the top of the archive, as grand-challenge extracts a
  phase's ground truth into `/opt/ml/input/data/ground_truth/` (with tarfile's "data" filter: no links, no
  absolute or parent paths, so none are packed);
- `model.tar.gz` (challenges with an algorithm image): the model folder's files, extracted into `/opt/ml/model/`
  (the algorithm prefers a model found there to the one baked into its image);
- `sockets.json`: the sockets (slug, kind, super kind, relative path) to request for the algorithm interface, and
  the ground-truth files the evaluator reads.

The archives are reproducible: sorted members, owner 0, modes 0644/0755, time stamps 0.
"""

from __future__ import annotations

import argparse
import gzip
import io
import logging
import sys
import tarfile
from pathlib import Path

from .errors import InputError, report_errors
from .io import atomic_output, write_json_atomic
from .logs import setup_logging
from .sockets import INTERFACES

log = logging.getLogger("medchallenge.gc_pack")


def archive_members(folder: Path) -> list[Path]:
    """Every file and folder below `folder`, sorted; a link or special file is an error (GC would drop it)."""
    if not folder.is_dir():
        raise InputError(f"{folder}: not a folder")
    members = []
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            raise InputError(f"{path}: a link or special file; grand-challenge extracts regular files and folders "
                             "only")
        members.append(path)
    return members


def reproducible_tar_gz(folder: Path) -> bytes:
    """`folder`'s content as a .tar.gz whose bytes depend only on the file names and contents."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in archive_members(folder):
            info = tarfile.TarInfo(path.relative_to(folder).as_posix())
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if path.is_dir():
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = path.stat().st_size, 0o644
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    return packed.getvalue()


def check_ground_truth(challenge: str, folder: Path) -> None:
    """Every ground-truth file the challenge's evaluator reads is in `folder`."""
    for pattern in INTERFACES[challenge].ground_truth:
        if not any(folder.glob(pattern)):
            raise InputError(f"{folder}: no {pattern}; the {challenge} evaluator reads "
                             f"{', '.join(INTERFACES[challenge].ground_truth)} from its ground truth")


def pack(challenge: str, ground_truth: Path, model: Path | None, out: Path) -> Path:
    """Write the challenge's ground-truth tarball, model tarball (if `model`) and socket list under out/challenge."""
    target = out / challenge
    check_ground_truth(challenge, ground_truth)
    archives = {"ground_truth.tar.gz": ground_truth, **({"model.tar.gz": model} if model is not None else {})}
    for name, folder in archives.items():
        content = reproducible_tar_gz(folder)
        with atomic_output(target / name, "wb") as handle:
            handle.write(content)
    write_json_atomic(target / "sockets.json", {"challenge": challenge, **INTERFACES[challenge].as_json()})
    log.info("%s: %s", challenge, ", ".join(sorted(p.name for p in target.iterdir())))
    return target


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m medchallenge.gc_pack", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("challenge", choices=sorted(INTERFACES))
    parser.add_argument("--ground-truth", type=Path, required=True, help="the folder the evaluator reads")
    parser.add_argument("--model", type=Path, help="the algorithm's model folder (for its model tarball)")
    parser.add_argument("--out", type=Path, default=Path("dist/gc"), help="default dist/gc")
    return parser


@report_errors
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging()
    pack(args.challenge, args.ground_truth, args.model, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
