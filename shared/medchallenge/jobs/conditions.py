"""Grand-challenge's conditions for an algorithm job, each with where it comes from, and the limits a job runs under.

Sources: comic/grand-challenge.org `components/models.py`,
`algorithms/models.py`, `evaluation/models.py`, `components/backends/amazon_sagemaker_training.py`,
`settings.py`; DIAGNijmegen/rse-sagemaker-shim (the binary GC puts into every image and that runs the job).
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from .errors import EmulationError

if TYPE_CHECKING:  # a type only: the challenges package builds on the jobs'
    from ..challenges.definition import PhaseLimits

GIB = 1 << 30

# The shim adds these to the process environment (and HOME from /etc/passwd, which docker sets the same way).
GC_ENVIRONMENT = {"LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1", "no_proxy": "amazonaws.com"}
# The shim removes every variable of the image whose name starts with this (case-insensitive) before the job runs.
STRIPPED_PREFIX = "grand_challenge_"

# Phase `algorithm_time_limit`: default 20 min, between 5 min and 24 h (GC refuses other values).
DEFAULT_TIME_LIMIT_S = 20 * 60
GC_TIME_LIMIT_RANGE_S = (5 * 60, 24 * 3600)
# Algorithm `job_requires_memory_gb`: default 8, between ALGORITHMS_MIN_MEMORY_GB and ALGORITHMS_MAX_MEMORY_GB.
DEFAULT_MEMORY_GB = 8
GC_MEMORY_RANGE_GB = (4, 32)
# Phase `evaluation_requires_memory_gb` (default 8) and `evaluation_time_limit` (default 60 min): the evaluation's.
DEFAULT_EVALUATION_MEMORY_GB = 8
DEFAULT_EVALUATION_TIME_LIMIT_S = 60 * 60
# The instance's volume: at least 30 GB (max(30 GB, 3 x the input size)); what a job may write to /output, /tmp and
# /opt/ml/model together here (disk_quota.py).
DEFAULT_DISK_GB = 30
# The shim sets RLIMIT_DATA to the instance's memory less 1 GiB (GRAND_CHALLENGE_COMPONENT_MAX_MEMORY_MB).
RESERVED_MEMORY_GB = 1

# What this runner accepts at most, whoever sets it (a command line, a submissions file, a gateway route): far above
# any machine a job runs on, low enough that every size derived from them is an exact integer (no OverflowError).
MAX_MEMORY_GB = 4096
MAX_TIME_LIMIT_S = 7 * 86_400
MAX_CPUS = 4096
MAX_DISK_GB = 1 << 20

# The cheapest SageMaker instance GC picks for (memory GB, GPU): its vCPUs (amazon_sagemaker_training.py).
INSTANCES = (  # (name, memory GB, vCPUs, GPU)
    ("ml.m7i.large", 8, 2, False), ("ml.r7i.large", 16, 2, False), ("ml.r7i.xlarge", 32, 4, False),
    ("ml.g4dn.xlarge", 16, 4, True), ("ml.g4dn.2xlarge", 32, 8, True),
)

# What a job runs under, where it comes from, and how this runner reproduces it (the report lists them).
CONDITIONS = (
    ("inputs", "each upload converted by panimg (GC's import_images: default builders, no post-processors); the job "
               "sees /input/<relative_path>/<image-pk>.mha and /input/inputs.json (ComponentInterfaceValueSerializer)",
     "cases/tasks.py, components/serializers.py"),
    ("entrypoint", "the image's own ENTRYPOINT and CMD, no arguments, as the image's USER (uid 0 refused, its USER "
                   "resolved by the image's /etc/passwd as the engine resolves it)",
     "sagemaker-shim: GRAND_CHALLENGE_COMPONENT_CMD_B64J / _ENTRYPOINT_B64J / _USER; components/models.py"),
    ("environment", "the image's ENV without GRAND_CHALLENGE_* variables, plus LOG_LEVEL=INFO, PYTHONUNBUFFERED=1, "
                    "no_proxy=amazonaws.com and HOME of the user", "sagemaker-shim"),
    ("network", "none (jobs run in a VPC without egress)", "amazon_sagemaker_training.py"),
    ("model", "/opt/ml/model: the algorithm's model tarball extracted with tarfile's 'data' filter; links, devices, "
              "FIFOs and members outside the folder refused", "sagemaker-shim"),
    ("file system", "/input read-only, /output and /tmp writable and empty at start (/tmp on disk), the image's "
                    "own files writable only where its user owns them; files written anywhere but /output are "
                    "discarded", "sagemaker-shim"),
    ("disk", "the instance's volume, at least 30 GB: here what the job writes to /output, /tmp and /opt/ml/model "
             "together is bounded by the disk limit (stopped over it, or when it took half the free disk; no file "
             "larger than the limit)", "amazon_sagemaker_training.py"),
    ("memory", "the instance's memory, and RLIMIT_DATA = memory less 1 GiB; /dev/shm half the memory; killed "
               "over it ('The container was killed as it exceeded its memory limit')",
     "algorithms/models.py job_requires_memory_gb, sagemaker-shim"),
    ("time", "per job, 20 min by default ('Time limit exceeded')", "phase algorithm_time_limit"),
    ("CPUs", "the vCPUs of the instance GC picks for the memory and GPU", "amazon_sagemaker_training.py"),
    ("GPU", "one GPU when the algorithm asks for one (T4 on GC)", "algorithms/models.py job_requires_gpu_type"),
    ("outputs", "only the declared output sockets are read: a missing file, an empty or crowded image folder or "
                "invalid JSON fails the job in GC's words; NaN/Infinity in JSON become null; here also more boxes, "
                "points, detections, concepts or caption characters than one case may hold (jobs/outputs.py)",
     "components/backends/base.py get_outputs"),
)


def within(value: object, low: float, high: float) -> bool:
    """`value` is a finite number (not a bool) above `low` and at most `high`."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and low < value <= high)


