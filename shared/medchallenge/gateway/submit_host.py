"""`--check` of the routes with `backend = "slurm"`: the gateway's host (or container) is a Slurm submit host.

What a submit host needs, each missing piece named in one line: Slurm's client commands on PATH (`sbatch`,
`squeue`, `scontrol`), the site's `slurm.conf` (`$SLURM_CONF`, else /etc/slurm/slurm.conf), munge's socket (the one
slurm.conf's `AuthInfo=socket=...` names, else /run/munge/munge.socket.2) and a work folder the nodes can reach: it
must be on the shared filesystem, at the same path on the nodes, which no host can prove; what a container can see
is refused, a work folder in the container's own filesystem (its overlay root or a tmpfs, not a mounted volume).
Only `--check` and the gateway's start ask for these: `--conformance` never does (a reviewer's laptop has no
cluster).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path

from ..errors import InputError
from .cluster import CLUSTER_COMMANDS
from .config import GatewayConfig

DEFAULT_SLURM_CONF = Path("/etc/slurm/slurm.conf")
DEFAULT_MUNGE_SOCKET = Path("/run/munge/munge.socket.2")
CONTAINER_ONLY_FILESYSTEMS = ("overlay", "tmpfs", "ramfs")  # a container's root and scratch: no node sees them
CONTAINER_MARKERS = (Path("/.dockerenv"), Path("/run/.containerenv"))  # Docker's, Podman's
AUTH_SOCKET = re.compile(r"^\s*AuthInfo\s*=\s*\S*?\bsocket=([^,\s]+)", re.IGNORECASE | re.MULTILINE)


def slurm_conf() -> Path:
    """The slurm.conf Slurm's commands read: $SLURM_CONF, else Debian's place."""
    return Path(os.environ.get("SLURM_CONF") or DEFAULT_SLURM_CONF)


def munge_socket(conf: Path) -> Path:
    """munge's socket as slurm.conf names it (`AuthInfo=socket=PATH`), else munge's default."""
    try:
        found = AUTH_SOCKET.search(conf.read_text(encoding="utf-8", errors="replace")[:1_000_000])
    except OSError:
        found = None
    return Path(found.group(1)) if found else DEFAULT_MUNGE_SOCKET


def filesystem_type(folder: Path) -> str | None:
    """The type of the filesystem holding `folder` (/proc/self/mounts, its longest mount point above it)."""
    try:
        mounts = Path("/proc/self/mounts").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    folder = folder.resolve()
    best, kind = "", None
    for line in mounts:
        fields = line.split()
        if len(fields) >= 3:
            point = fields[1].replace("\\040", " ")
            if (folder == Path(point) or Path(point) in folder.parents) and len(point) >= len(best):
                best, kind = point, fields[2]
    return kind


def missing_pieces(work_dir: Path) -> list[str]:
    """What this host lacks to submit a route's jobs to Slurm, each in a few words; empty when nothing."""
    pieces = [f"no {command} on PATH" for command in CLUSTER_COMMANDS if shutil.which(command) is None]
    conf = slurm_conf()
    if not conf.is_file():
        pieces.append(f"no slurm.conf at {conf} (mount the site's read-only there, or set SLURM_CONF)")
    socket = munge_socket(conf)
    try:
        is_socket = stat.S_ISSOCK(socket.stat().st_mode)
    except OSError:
        is_socket = False
    if not is_socket:
        pieces.append(f"no munge socket at {socket} (mount the host's /run/munge read-only)")
    kind = filesystem_type(work_dir if work_dir.exists() else work_dir.parent)
    if kind in CONTAINER_ONLY_FILESYSTEMS and any(marker.exists() for marker in CONTAINER_MARKERS):
        pieces.append(f"work_dir {work_dir} is in this container's own {kind}, which no node sees (mount the shared "
                      "filesystem there, at the same path as on the nodes)")
    return pieces


def check_submit_host(config: GatewayConfig, path: Path) -> None:
    """One InputError line naming every piece this host lacks for the configuration's Slurm routes (none: fine)."""
    names = [route.name for route in config.routes if route.slurm is not None]
    pieces = missing_pieces(config.work_dir) if names else []
    if pieces:
        raise InputError(f"{path}: route(s) {', '.join(names)}: backend = \"slurm\" needs a Slurm submit host here: "
                         f"{'; '.join(pieces)} (docs/scale.md, \"A gateway route on the cluster\")")
