"""A job in a container as grand-challenge runs it (the sagemaker shim on a SageMaker training instance): the image's
own entrypoint without arguments as its own non-root user, no network, GC's environment, memory (cgroup and
RLIMIT_DATA), time and CPU limits, /input read-only, /output, /opt/ml/model and an empty on-disk /tmp writable, the
GPU when asked for. Conditions and their sources: conditions.py. A job runner that itself runs in a container (the
hospital's job-runner service) gives the engine its job folders by their host paths, read from its own mounts."""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .conditions import GC_ENVIRONMENT, STRIPPED_PREFIX, JobLimits
from .errors import EmulationError
from .launch import Execution, JobFolders

LOG_LINES = 500  # GC keeps the last 500 lines of a job's stdout and stderr
LOG_BYTES = "20m"  # the container's log on this host's disk, at most (a job printing without end fills no disk)
POLL_S = 0.1
# `docker run`'s status when the container was made but its command could not be invoked (126) or found (127)
NOT_STARTED = (126, 127)
ROOT_USERS = ("", "root", "0")
# mount points of the job and their parents: changes there are docker's, not the job's
MOUNTS = ("/input", "/output", "/tmp", "/opt/ml/model")
PIDS_LIMIT = 4096  # protects the host from a fork bomb; far above what a job starts


def _docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    try:
        result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout,
                                errors="replace")
    except FileNotFoundError:
        raise EmulationError("docker is not installed (no `docker` on PATH)") from None
    except subprocess.TimeoutExpired:
        raise EmulationError(f"`docker {args[0]}` did not answer in {timeout:g} s") from None
    if check and result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        raise EmulationError(f"`docker {args[0]}` failed: {lines[-1] if lines else f'status {result.returncode}'}")
    return result


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
    def inspect(cls, image: str) -> ImageConfig:
        result = _docker("image", "inspect", image, check=False)
        if result.returncode != 0:
            raise EmulationError(f"image {image}: not found by this Docker engine (`docker load < FILE.tar.gz` the "
                                 "file you would upload, or build it)")
        data = json.loads(result.stdout)[0]
        config = data.get("Config") or {}
        return cls(data["Id"], config.get("User") or "", config.get("Entrypoint"), config.get("Cmd"),
                   config.get("Env") or [], data.get("Architecture", ""))


def _tail(text: str) -> list[str]:
    return text.splitlines()[-LOG_LINES:]


def _memory_cgroup(pid: int, container_id: str) -> Path | None:
    """The memory cgroup folder of the container's first process (v1 `memory` controller or the v2 unified tree),
    if visible here and named after the container (a process that is gone, or another one, gives None)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for wanted, root, probe in (("memory", "/sys/fs/cgroup/memory", "memory.max_usage_in_bytes"),
                                ("", "/sys/fs/cgroup", "memory.peak")):
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if controllers == wanted and container_id in path and Path(f"{root}{path}/{probe}").exists():
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


def host_has_gpu() -> bool:
    """A GPU this Docker engine can give a container: nvidia-smi lists one and the engine has the NVIDIA runtime or
    CDI devices. A job runner in a container (no nvidia-smi, no host files) asks the engine alone: its NVIDIA
    runtime."""
    def runtimes() -> str:
        return _docker("info", "--format", "{{json .Runtimes}} {{json .CDISpecDirs}}", check=False).stdout

    if shutil.which("nvidia-smi") is None:
        return host_mounts() is not None and "nvidia" in runtimes()
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    if listed.returncode != 0 or "GPU" not in listed.stdout:
        return False
    return "nvidia" in runtimes() or Path("/etc/cdi/nvidia.yaml").exists() or Path("/var/run/cdi/nvidia.yaml").exists()


def _leaves(paths: list[str]) -> list[str]:
    """The paths of `docker diff` that are not a parent of another one (a changed folder is listed with its files)."""
    ordered = sorted(set(paths))
    return [p for i, p in enumerate(ordered) if not (i + 1 < len(ordered) and ordered[i + 1].startswith(p + "/"))]


def written_outside(diff: str) -> list[str]:
    """Files the job added, changed or deleted in the image's file system (not in a mounted folder)."""
    protected = {m for mount in MOUNTS for m in [mount, *(str(p) for p in Path(mount).parents)]}
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


