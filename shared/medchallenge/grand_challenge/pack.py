"""`make gc-pack`: what an organiser uploads to grand-challenge besides the images.

Per challenge, under `OUT/<challenge>/`:
- `ground_truth.tar.gz`: the ground-truth folder's files at the top of the archive, as grand-challenge extracts a
  phase's ground truth into `/opt/ml/input/data/ground_truth/` (with tarfile's "data" filter: no links, no
  absolute or parent paths, so none are packed);
- `model.tar.gz` (challenges with an algorithm image): the model folder's files, extracted into `/opt/ml/model/`
  (the algorithm prefers a model found there to the one baked into its image);
- `sockets.json`: the sockets (slug, kind, super kind, relative path) to request for the algorithm interface, and
  the ground-truth files the evaluator reads.

The archives are reproducible: sorted members, owner 0, modes 0644/0755, time stamps 0. With `--all`, every
challenge (each scoring configuration with data of its own) is packed from the folders compose.yaml would mount:
`$<PREFIX>_GROUND_TRUTH` and `$<PREFIX>_MODEL`, else the demo data and the model in the repository.
"""

from __future__ import annotations

import argparse
import gzip
import io
import logging
import os
import sys
import tarfile
from pathlib import Path

from ..errors import InputError, report_errors
from ..io import atomic_output, write_json_atomic
from ..logs import setup_logging
from ..registry import CONFIGURATIONS_WITH_DATA, Configuration, Mount

PACKAGES = {configuration.name: configuration for configuration in CONFIGURATIONS_WITH_DATA}

log = logging.getLogger("medchallenge.grand_challenge.pack")


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


def check_ground_truth(configuration: Configuration, folder: Path) -> None:
    """Every ground-truth file the challenge's evaluator reads is in `folder`."""
    patterns = configuration.challenge.interface.ground_truth
    for pattern in patterns:
        if not any(folder.glob(pattern)):
            raise InputError(f"{folder}: no {pattern}; the {configuration.name} evaluator reads "
                             f"{', '.join(patterns)} from its ground truth")


def pack(configuration: Configuration, ground_truth: Path, model: Path | None, out: Path) -> Path:
    """Write the ground-truth tarball, model tarball (if `model`) and socket list under out/<configuration name>."""
    target = out / configuration.name
    check_ground_truth(configuration, ground_truth)
    archives = {"ground_truth.tar.gz": ground_truth, **({"model.tar.gz": model} if model is not None else {})}
    for name, folder in archives.items():
        content = reproducible_tar_gz(folder)
        with atomic_output(target / name, "wb") as handle:
            handle.write(content)
    write_json_atomic(target / "sockets.json",
                      {"challenge": configuration.name, **configuration.challenge.interface.as_json()})
    log.info("%s: %s", configuration.name, ", ".join(sorted(p.name for p in target.iterdir())))
    return target


def mounted_folder(mount: Mount) -> Path:
    """The host folder compose.yaml mounts: `$variable`, else its default (the demo data, made by `make demo`)."""
    given = os.environ.get(mount.variable)
    folder = Path(given or mount.default)
    if not folder.is_dir():
        if given:
            raise InputError(f"{mount.variable}={given}: no such folder")
        raise InputError(f"{mount.default}: no such folder; run `make demo` first (it makes the demo data and "
                         f"predictions), or set {mount.variable} and the other <CHALLENGE>_* folders to your own")
    return folder


def pack_all(out: Path) -> None:
    """Every configuration with data of its own, from the folders compose.yaml would mount."""
    for configuration in CONFIGURATIONS_WITH_DATA:
        algorithm = configuration.algorithm_service
        pack(configuration, mounted_folder(configuration.service.mount("ground_truth")),
             mounted_folder(algorithm.mount("model")) if algorithm else None, out)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m medchallenge.grand_challenge.pack", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("challenge", nargs="?", choices=sorted(PACKAGES), help="what to pack (or --all)")
    parser.add_argument("--all", action="store_true", help="every challenge, from the folders compose.yaml mounts")
    parser.add_argument("--ground-truth", type=Path, help="the folder the evaluator reads")
    parser.add_argument("--model", type=Path, help="the algorithm's model folder (for its model tarball)")
    parser.add_argument("--out", type=Path, default=Path("dist/gc"), help="default dist/gc")
    return parser


@report_errors
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.all == (args.challenge is not None) or (args.challenge and args.ground_truth is None):
        parser.error("give a challenge and --ground-truth, or --all")
    setup_logging()
    if args.all:
        pack_all(args.out)
    else:
        pack(PACKAGES[args.challenge], args.ground_truth, args.model, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
