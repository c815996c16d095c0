"""A job in a container as grand-challenge runs it (the sagemaker shim on a SageMaker training instance): the image's
own entrypoint without arguments as its own non-root user, no network, GC's environment, memory (cgroup and
RLIMIT_DATA), time and CPU limits, /input read-only, /output, /opt/ml/model and an empty on-disk /tmp writable, the
GPU when asked for. Conditions and their sources: conditions.py. A job runner that itself runs in a container (the
hospital's job-runner service) gives the engine its job folders by their host paths, read from its own mounts.

The engine is Docker or Podman (daemonless, what clusters without a Docker daemon run): the same conditions through
the same CLI, except where Podman differs (engine_differences: its open-files and processes limits, GPUs by CDI;
image ids without their `sha256:`, the /etc it mounts into). A job's container is run attached: one engine command
gives its end, its status and its log lines. It never outlives its time limit and a margin, whoever dies: a
watchdog in its own session (watchdog.py) removes it when the runner dies or at that deadline; Podman's conmon
kills it at the deadline too (`--timeout`); and its deadline is a label that `sweep_expired` (a phase run's and the
gateway's job runner's start) removes it by, for a watchdog that died with the runner's container."""

from __future__ import annotations

import functools
import io
import json
import logging
import os
import posixpath
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..contract import GC_GROUND_TRUTH
from .conditions import GC_ENVIRONMENT, STRIPPED_PREFIX, JobLimits
from .disk_quota import DiskQuota
from .errors import EmulationError, EngineFault
from .launch import Execution, JobFolders
from .log_tail import read_tails
from .watchdog import WATCH_LABEL

log = logging.getLogger("medchallenge.jobs")

LOG_BYTES = "20m"  # the container's log on this host's disk, at most (a job printing without end fills no disk)
POLL_S = 0.1
KILL_WAIT_S = 30  # for the attached run's end once its container is killed
PASSWD = "/etc/passwd"
PASSWD_BYTES = 1 << 20  # an image's /etc/passwd read to resolve its USER, at most
LINK_HOPS = 8  # links followed to an image's /etc/passwd, at most
GO_INT = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.Atoi reads as a number (the engine's user lookup)
# `docker run`'s status when the container was made but its command could not be invoked (126) or found (127)
NOT_STARTED = (126, 127)
# mount points of the job and their parents: changes there are docker's, not the job's
MOUNTS = ("/input", "/output", "/tmp", "/opt/ml/model", GC_GROUND_TRUTH)
PIDS_LIMIT = 4096  # protects the host from a fork bomb; far above what a job starts
ENGINES = ("docker", "podman")
NAME_IN_USE = "already in use"  # both engines' words when a container of the name exists
NOT_FOUND = re.compile(r"no such image|image not known", re.IGNORECASE)  # both engines' words: `image inspect` of none
OPEN_FILES = 1 << 20  # Docker's default open-files limit of a container
CONTAINER_ID_FILE = "container.id"  # in the job's folder while its container runs: the id the engine gave it
NEVER = "0001-01-01"  # a container's StartedAt while it never started (Go's zero time)
DEADLINE_LABEL = "medchallenge.deadline"  # when the container is over its time: seconds since the epoch
WATCH_MARGIN_S = 120  # after its time limit, what the runner's stop of a container (kill, inspect, diff, rm) may take
WATCHDOG = Path(__file__).with_name("watchdog.py")


def _engine(engine: str, *args: str, timeout: float = 120, check: bool = True,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
    try:
        result = subprocess.run([engine, *args], capture_output=True, text=True, timeout=timeout, errors="replace",
                                cwd=cwd)
    except FileNotFoundError:
        raise EngineFault(f"{engine} is not installed (no `{engine}` on PATH)") from None
    except subprocess.TimeoutExpired:
        raise EngineFault(f"`{engine} {args[0]}` did not answer in {timeout:g} s") from None
    if check and result.returncode != 0:
        raise EngineFault(f"`{engine} {args[0]}` failed: {_last_line(result.stderr, result.returncode)}")
    return result


def _last_line(stderr: str, status: int) -> str:
    lines = stderr.strip().splitlines()
    return lines[-1] if lines else f"status {status}"


_docker = functools.partial(_engine, "docker")


def gpu_devices() -> list[str]:
    """The GPUs named for this runner's job: Slurm's (SLURM_JOB_GPUS, the node's own ids), else CUDA_VISIBLE_DEVICES;
    empty when none is named (a GPU job then gets one)."""
    given = os.environ.get("SLURM_JOB_GPUS") or os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return [d.strip() for d in given.split(",") if d.strip()]


def gpu_count(gpu: bool, devices: Sequence[str] | None = None) -> int:
    """The GPUs a job is given: `devices`, else those named for the runner's job (gpu_devices), else one; none
    without `gpu`."""
    return (len(gpu_devices() if devices is None else devices) or 1) if gpu else 0


def engine_differences(engine: str, gpu: bool, devices: Sequence[str] | None = None) -> list[str]:
    """The options of `ENGINE run` where Podman differs from Docker. Podman asks the kernel for its own default
    open-files and processes limits, above what an unprivileged host (or a Slurm step) allows: "error setting rlimit
    type 7"; it is given the runner's own open-files limit and the pids limit. A GPU: the one(s) Slurm gave the
    runner's job (SLURM_JOB_GPUS: the node's own GPU ids, which the engine sees; CUDA_VISIBLE_DEVICES elsewhere),
    or `devices` where the caller chose them (a gateway route's GPU of its pool), else one; Docker by --gpus, Podman
    by its CDI devices."""
    devices = gpu_devices() if devices is None else list(devices)
    options = []
    if engine == "podman":
        open_files = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], OPEN_FILES)
        options += ["--ulimit", f"nofile={open_files}:{open_files}", "--ulimit", f"nproc={PIDS_LIMIT}:{PIDS_LIMIT}"]
        if gpu:
            options += [a for device in devices or ["0"] for a in ("--device", f"nvidia.com/gpu={device}")]
    elif gpu:  # several devices are one CSV field for Docker: quoted
        options += ["--gpus", f'"device={",".join(devices)}"' if devices else "1"]
    return options


