"""What a Slurm cluster accepts of one submitter: its MaxArraySize (an array's indices are below it) and MaxJobCount
(`scontrol show config`), and the association's MaxSubmitJobs where `sacctmgr` answers (a cluster with slurmdbd);
`array_chunks` splits a submission's tasks into as many arrays as these allow."""

from __future__ import annotations

import getpass
import re
import subprocess
from dataclasses import dataclass

SLURM_DEFAULT_MAX_ARRAY_SIZE = 1001


@dataclass(frozen=True)
class ClusterLimits:
    """The most tasks of one array (`max_array_size`) and of every job the submitter may have in Slurm at once
    (`max_jobs`: MaxJobCount, or the association's MaxSubmitJobs when lower; None where neither is known)."""

    max_array_size: int
    max_jobs: int | None = None


def _answer(*args: str) -> str:
    try:
        result = subprocess.run(list(args), capture_output=True, text=True, timeout=60, errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return result.stdout if result.returncode == 0 else ""


def config_value(config: str, key: str) -> int | None:
    """An integer of `scontrol show config`'s `KEY = VALUE` lines; None where absent or not a number."""
    found = re.search(rf"^{key}\s*=\s*([0-9]+)\s*$", config, re.MULTILINE)
    return int(found.group(1)) if found else None


def max_submit_jobs(text: str) -> int | None:
    """The lowest MaxSubmitJobs of `sacctmgr --parsable2 --noheader show assoc format=MaxSubmit` lines (empty:
    unlimited); None where none is set."""
    limits = [int(line) for line in (line.strip() for line in text.splitlines()) if line.isdigit()]
    return min(limits) if limits else None


def cluster_limits(user: str | None = None) -> ClusterLimits:
    """This cluster's limits for `user` (default: this process's user)."""
    config = _answer("scontrol", "show", "config")
    array_size = config_value(config, "MaxArraySize") or SLURM_DEFAULT_MAX_ARRAY_SIZE
    limits = [config_value(config, "MaxJobCount"),
              max_submit_jobs(_answer("sacctmgr", "--parsable2", "--noheader", "show", "assoc",
                                      f"user={user or getpass.getuser()}", "format=MaxSubmit"))]
    known = [limit for limit in limits if limit]
    return ClusterLimits(array_size, min(known) if known else None)


def array_chunks(count: int, max_array_size: int) -> list[range]:
    """Indices 0..count-1 in arrays of at most `max_array_size` tasks."""
    size = max(1, max_array_size)
    return [range(start, min(start + size, count)) for start in range(0, count, size)]
