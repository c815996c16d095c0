"""A site's options of the Slurm backend: from the organiser's command line (--partition, --account, --max-parallel,
--sbatch-option, --job-name-prefix) or a site file (--slurm-config site.toml; the command line wins), never from the
submissions file, which carries the teams' data. Every sbatch option is checked against the options a site needs
(ALLOWED): one that would choose the job's output, environment, folder or command (`--output`, `--export`,
`--chdir`, `--wrap`, ...) is refused in one line.

    partition = "gpu"                       # a site file: every key optional
    account = "challenge"
    max_parallel = 50                       # tasks of one submission running at once (--array=...%K)
    options = ["--qos=long", "--constraint=a100"]
    job_name_prefix = "mc-"                 # Slurm job names: PREFIX<team>, PREFIX<team>-evaluate, ...
    max_array_size = 1000                   # at most this many tasks per array (below the cluster's MaxArraySize)
    step_memory_gb = 4                      # the evaluation and leaderboard jobs
    step_time_limit_s = 7200
    poll_s = 10                             # how often `phase run` asks squeue while it waits
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..jobs.conditions import MAX_MEMORY_GB, MAX_TIME_LIMIT_S, within

# sbatch options a site sets for its cluster (each `--name=value`; `--no-requeue` and `--requeue` alone)
ALLOWED = ("account", "constraint", "exclude", "gres", "licenses", "mem", "nodelist", "partition", "qos",
           "reservation", "time")
FLAGS = ("no-requeue", "requeue")
OPTION = re.compile(r"--([a-z][a-z-]*)(?:=(.+))?", re.DOTALL)
PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}")
DEFAULT_PREFIX = "mc-"
MAX_FILE_BYTES = 64 << 10
MAX_PARALLEL = 100_000  # max_parallel, --max-parallel: Slurm's array throttle
# the site file's keys: (type, lowest, highest) for numbers
NUMBERS = {"max_parallel": (int, 1, MAX_PARALLEL), "max_array_size": (int, 1, 4_000_000),
           "step_memory_gb": (float, 0.1, MAX_MEMORY_GB), "step_time_limit_s": (float, 60, MAX_TIME_LIMIT_S),
           "poll_s": (float, 0.5, 3600)}
STRINGS = ("partition", "account", "job_name_prefix")
KEYS = (*STRINGS, "options", *NUMBERS)


def check_sbatch_option(option: Any, where: str) -> str:
    """One sbatch option a site may set (ALLOWED, as `--name=value`), else InputError naming it and `where`."""
    found = OPTION.fullmatch(option) if isinstance(option, str) else None
    name, value = (found.group(1), found.group(2)) if found else (None, None)
    if name in FLAGS and value is None:
        return option
    if name in ALLOWED and value is not None and value.isprintable():
        return option
    shown = repr(option[:60]) if isinstance(option, str) else type(option).__name__
    raise InputError(f"{where}: {shown}: not an sbatch option a site sets (allowed: "
                     f"{', '.join(f'--{n}=...' for n in ALLOWED)}, {', '.join(f'--{f}' for f in FLAGS)})")


def check_sbatch_options(options: Sequence[Any] | None, where: str) -> list[str]:
    return [check_sbatch_option(option, where) for option in options or ()]


def check_prefix(prefix: Any, where: str) -> str:
    if not isinstance(prefix, str) or not PREFIX.fullmatch(prefix):
        raise InputError(f"{where}: a job name prefix is 1-32 letters, digits, '.', '-' or '_', starting with a "
                         "letter or digit")
    return prefix


def _number(key: str, value: Any, where: str) -> float | int:
    kind, lowest, highest = NUMBERS[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        raise InputError(f"{where}: {key} must be {'an integer' if kind is int else 'a number'}")
    if value != lowest and not within(value, lowest, highest):
        raise InputError(f"{where}: {key} = {value}: expected {lowest} to {highest}")
    return kind(value)


def read_site_file(path: Path) -> dict[str, Any]:
    """The Slurm backend's options of a site file, checked; one InputError line for the first problem."""
    where = f"--slurm-config {path}"
    if not path.is_file():
        raise InputError(f"{where}: not a file")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise InputError(f"{where}: larger than {MAX_FILE_BYTES} bytes")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise InputError(f"{where}: not a TOML file ({str(exc)[:200]})") from None
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise InputError(f"{where}: unknown key(s) {', '.join(repr(k[:40]) for k in unknown)} (known: "
                         f"{', '.join(KEYS)})")
    options: dict[str, Any] = {}
    for key, value in data.items():
        if key in NUMBERS:
            options[key] = _number(key, value, where)
        elif key == "options":
            if not isinstance(value, list):
                raise InputError(f"{where}: options must be a list of sbatch options")
            options[key] = check_sbatch_options(value, where)
        elif not isinstance(value, str) or not value.isprintable() or not value:
            raise InputError(f"{where}: {key} must be a non-empty string")
        else:
            options[key] = check_prefix(value, where) if key == "job_name_prefix" else value
    return options