@dataclass(frozen=True)
class ImageConfig:
    """What GC reads of an image at upload: its user, entrypoint, command, environment and architecture."""

    id: str
    user: str
    entrypoint: list[str] | None
    cmd: list[str] | None
    env: list[str]
    architecture: str

    @classmethod
    def inspect(cls, image: str, engine: str = "docker") -> ImageConfig:
        """The image's configuration; its id is the digest of that configuration, the same under Docker and Podman
        (Podman's lacks the `sha256:`). EngineFault where the engine fails or lacks the image: nothing is wrong with
        the image itself."""
        result = _engine(engine, "image", "inspect", image, check=False)
        if result.returncode != 0 and NOT_FOUND.search(result.stderr):
            raise EngineFault(f"image {image}: not found by this {engine} engine (`{engine} load < FILE.tar.gz` "
                              "the file you would upload, or build it)")
        if result.returncode != 0:
            raise EngineFault(f"image {image}: the {engine} engine failed to inspect it: "
                              f"{_last_line(result.stderr, result.returncode)}")
        try:
            data = json.loads(result.stdout)[0]
            config = data.get("Config") or {}
            image_id = data["Id"] if data["Id"].startswith("sha256:") else f"sha256:{data['Id']}"
            return cls(image_id, config.get("User") or "", config.get("Entrypoint"), config.get("Cmd"),
                       config.get("Env") or [], data.get("Architecture", ""))
        except (ValueError, LookupError, TypeError, AttributeError):
            raise EngineFault(f"image {image}: `{engine} image inspect` gave no image configuration") from None