@dataclass(frozen=True)
class JobLimits:
    """A job's memory, time, CPUs and disk; defaults as grand-challenge's (8 GB, 20 min, the instance's vCPUs,
    30 GB)."""

    memory_gb: float = DEFAULT_MEMORY_GB
    time_limit_s: float = DEFAULT_TIME_LIMIT_S
    cpus: float | None = None  # None: the vCPUs of GC's instance for this memory (capped by this host's)
    disk_gb: float = DEFAULT_DISK_GB

    def __post_init__(self) -> None:
        if not within(self.memory_gb, RESERVED_MEMORY_GB, MAX_MEMORY_GB):
            raise EmulationError(f"memory limit {self.memory_gb!r} GB: must be more than the {RESERVED_MEMORY_GB} GB "
                                 f"grand-challenge reserves and at most {MAX_MEMORY_GB}")
        if not within(self.time_limit_s, 0, MAX_TIME_LIMIT_S):
            raise EmulationError(f"time limit {self.time_limit_s!r} s: must be positive and at most "
                                 f"{MAX_TIME_LIMIT_S}")
        if self.cpus is not None and not within(self.cpus, 0, MAX_CPUS):
            raise EmulationError(f"CPUs {self.cpus!r}: must be positive and at most {MAX_CPUS}")
        if not within(self.disk_gb, 0, MAX_DISK_GB) or not self.disk_bytes > 0:
            raise EmulationError(f"disk limit {self.disk_gb!r} GB: must be positive and at most {MAX_DISK_GB}")

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gb * GIB)

    @property
    def disk_bytes(self) -> int:
        return int(self.disk_gb * GIB)

    @property
    def data_limit_bytes(self) -> int:
        """RLIMIT_DATA as the shim sets it."""
        return int((self.memory_gb - RESERVED_MEMORY_GB) * GIB)

    def instance(self, gpu: bool) -> tuple[str, int]:
        """The SageMaker instance GC would pick and its vCPUs (the largest where the memory is above all)."""
        fitting = [i for i in INSTANCES if i[3] == gpu and i[1] >= self.memory_gb]
        name, _, vcpus, _ = fitting[0] if fitting else [i for i in INSTANCES if i[3] == gpu][-1]
        return name, vcpus

    def effective_cpus(self, gpu: bool) -> float:
        """The CPUs a job gets: those asked for, else the instance's vCPUs, at most this host's."""
        return min(self.cpus or self.instance(gpu)[1], os.cpu_count() or 1)

    def differences_from_gc(self) -> list[str]:
        """Where these limits are outside what grand-challenge accepts (said in the report, not refused)."""
        notes = []
        low, high = GC_TIME_LIMIT_RANGE_S
        if not low <= self.time_limit_s <= high:
            notes.append(f"time limit {self.time_limit_s:g} s is outside grand-challenge's {low}-{high} s")
        low, high = GC_MEMORY_RANGE_GB
        if not low <= self.memory_gb <= high:
            notes.append(f"memory {self.memory_gb:g} GB is outside grand-challenge's {low}-{high} GB")
        if self.disk_gb < DEFAULT_DISK_GB:
            notes.append(f"disk limit {self.disk_gb:g} GB is below grand-challenge's volume of {DEFAULT_DISK_GB} GB")
        return notes

    def to_json(self) -> dict:
        return asdict(self)


def set_limit_defaults(parser, limits: PhaseLimits) -> None:
    """A challenge definition's algorithm limits as the defaults of add_limit_arguments' options."""
    parser.set_defaults(memory_gb=limits.algorithm_memory_gb, time_limit=limits.algorithm_time_limit_s,
                        cpus=limits.algorithm_cpus)


def add_limit_arguments(parser, unless: str = "") -> None:
    """The job limits' options (--memory-gb, --time-limit, --cpus, --disk-gb) of every command that runs jobs, with
    grand-challenge's defaults; `unless` says what overrides them (a phase: "unless a submission sets it")."""
    why = f", {unless}" if unless else ""
    parser.add_argument("--memory-gb", type=float, default=DEFAULT_MEMORY_GB,
                        help=f"memory per job (grand-challenge's default {DEFAULT_MEMORY_GB}, from 4 to 32{why})")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S,
                        help=f"seconds per job (grand-challenge's default {DEFAULT_TIME_LIMIT_S}, from 300 to 86400)")
    parser.add_argument("--cpus", type=float, default=None,
                        help="CPUs per job (default: those of the instance grand-challenge picks for the memory)")
    parser.add_argument("--disk-gb", type=float, default=DEFAULT_DISK_GB,
                        help=f"what a job may write to /output, /tmp and /opt/ml/model together (default "
                             f"{DEFAULT_DISK_GB:g}, grand-challenge's volume)")