class DockerImage:
    """A job's container: the image run as grand-challenge runs it."""

    def __init__(self, image: str, name_prefix: str = "medchallenge-job"):
        self.image = image
        self.name_prefix = name_prefix
        self.description = f"docker image {image}"
        self._gpu: bool | None = None
        self._notes: list[str] | None = None

    def check(self) -> list[str]:
        """GC's upload checks (non-root user, linux/amd64, something to run) and what the shim changes; the image is
        inspected once."""
        if self._notes is None:
            self._notes = self._inspect()
        return self._notes

    def _inspect(self) -> list[str]:
        config = ImageConfig.inspect(self.image)
        user = config.user.split(":")[0]
        if user in ROOT_USERS:
            raise EmulationError(f"image {self.image}: The container runs as root. Please add a user, group and "
                                 "USER instruction to your Dockerfile, rebuild, test and upload the container "
                                 "again (grand-challenge refuses it)")
        if config.architecture != "amd64":
            raise EmulationError(f"image {self.image}: architecture {config.architecture or 'unknown'}; "
                                 "grand-challenge runs linux/amd64 images only (docker build --platform=linux/amd64)")
        if not config.entrypoint and not config.cmd:
            raise EmulationError(f"image {self.image}: no ENTRYPOINT or CMD; grand-challenge runs the image's own, "
                                 "without arguments")
        stripped = sorted(e.split("=", 1)[0] for e in config.env if e.lower().startswith(STRIPPED_PREFIX))
        return ([f"the image sets {', '.join(stripped)}: grand-challenge removes every GRAND_CHALLENGE_* variable "
                 "before the job runs, so the job does not see them there (they are set here)"] if stripped else [])

    def gpu_available(self) -> bool:
        if self._gpu is None:
            self._gpu = host_has_gpu()
        return self._gpu

    def command(self, folders: JobFolders, limits: JobLimits, gpu: bool, name: str) -> list[str]:
        """`docker run` with GC's conditions (no command: the image's entrypoint and cmd run as they are)."""
        cpus = limits.effective_cpus(gpu)
        mounts = [(folders.input, "/input", True), (folders.output, "/output", False),
                  (folders.model, "/opt/ml/model", False), (folders.tmp, "/tmp", False)]
        return ["docker", "run", "--detach", "--name", name, "--network", "none", "--cap-drop", "ALL",
                "--security-opt", "no-new-privileges", "--pids-limit", str(PIDS_LIMIT),
                "--log-driver", "json-file", "--log-opt", f"max-size={LOG_BYTES}",
                "--memory", str(limits.memory_bytes), "--memory-swap", str(limits.memory_bytes),
                "--ulimit", f"data={limits.data_limit_bytes}:{limits.data_limit_bytes}",
                "--shm-size", str(limits.memory_bytes // 2), "--cpus", f"{cpus:g}",
                *[a for key, value in GC_ENVIRONMENT.items() for a in ("--env", f"{key}={value}")],
                *[a for host, target, readonly in mounts
                  for a in ("--mount", f"type=bind,source={host_path(host, host_mounts())},target={target}"
                                       + (",readonly" if readonly else ""))],
                *(["--gpus", "1"] if gpu else []), self.image]

    def launch(self, folders: JobFolders, limits: JobLimits, gpu: bool, name: str) -> Execution:
        """Run the container to its end or its time limit, measuring its memory peak and GPU use; always removed."""
        name = f"{self.name_prefix}-{name}"
        _docker("rm", "--force", name, check=False)  # left by a runner killed during this job (the same pk)
        started = time.perf_counter()
        run = _docker(*self.command(folders, limits, gpu, name)[1:], check=False)
        if run.returncode in NOT_STARTED:  # the image's command cannot run: the job fails, as on grand-challenge
            _docker("rm", "--force", name, check=False)
            return Execution(exit_code=run.returncode, wall_seconds=time.perf_counter() - started,
                             start_error=start_error(run.stderr))
        if run.returncode != 0:
            _docker("rm", "--force", name, check=False)
            first = next((line for line in run.stderr.splitlines() if line.strip()), f"status {run.returncode}")
            raise EmulationError(f"docker could not start the job: {first.removeprefix('docker: ').strip()}")
        try:
            return self._follow(name, run.stdout.strip(), limits, gpu, started)
        finally:
            _docker("rm", "--force", name, check=False)

    def _follow(self, name: str, container_id: str, limits: JobLimits, gpu: bool, started: float) -> Execution:
        pid = int(_docker("inspect", "--format", "{{.State.Pid}}", name).stdout.strip() or 0)
        cgroup = _memory_cgroup(pid, container_id) if pid and container_id else None
        waiter = subprocess.Popen(["docker", "wait", name], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True)
        peak, used_gpu, timed_out, last_gpu_poll, gpu_measurable = _read_peak(cgroup), False, False, 0.0, True
        while waiter.poll() is None:
            peak = _read_peak(cgroup) or peak
            now = time.perf_counter()
            if gpu and not used_gpu and now - last_gpu_poll > 0.5:
                last_gpu_poll = now
                pids = _gpu_pids()
                gpu_measurable = pids is not None
                used_gpu = bool(pids and pids & _cgroup_pids(cgroup))
            if now - started > limits.time_limit_s:
                timed_out = True
                _docker("kill", name, check=False)
                waiter.wait()
                break
            time.sleep(POLL_S)
        wall = time.perf_counter() - started
        state = json.loads(_docker("inspect", "--format", "{{json .State}}", name).stdout)
        if state.get("Running"):  # `docker wait` ended without the container: the engine failed, not the job
            raise EmulationError(f"docker lost track of the job's container {name} (`docker wait` failed)")
        logs = subprocess.run(["docker", "logs", "--tail", str(LOG_LINES), name], capture_output=True, text=True,
                              errors="replace")
        diff = _docker("diff", name, check=False).stdout
        return Execution(exit_code=state.get("ExitCode"), wall_seconds=wall, timed_out=timed_out,
                         oom_killed=bool(state.get("OOMKilled")), peak_memory_bytes=peak,
                         used_gpu=used_gpu if (not gpu or gpu_measurable) else None,
                         stdout_tail=_tail(logs.stdout), stderr_tail=_tail(logs.stderr),
                         written_outside=written_outside(diff))