def _engine_bytes(engine: str, *args: str, limit: int, timeout: float = 120) -> bytes | None:
    """The standard output of `ENGINE ARGS`, None when it fails; EmulationError when it writes more than `limit`
    bytes (read no further); EngineFault when the engine is not there or does not answer."""
    try:
        process = subprocess.Popen([engine, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except FileNotFoundError:
        raise EngineFault(f"{engine} is not installed (no `{engine}` on PATH)") from None
    with process:
        data = process.stdout.read(limit + 1)
        if len(data) > limit:
            process.kill()
            raise EmulationError(f"`{engine} {args[0]}` wrote more than {limit} bytes")
        try:
            status = process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            raise EngineFault(f"`{engine} {args[0]}` did not answer in {timeout:g} s") from None
    return data if status == 0 else None


def _go_int(text: str) -> int | None:
    """`text` as Go's strconv.Atoi reads it (an optional sign, ASCII digits, 64 bits), else None."""
    if not GO_INT.fullmatch(text):
        return None
    value = int(text)
    return value if -(1 << 63) <= value < 1 << 63 else None


def user_uids(user: str, passwd: bytes | None) -> list[int]:
    """The uids the engine can give an image's USER `user` ("name-or-uid[:group]"), resolved as its user lookup
    (runc/moby `user.GetExecUser`) does with the image's /etc/passwd: an empty user is uid 0; a number (`00`,
    `+0`) is that uid; a name is the uid of its passwd lines (each listed: engines take the first), where a missing
    or non-numeric uid field reads as 0. An empty list: a name not in /etc/passwd (the engine cannot start it)."""
    name = user.split(":", 1)[0]
    if not name:
        return [0]
    number = _go_int(name)
    if number is not None:
        return [number]
    uids = []
    for line in (passwd or b"").split(b"\n"):
        fields = line.strip().split(b":")
        if fields[0] == name.encode("utf-8", "surrogateescape"):
            uids.append((_go_int(fields[2].decode("latin-1")) or 0) if len(fields) > 2 else 0)
    return uids


# where a container's figures are, per cgroup version: (v1 controller, its mount, the file), then the v2 unified tree
MEMORY_FILES = (("memory", "/sys/fs/cgroup/memory", "memory.max_usage_in_bytes"), ("", "/sys/fs/cgroup", "memory.peak"))
CPU_FILES = (("cpuacct", "/sys/fs/cgroup/cpuacct", "cpuacct.usage"), ("", "/sys/fs/cgroup", "cpu.stat"))


def _container_cgroup(pid: int, container_id: str, files: tuple[tuple[str, str, str], ...]) -> Path | None:
    """The cgroup folder of the container's first process holding one of `files` (MEMORY_FILES, CPU_FILES), if
    visible here and named after the container (a process that is gone, or another one, gives None)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for wanted, root, probe in files:
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if wanted in controllers.split(",") and container_id in path and Path(f"{root}{path}/{probe}").exists():
                return Path(f"{root}{path}")
    return None


def _read_peak(cgroup: Path | None) -> int | None:
    if cgroup is None:
        return None
    for name in ("memory.max_usage_in_bytes", "memory.peak"):
        try:
            return int((cgroup / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return None


def _read_cpu_seconds(cgroup: Path | None) -> float | None:
    """The CPU time of every process the container ran so far (user and system): v1's cpuacct.usage (ns), v2's
    cpu.stat usage_usec."""
    if cgroup is None:
        return None
    try:
        return int((cgroup / "cpuacct.usage").read_text()) / 1e9
    except (OSError, ValueError):
        pass
    try:
        fields = dict(line.split() for line in (cgroup / "cpu.stat").read_text().splitlines() if line.strip())
        return int(fields["usage_usec"]) / 1e6
    except (OSError, ValueError, KeyError):
        return None


def _gpu_pids() -> set[int] | None:
    """Host pids of the processes using a GPU (nvidia-smi), or None without it."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        result = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    return {int(line) for line in result.stdout.split() if line.strip().isdigit()}


def _cgroup_pids(cgroup: Path | None) -> set[int]:
    if cgroup is None:
        return set()
    try:
        return {int(p) for p in (cgroup / "cgroup.procs").read_text().split()}
    except (OSError, ValueError):
        return set()


CONTAINER_HOSTNAME = re.compile(r"/containers/([0-9a-f]{64})/hostname$")


def container_of(mountinfo: str) -> str | None:
    """The id of the Docker container whose /proc/self/mountinfo this is (its /etc/hostname is the engine's file of
    that container), or None for a process on a host."""
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4] == "/etc/hostname":
            found = CONTAINER_HOSTNAME.search(fields[3])
            if found:
                return found.group(1)
    return None


@functools.cache
def host_mounts() -> tuple[tuple[Path, Path], ...] | None:
    """(folder here, folder on the Docker host) of each mount of the container this job runner runs in, deepest
    first, or None on a host: the engine bind-mounts a job's folders by the host's paths."""
    try:
        container = container_of(Path("/proc/self/mountinfo").read_text())
    except OSError:
        container = None
    if container is None:
        return None
    inspected = _docker("inspect", "--format", "{{json .Mounts}}", container, check=False)
    if inspected.returncode != 0 and "permission denied" in inspected.stderr.lower():
        raise EmulationError("this job runner may not use the Docker socket (permission denied): set DOCKER_GID to "
                             "the socket's group id (stat -c %g /var/run/docker.sock) where docker compose runs")
    if inspected.returncode != 0:
        raise EmulationError(f"this job runner runs in container {container[:12]}, which the Docker engine it "
                             "reaches does not know: give it the socket of the engine it runs on")
    mounts = [(Path(m["Destination"]).resolve(), Path(m["Source"])) for m in json.loads(inspected.stdout) or []
              if m.get("Source") and m.get("Destination")]
    return tuple(sorted(mounts, key=lambda mount: len(mount[0].parts), reverse=True))


def host_path(path: Path, mounts: tuple[tuple[Path, Path], ...] | None) -> Path:
    """`path` as the Docker host sees it: itself on a host, else through the deepest of this container's mounts
    holding it; EmulationError when no mount holds it (a job container could not be given that folder)."""
    path = path.resolve()
    if mounts is None:
        return path
    for here, host in mounts:
        if path == here or here in path.parents:
            return host / path.relative_to(here)
    raise EmulationError(f"{path}: not in a folder mounted from the Docker host into this job runner's container, "
                         "so no job container can be given it: mount the folder (compose.hospital.yaml: the "
                         "job-runner service's volumes)")


def host_has_gpu(engine: str = "docker") -> bool:
    """A GPU this engine can give a container: nvidia-smi lists one and the engine has the NVIDIA runtime (Docker)
    or CDI devices. A job runner in a container (no nvidia-smi, no host files) asks the Docker engine alone: its
    NVIDIA runtime."""
    def runtimes() -> str:
        if engine != "docker":
            return ""
        return _docker("info", "--format", "{{json .Runtimes}} {{json .CDISpecDirs}}", check=False).stdout

    if shutil.which("nvidia-smi") is None:
        return engine == "docker" and host_mounts() is not None and "nvidia" in runtimes()
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    if listed.returncode != 0 or "GPU" not in listed.stdout:
        return False
    return "nvidia" in runtimes() or Path("/etc/cdi/nvidia.yaml").exists() or Path("/var/run/cdi/nvidia.yaml").exists()


def watch_seconds(limits: JobLimits) -> int:
    """How long a job's container may live: its time limit and WATCH_MARGIN_S."""
    return int(limits.time_limit_s) + 1 + WATCH_MARGIN_S


def sweep_expired(engine: str = "docker") -> list[str]:
    """Remove the job containers of this engine past their deadline label (left by a runner whose watchdog died
    with it, as in a job runner's container that was stopped); their ids."""
    listed = _engine(engine, "ps", "--all", "--quiet", "--filter", f"label={DEADLINE_LABEL}", check=False)
    ids = listed.stdout.split()
    if listed.returncode != 0 or not ids:
        return []
    inspected = _engine(engine, "inspect", "--format", f'{{{{.Id}}}} {{{{index .Config.Labels "{DEADLINE_LABEL}"}}}}',
                        *ids, check=False)
    now, expired = time.time(), []
    for line in inspected.stdout.splitlines():
        container, _, deadline = line.partition(" ")
        if deadline.strip().isdigit() and int(deadline) < now:
            expired.append(container)
    if expired:
        _engine(engine, "rm", "--force", *expired, check=False)
        log.warning("removed %d job container(s) past their deadline", len(expired))
    return expired


def _leaves(paths: list[str]) -> list[str]:
    """The paths of `docker diff` that are not a parent of another one (a changed folder is listed with its files)."""
    ordered = sorted(set(paths))
    return [p for i, p in enumerate(ordered) if not (i + 1 < len(ordered) and ordered[i + 1].startswith(p + "/"))]


def written_outside(diff: str, engine: str = "docker") -> list[str]:
    """Files the job added, changed or deleted in the image's file system (not in a mounted folder; Podman lists
    /etc as changed for the hosts and resolv.conf it mounts there)."""
    protected = {m for mount in MOUNTS for m in [mount, *(str(p) for p in Path(mount).parents)]}
    protected |= {"/etc"} if engine == "podman" else set()
    paths = []
    for line in diff.splitlines():
        kind, _, path = line.partition(" ")
        if kind in ("A", "C", "D") and path and path not in protected:
            paths.append(path)
    return _leaves(paths)


def start_error(stderr: str) -> str:
    """What the runtime said when the container's command could not start, without the engine's framing
    (`docker: Error response from daemon: ... exec: "python": executable file not found in $PATH: unknown`)."""
    first = next((line for line in stderr.splitlines() if line.strip()), "")
    found = re.search(r"(exec: .*?|exec format error.*?|permission denied.*?)(?:: unknown)?$", first)
    return (found.group(1) if found else first.removeprefix("docker: ")).strip() or "no reason given"


_passwds: dict[tuple[str, str], bytes] = {}  # (engine, image id) -> the image's /etc/passwd, as read once
PASSWDS_KEPT = 64


def image_passwd(engine: str, image: str, image_id: str, name_prefix: str) -> bytes | None:
    """The /etc/passwd of the image `image_id` (`image` by name), read once per image id (what an id names never
    changes) and engine; None where it could not be read (asked again next time)."""
    key = (engine, image_id)
    if key not in _passwds:
        passwd = _read_passwd(engine, image, image_id, name_prefix)
        if passwd is None:
            return None
        if len(_passwds) >= PASSWDS_KEPT:
            _passwds.pop(next(iter(_passwds)))
        _passwds[key] = passwd
    return _passwds[key]


def _read_passwd(engine: str, image: str, image_id: str, name_prefix: str) -> bytes | None:
    """The /etc/passwd of the image (links followed inside the image), read from a container created and never
    started, so nothing of the image runs; None where the image has none. At most PASSWD_BYTES."""
    path = PASSWD
    container = f"{name_prefix}-inspect-{uuid.uuid4().hex[:12]}"
    _engine(engine, "create", "--name", container, "--network", "none", "--entrypoint", "/dev/null", image_id)
    try:
        for _ in range(LINK_HOPS):
            archive = _engine_bytes(engine, "cp", f"{container}:{path}", "-", limit=PASSWD_BYTES + (64 << 10))
            if archive is None:  # the path is not in the image, unless the engine failed (EngineFault: it is asked)
                _engine(engine, "container", "inspect", "--format", "{{.Id}}", container)
                return None
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                member = tar.next()
                if member is None or not (member.isfile() or member.issym()):
                    return None
                if member.isfile():
                    return tar.extractfile(member).read()
                path = posixpath.normpath(posixpath.join(posixpath.dirname(path), member.linkname))
        raise EmulationError(f"image {image}: {PASSWD} is a chain of more than {LINK_HOPS} links")
    except tarfile.TarError:
        raise EmulationError(f"image {image}: its {PASSWD} could not be read") from None
    finally:
        _engine(engine, "rm", "--force", container, check=False)


class DockerImage:
    """A job's container: the image run as grand-challenge runs it, by Docker or Podman (`engine`). `list_writes`:
    the files the job wrote outside its folders are read (`ENGINE diff`, for pre-flight's note); the hospital gateway,
    running the images its hospital configured, skips it (it took 0.4 to 0.7 s of each radiograph job here).
    `hold_fds`: files its containers' watchdogs keep open until the container is gone (a phase's slot lock)."""

    input_read_only = True  # /input is a read-only bind mount

    def __init__(self, image: str, name_prefix: str = "medchallenge-job", engine: str = "docker",
                 list_writes: bool = True, gpu_devices: Sequence[str] | None = None, hold_fds: Sequence[int] = ()):
        if engine not in ENGINES:
            raise EmulationError(f"engine {engine}: not one of {', '.join(ENGINES)}")
        self.image = image
        self.name_prefix = name_prefix
        self.engine = engine
        self.list_writes = list_writes
        self.gpu_devices = None if gpu_devices is None else tuple(gpu_devices)  # None: the runner's (gpu_devices())
        self.hold_fds = tuple(hold_fds)  # held open by each container's watchdog while it may run (a phase's slot)
        self.description = f"{engine} image {image}"
        self._cli = functools.partial(_engine, engine)
        self._gpu: bool | None = None
        self._notes: list[str] | None = None

    def check(self) -> list[str]:
        """GC's upload checks (non-root user, linux/amd64, something to run) and what the shim changes; the image is
        inspected once."""
        if self._notes is None:
            self._notes = self._inspect()
        return self._notes

    def _inspect(self) -> list[str]:
        config = ImageConfig.inspect(self.image, self.engine)
        self._check_user(config.user, config.id)
        if config.architecture != "amd64":
            raise EmulationError(f"image {self.image}: architecture {config.architecture or 'unknown'}; "
                                 "grand-challenge runs linux/amd64 images only (docker build --platform=linux/amd64)")
        if not config.entrypoint and not config.cmd:
            raise EmulationError(f"image {self.image}: no ENTRYPOINT or CMD; grand-challenge runs the image's own, "
                                 "without arguments")
        stripped = sorted(e.split("=", 1)[0] for e in config.env if e.lower().startswith(STRIPPED_PREFIX))
        return ([f"the image sets {', '.join(stripped)}: grand-challenge removes every GRAND_CHALLENGE_* variable "
                 "before the job runs, so the job does not see them there (they are set here)"] if stripped else [])

    def _check_user(self, user: str, image_id: str) -> None:
        """Refuse an image whose USER the engine runs as uid 0 (`root`, `0`, `00`, `0000:0`, a uid-0 alias in its
        /etc/passwd) or cannot resolve; its /etc/passwd is read only for a user name."""
        name = user.split(":", 1)[0]
        by_name = name and _go_int(name) is None
        uids = user_uids(user, image_passwd(self.engine, self.image, image_id, self.name_prefix) if by_name else None)
        shown = ascii(user)
        if not uids:
            raise EmulationError(f"image {self.image}: USER {shown} is not in the image's {PASSWD}, so no job "
                                 "could start as it")
        if 0 in uids:
            why = "" if name in ("", "root", "0") else f" (USER {shown} is uid 0 in the image)"
            raise EmulationError(f"image {self.image}: The container runs as root{why}. Please add a user, group and "
                                 "USER instruction to your Dockerfile, rebuild, test and upload the container again "
                                 "(grand-challenge refuses it)")

    def gpu_available(self) -> bool:
        if self._gpu is None:
            self._gpu = host_has_gpu(self.engine)
        return self._gpu

    def command(self, folders: JobFolders, limits: JobLimits, gpu: bool, name: str,
                id_file: Path | None = None, token: str = "") -> list[str]:
        """`ENGINE run` with GC's conditions (no command: the image's entrypoint and cmd run as they are), attached:
        it ends with the container, its status the container's, the container's stdout and stderr its own; the
        container's id written to `id_file` once the container is made; a signal to it is not passed on. Labelled
        with its watchdog's `token` and its deadline (watch_seconds from now); Podman's conmon kills it then."""
        cpus = limits.effective_cpus(gpu)
        seconds = watch_seconds(limits)
        deadline = ["--label", f"{DEADLINE_LABEL}={int(time.time()) + seconds}"]
        deadline += ["--timeout", str(seconds)] if self.engine == "podman" else []
        mounts = [(folders.input, "/input", True), (folders.output, "/output", False),
                  (folders.model, "/opt/ml/model", folders.model_readonly), (folders.tmp, "/tmp", False),
                  *([(folders.ground_truth, GC_GROUND_TRUTH, True)] if folders.ground_truth else [])]
        return [self.engine, "run", "--name", name, *(["--cidfile", str(id_file)] if id_file else []),
                "--sig-proxy=false", "--network", "none", "--cap-drop", "ALL",
                "--label", f"{WATCH_LABEL}={token}", *deadline,
                "--security-opt", "no-new-privileges", "--pids-limit", str(PIDS_LIMIT),
                "--log-driver", "json-file", "--log-opt", f"max-size={LOG_BYTES}",
                "--memory", str(limits.memory_bytes), "--memory-swap", str(limits.memory_bytes),
                "--ulimit", f"data={limits.data_limit_bytes}:{limits.data_limit_bytes}",
                "--ulimit", f"fsize={limits.disk_bytes}:{limits.disk_bytes}",
                "--shm-size", str(limits.memory_bytes // 2), "--cpus", f"{cpus:g}",
                *[a for key, value in GC_ENVIRONMENT.items() for a in ("--env", f"{key}={value}")],
                *[a for host, target, readonly in mounts
                  for a in ("--mount", f"type=bind,source={host_path(host, host_mounts())},target={target}"
                                       + (",readonly" if readonly else ""))],
                *engine_differences(self.engine, gpu, self.gpu_devices), self.image]

    def launch(self, folders: JobFolders, limits: JobLimits, gpu: bool, name: str) -> Execution:
        """Run the container to its end or its time limit, measuring its memory peak, CPU time (its cgroup, read every
        POLL_S while it runs) and GPU use; always removed. Four engine commands a job: `image inspect` (check), the
        attached `run` (the container's end, status and log lines), `inspect` (how it ended) and `rm`."""
        name = f"{self.name_prefix}-{name}"
        quota = DiskQuota(folders, limits.disk_bytes)
        for _ in range(2):
            try:
                return self._run(folders, limits, gpu, name, quota)
            except _NameInUse:  # left by a runner killed during this job (its pk): removed, tried again
                continue
        raise EngineFault(f"{self.engine} could not start the job: the container name {name} stays in use")

    def _watchdog(self, token: str, limits: JobLimits) -> subprocess.Popen:
        """The container's watchdog (watchdog.py), in its own session: it removes the container labelled `token`
        when this runner dies or at its deadline, holding `hold_fds` until then."""
        try:
            return subprocess.Popen([sys.executable, "-I", str(WATCHDOG), self.engine, token,
                                     str(watch_seconds(limits))], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True, pass_fds=self.hold_fds)
        except OSError as exc:
            raise EmulationError(f"the job's watchdog could not start: {exc}") from None

    def _run(self, folders: JobFolders, limits: JobLimits, gpu: bool, name: str, quota: DiskQuota) -> Execution:
        id_file = folders.tmp.parent.absolute() / CONTAINER_ID_FILE  # the engine runs in the job's folder
        id_file.unlink(missing_ok=True)
        token = uuid.uuid4().hex
        watchdog = self._watchdog(token, limits)
        started = time.perf_counter()
        try:
            # in the job's folder: Podman's conmon leaves a file `oom` in its working folder when the job is OOM-killed
            process = subprocess.Popen(self.command(folders, limits, gpu, name, id_file, token),
                                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       cwd=folders.tmp.parent)
        except FileNotFoundError:
            _tell(watchdog, "done")
            raise EngineFault(f"{self.engine} is not installed (no `{self.engine}` on PATH)") from None
        _tell(watchdog, f"pid {process.pid}", end=False)
        try:
            with process:
                try:
                    tails = read_tails(process)
                    sampled = self._follow(process, name, id_file, limits, gpu, started, quota)
                    stdout_tail, stderr_tail = (tail.lines() for tail in tails)
                except BaseException:  # not waiting for the container's end: it is removed below
                    process.kill()
                    raise
            container_id = _read_id(id_file)
            if container_id is None:  # the engine made no container: what it wrote is all its own
                if NAME_IN_USE in "\n".join(stderr_tail):
                    raise _NameInUse
                raise EngineFault(f"{self.engine} could not start the job: "
                                  f"{_first_line(stderr_tail, self.engine, process.returncode)}")
            state = json.loads(self._cli("inspect", "--format", "{{json .State}}", name).stdout)
            never_started = state.get("StartedAt", NEVER).startswith(NEVER)
            diff = "" if never_started or not self.list_writes else self._cli("diff", name, check=False).stdout
        finally:  # the container, or one of its name left by a killed runner; then its watchdog is told
            self._cli("rm", "--force", name, check=False)
            id_file.unlink(missing_ok=True)
            _tell(watchdog, "done")
        if state.get("Running"):  # the attached `run` ended without the container: the engine failed, not the job
            raise EngineFault(f"{self.engine} lost track of the job's container {name} (`run` ended)")
        if never_started:  # made, never started: what the `run` wrote is the engine's
            if process.returncode in NOT_STARTED:  # the image's command cannot run: the job fails, as on GC
                return Execution(exit_code=process.returncode, wall_seconds=sampled.wall,
                                 start_error=start_error("\n".join(stderr_tail)))
            raise EngineFault(f"{self.engine} could not start the job: "
                              f"{_first_line(stderr_tail, self.engine, process.returncode)}")
        return Execution(exit_code=state.get("ExitCode"), wall_seconds=sampled.wall, timed_out=sampled.timed_out,
                         disk_error=quota.error, oom_killed=bool(state.get("OOMKilled")),
                         peak_memory_bytes=sampled.peak, cpu_seconds=sampled.cpu,
                         gpus=gpu_count(gpu, self.gpu_devices),
                         used_gpu=sampled.used_gpu if (not gpu or sampled.gpu_measurable) else None,
                         stdout_tail=stdout_tail, stderr_tail=stderr_tail,
                         written_outside=written_outside(diff, self.engine))

    def _follow(self, process: subprocess.Popen, name: str, id_file: Path, limits: JobLimits, gpu: bool,
                started: float, quota: DiskQuota) -> _Sampled:
        """Wait for the attached `run` to end, reading the container's cgroup every POLL_S (once it is found) and
        stopping it at its time or disk limit."""
        sampled, cgroups, last_gpu_poll = _Sampled(), _Cgroups(self.engine, name, id_file), 0.0
        while process.poll() is None:
            memory, cpu = cgroups.find()
            sampled.peak = _read_peak(memory) or sampled.peak
            sampled.cpu = _read_cpu_seconds(cpu) or sampled.cpu
            now = time.perf_counter()
            if gpu and not sampled.used_gpu and now - last_gpu_poll > 0.5:
                last_gpu_poll = now
                pids = _gpu_pids()
                sampled.gpu_measurable = pids is not None
                sampled.used_gpu = bool(pids and pids & _cgroup_pids(memory))
            disk_error = quota.exceeded()
            if disk_error or now - started > limits.time_limit_s:
                sampled.timed_out = not disk_error
                self._cli("kill", name, check=False)
                try:
                    process.wait(timeout=KILL_WAIT_S)
                except subprocess.TimeoutExpired:  # no container of the name yet: the run stopped, whatever made
                    process.kill()                 # of it removed after
                    process.wait()
                break
            try:  # the container's end ends the wait at once
                process.wait(timeout=POLL_S)
            except subprocess.TimeoutExpired:
                pass
        sampled.wall = time.perf_counter() - started
        # the container's cgroup goes with its last process: the last reading stands unless it is still there
        memory, cpu = cgroups.found or (None, None)
        sampled.peak, sampled.cpu = _read_peak(memory) or sampled.peak, _read_cpu_seconds(cpu) or sampled.cpu
        quota.exceeded(final=True)
        return sampled


@dataclass
class _Sampled:
    """What was measured of a container while it ran."""

    wall: float = 0.0
    timed_out: bool = False
    peak: int | None = None
    cpu: float | None = None
    used_gpu: bool = False
    gpu_measurable: bool = True


class _NameInUse(Exception):
    """The container's name is taken: by a container left by a runner killed during the same job."""


def _tell(watchdog: subprocess.Popen, word: str, end: bool = True) -> None:
    """Send the watchdog a line; with `end`, close its pipe and reap it (it exits at "done")."""
    try:
        watchdog.stdin.write(f"{word}\n".encode())
        watchdog.stdin.flush()
        if end:
            watchdog.stdin.close()
    except OSError:  # it ended already (past the deadline: it removed the container)
        pass
    if end:
        try:
            watchdog.wait(timeout=KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            log.warning("a job container's watchdog (pid %d) did not end", watchdog.pid)


def _read_id(id_file: Path) -> str | None:
    """The container id the engine wrote into `id_file` (`run --cidfile`), None before."""
    try:
        return id_file.read_text().strip() or None
    except OSError:
        return None


def _first_line(lines: list[str], engine: str, status: int | None) -> str:
    first = next((line for line in lines if line.strip()), f"status {status}")
    return first.removeprefix(f"{engine}: ").removeprefix("Error: ").strip()


# where each engine puts a container's cgroups, learned from its first container (its pid's /proc/PID/cgroup): the
# folder with the container's id as `{id}`, per engine and MEMORY_FILES/CPU_FILES
_cgroup_layouts: dict[tuple[str, str], str] = {}
LAYOUT_WAIT_S = 2.0  # a container's cgroup not where its engine's last one was after this: asked of the engine


class _Cgroups:
    """The memory and CPU cgroup folders of one job's container, found once it runs: where the engine's previous
    container's were (no engine command), else through its pid (`ENGINE inspect`, each POLL_S until it runs)."""

    def __init__(self, engine: str, name: str, id_file: Path):
        self.engine, self.name, self.id_file = engine, name, id_file
        self.found: tuple[Path | None, Path | None] | None = None
        self.container_id: str | None = None
        self.id_seen = 0.0

    def find(self) -> tuple[Path | None, Path | None]:
        if self.found is not None:
            return self.found
        if self.container_id is None:
            self.container_id = _read_id(self.id_file)
            self.id_seen = time.monotonic()
            if self.container_id is None:
                return None, None
        kinds = {"memory": MEMORY_FILES, "cpu": CPU_FILES}
        layouts = [_cgroup_layouts.get((self.engine, kind)) for kind in kinds]
        if all(layouts):
            folders = [Path(layout.replace("{id}", self.container_id)) for layout in layouts]
            if all(folder.is_dir() for folder in folders):
                self.found = (folders[0], folders[1])
                return self.found
            if time.monotonic() - self.id_seen < LAYOUT_WAIT_S:  # not started yet
                return None, None
        pid = int(_engine(self.engine, "inspect", "--format", "{{.State.Pid}}", self.name, check=False).stdout.strip()
                  or 0)
        if not pid:  # not started yet, or ended
            return None, None
        folders = [_container_cgroup(pid, self.container_id, files) for files in kinds.values()]
        for kind, folder in zip(kinds, folders):
            if folder is not None and str(folder).count(self.container_id) == 1:
                _cgroup_layouts[(self.engine, kind)] = str(folder).replace(self.container_id, "{id}")
        self.found = (folders[0], folders[1])
        return self.found
