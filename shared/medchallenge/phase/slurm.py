"""The Slurm backend of a phase: each submission's tasks are one job array (`sbatch --array=0-(n-1)%K`; several
where the cluster's MaxArraySize is below n: slurm_limits) whose task i runs the one-task entry point on the i-th
spec of a manifest (OUT/slurm/<team>-<n>.tasks); its evaluation is a job that depends on its arrays
(`--dependency=afterany`), the leaderboard one that depends on every evaluation. Its options are the site's
(slurm_options), never the submissions file's.

A job never runs twice: every job submitted is recorded (OUT/slurm/submitted/<id>.json), so a later `phase run`
(after a Ctrl-C, which leaves the jobs to the cluster) and `phase status` know which jobs a task of an earlier array
still holds (squeue): the run waits for them instead of submitting them again; and a task runs its job only while
it holds the job's lease (phase.leases), which a second task respects.

OUT is the shared folder every node sees: task specs, the converted cases, the images' archives (each node loads an
archive once, by digest: phase.images.ensure_loaded), results and the Slurm logs (OUT/logs/slurm-*.out). The jobs
run `node_python` (the site's option; by default the Python that submits, sys.executable) with the submitter's
environment (sbatch exports it): that path, with medchallenge installed, must be on the nodes.

What Slurm reports goes into the job's state.json: a task that ended without a result (killed by the node's
out-of-memory killer, preempted, its node failed, cancelled, past Slurm's time limit, or the runner itself failed)
gets {"status": "interrupted", "cause": ...}, which the next `phase run` runs again; a finished task gets the times
Slurm requeued it ("requeued") and its Slurm id, and where sacct answers Slurm's accounting of it (its runner's:
the container is not in the Slurm step; docs/scale.md). The causes are read from `scontrol show job` (slurmctld
keeps a finished job for MinJobAge) by the evaluation job before it evaluates and by `phase run` while it waits.

    python -m medchallenge.phase.slurm task MANIFEST            (a task of an array: SLURM_ARRAY_TASK_ID)
    python -m medchallenge.phase.slurm after OUT [--array JOB=MANIFEST ...] -- COMMAND...
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..io import write_json_atomic, write_text_atomic
from .backend import Resources
from .layout import PhaseLayout
from .leases import lease_held
from .records import is_final, read_state, write_state
from .slurm_limits import ClusterLimits, array_chunks, cluster_limits
from .slurm_options import DEFAULT_PREFIX, check_prefix, check_sbatch_options
from .slurm_queue import ACTIVE, SlurmError, active_jobs, queue_states, slurm_command

log = logging.getLogger("medchallenge.phase")

MEMORY_MARGIN_MB = 512  # the task's runner (Python, the engine's CLI) beside the job's own memory limit
TIME_MARGIN_S = 900  # loading an image archive, output checks: Slurm's limit is the job's limit plus this
POLL_S = 5.0
# why a task ended without a result, from Slurm's final state of it
CAUSES = {"OUT_OF_MEMORY": "node_oom", "PREEMPTED": "preempted", "NODE_FAIL": "node_fail", "BOOT_FAIL": "node_fail",
          "CANCELLED": "cancelled", "DEADLINE": "cancelled", "TIMEOUT": "slurm_time_limit", "FAILED": "task_failed",
          "COMPLETED": "no_result"}
RUNNING = {"RUNNING", "CONFIGURING", "COMPLETING", "STAGE_OUT", "SIGNALING"}  # of ACTIVE: a task that has started
OPTIONS = ("partition", "account", "max_parallel", "options", "job_name_prefix", "max_array_size", "step_memory_gb",
           "step_time_limit_s", "poll_s", "node_python")
SACCT_FORMAT = "JobID,State,TotalCPU,MaxRSS"
SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}  # sacct's sizes


@dataclass(frozen=True)
class SlurmHandle:
    """A submitted Slurm job: a submission's array (with its manifest) or a step, and its Slurm job name."""

    job_id: str
    manifest: Path | None = None
    name: str = ""


@dataclass(frozen=True)
class TaskEnd:
    """What Slurm says of one task of an array."""

    state: str
    restarts: int
    exit_code: str


def job_options(resources: Resources) -> list[str]:
    """sbatch's options of one task: the job's CPUs, memory (plus the runner's), GPUs and time (plus loading and
    checks); requeued when its node fails."""
    memory_mb = math.ceil(resources.memory_gb * 1024) + MEMORY_MARGIN_MB
    minutes = math.ceil((resources.time_limit_s + TIME_MARGIN_S) / 60)
    return [f"--cpus-per-task={max(1, math.ceil(resources.cpus))}", f"--mem={memory_mb}M", f"--time={minutes}",
            "--requeue", *([f"--gres=gpu:{resources.gpus}"] if resources.gpus else [])]


def task_options(resources: Resources, count: int, max_parallel: int | None) -> list[str]:
    """sbatch's options of one submission's array: a task per spec, at most `max_parallel` at once, each with
    job_options."""
    throttle = f"%{max_parallel}" if max_parallel else ""
    return [f"--array=0-{count - 1}{throttle}", *job_options(resources)]


def parse_scontrol(text: str) -> list[dict[str, str]]:
    """`scontrol show job --oneliner`: one dict of KEY=VALUE per line (values without spaces are all we read)."""
    return [dict(re.findall(r"(?:^|\s)([A-Za-z/:]+)=(\S*)", line)) for line in text.splitlines() if "JobId=" in line]


def _shown_jobs(job_id: str) -> list[dict[str, str]]:
    """`scontrol show job` of `job_id` (every task of an array); empty once slurmctld forgot it (MinJobAge)."""
    return parse_scontrol(slurm_command("scontrol", "show", "job", "--oneliner", job_id, check=False).stdout)


def _task_end(job: dict[str, str]) -> TaskEnd:
    return TaskEnd(job.get("JobState", ""), int(job.get("Restarts", "0") or 0), job.get("ExitCode", ""))


def array_task_ends(array_job: str) -> dict[int, TaskEnd]:
    """Slurm's state of each task of an array slurmctld still knows (by index); pending ranges are left out."""
    return {int(job["ArrayTaskId"]): _task_end(job) for job in _shown_jobs(array_job)
            if job.get("ArrayJobId") == array_job and job.get("ArrayTaskId", "").isdigit()}


def job_end(job_id: str) -> TaskEnd | None:
    """Slurm's state of a job that is not an array, or None where slurmctld no longer knows it."""
    return next((_task_end(job) for job in _shown_jobs(job_id) if job.get("JobId") == job_id), None)


def jobs_named(name: str) -> list[str]:
    """The ids of the jobs slurmctld knows (pending, running, or over within MinJobAge) of the job name `name`
    (SlurmBackend.job_name), oldest first."""
    shown = parse_scontrol(slurm_command("scontrol", "show", "job", "--oneliner", check=False).stdout)
    named = [job["JobId"] for job in shown if job.get("JobName") == name and job.get("JobId", "").isdigit()]
    return sorted(named, key=int)


def lost_cause(end: TaskEnd | None) -> str:
    """Why a task ended without a result, in the phase's words (CAUSES), from Slurm's final state of it."""
    if end is None:
        return "forgotten"  # over longer than slurmctld's MinJobAge ago
    return CAUSES.get(end.state, end.state.lower())


def manifest_specs(manifest: Path) -> list[Path]:
    return [Path(line) for line in manifest.read_text().splitlines() if line.strip()]


def record_causes(layout: PhaseLayout, handle: SlurmHandle) -> list[str]:
    """Note in state.json why each task of the array that is over ended without a result (Slurm's word for it);
    returns the job ids noted."""
    if handle.manifest is None:
        return []
    ends = array_task_ends(handle.job_id)
    noted = []
    for index, spec in enumerate(manifest_specs(handle.manifest)):
        job_id, end = spec.stem, ends.get(index)
        state = read_state(layout, job_id)
        slurm_id = f"{handle.job_id}_{index}"
        if end is None or end.state in ACTIVE or is_final(state) or lease_held(layout, job_id):
            continue  # a task holding the job's lease (another array's) writes its state
        if state is not None and state.get("slurm_job_id") == slurm_id:  # noted already (by the task itself)
            continue
        layout.job(job_id).mkdir(parents=True, exist_ok=True)
        write_state(layout, job_id, {"status": "interrupted", "cause": lost_cause(end),
                                     "slurm_state": end.state, "exit_code": end.exit_code,
                                     "requeued": end.restarts, "slurm_job_id": slurm_id})
        noted.append(job_id)
    return noted


def slurm_seconds(text: str) -> float | None:
    """sacct's time ([D-][HH:]MM:SS[.mmm]) in seconds; None for an empty or unreadable one."""
    days, _, clock = text.strip().rpartition("-")
    parts = clock.split(":")
    try:
        if not 2 <= len(parts) <= 3:
            return None
        return sum(float(part) * 60**i for i, part in enumerate(reversed(parts))) + int(days or 0) * 86_400
    except ValueError:
        return None


def slurm_bytes(text: str) -> int | None:
    """sacct's size (`1234K`, `1.5M`, `0`) in bytes; None for an empty or unreadable one."""
    found = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([KMGT]?)", text.strip())
    return round(float(found.group(1)) * SIZE_UNITS[found.group(2)]) if found else None


def sacct_usage(array_job: str) -> dict[str, dict[str, float | int | None]]:
    """Slurm's accounting of each finished task of an array (by its id ARRAY_INDEX): its batch step's TotalCPU and
    MaxRSS, as `slurm_cpu_seconds` and `slurm_max_rss_bytes`; empty where sacct has no accounting (a cluster
    without slurmdbd: "Slurm accounting storage is disabled") or there is no sacct."""
    try:
        listed = slurm_command("sacct", f"--jobs={array_job}", f"--format={SACCT_FORMAT}", "--parsable2",
                               "--noheader", check=False)
    except SlurmError:
        return {}
    usage = {}
    for line in listed.stdout.splitlines() if listed.returncode == 0 else []:
        fields = line.split("|")
        if len(fields) == 4 and fields[0].endswith(".batch") and fields[1] not in ACTIVE:
            usage[fields[0].removesuffix(".batch")] = {"slurm_cpu_seconds": slurm_seconds(fields[2]),
                                                       "slurm_max_rss_bytes": slurm_bytes(fields[3])}
    return usage


def record_usage(layout: PhaseLayout, handle: SlurmHandle) -> list[str]:
    """Add Slurm's accounting (sacct_usage) to the state of each finished task of the array that lacks it; returns
    the job ids noted."""
    if handle.manifest is None:
        return []
    usage = None
    noted = []
    for index, spec in enumerate(manifest_specs(handle.manifest)):
        state = read_state(layout, spec.stem)
        slurm_id = f"{handle.job_id}_{index}"
        if not is_final(state) or state.get("slurm_job_id") != slurm_id or "slurm_cpu_seconds" in state:
            continue
        usage = sacct_usage(handle.job_id) if usage is None else usage
        if slurm_id in usage:
            write_state(layout, spec.stem, {**state, **usage[slurm_id]})
            noted.append(spec.stem)
    return noted


@dataclass(frozen=True)
class SlurmGroup:
    """A submission's tasks as one or more arrays (as many as the cluster's MaxArraySize needs)."""

    arrays: tuple[SlurmHandle, ...]


def flat(handles: Sequence[SlurmHandle | SlurmGroup]) -> list[SlurmHandle]:
    """The Slurm jobs of handles and groups, each once."""
    jobs = [job for h in handles for job in (h.arrays if isinstance(h, SlurmGroup) else (h,))]
    return list({job.job_id: job for job in jobs}.values())


def submitted_jobs(layout: PhaseLayout) -> list[SlurmHandle]:
    """The Slurm jobs earlier `phase run`s submitted for OUT (OUT/slurm/submitted/<id>.json), oldest first."""
    handles = []
    for path in (layout.out / "slurm" / "submitted").glob("*.json"):
        try:
            data = json.loads(path.read_text())
            handle = SlurmHandle(str(data["job_id"]), Path(data["manifest"]) if data.get("manifest") else None,
                                 str(data.get("name", "")))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if handle.job_id.isdigit():
            handles.append(handle)
    return sorted(handles, key=lambda h: int(h.job_id))


def live_tasks(layout: PhaseLayout, arrays: Sequence[SlurmHandle], states: dict[str, str]
               ) -> dict[str, tuple[SlurmHandle, str]]:
    """The jobs of `arrays` that one of their tasks holds in Slurm (`states`: queue_states): job id -> (its array,
    "running" or "queued")."""
    live: dict[str, tuple[SlurmHandle, str]] = {}
    for handle in arrays:
        try:
            specs = manifest_specs(handle.manifest)
        except OSError:
            continue
        for task, state in states.items():
            array, _, index = task.partition("_")
            if array == handle.job_id and index.isdigit() and int(index) < len(specs):
                live[specs[int(index)].stem] = (handle, "running" if state in RUNNING else "queued")
    return live


def phase_in_slurm(layout: PhaseLayout) -> dict[str, str]:
    """What `phase status` counts of OUT's jobs in Slurm: job id -> "running" or "queued", by the arrays earlier
    runs recorded; empty where none was recorded or Slurm does not answer (then nothing is claimed)."""
    arrays = [h for h in submitted_jobs(layout) if h.manifest is not None]
    if not arrays:
        return {}
    try:
        states = queue_states([h.job_id for h in arrays])
    except SlurmError as exc:
        log.warning("warning: %s: the jobs of earlier Slurm arrays are not counted", exc)
        return {}
    return {job: state for job, (_, state) in live_tasks(layout, arrays, states).items()}


class SlurmBackend:
    """A phase's work as Slurm jobs; `wait` polls squeue and notes why tasks ended without a result. Every job it
    submits is recorded (OUT/slurm/submitted/<id>.json), so that a later run knows what is still in Slurm (`held`)."""

    def __init__(self, layout: PhaseLayout, partition: str | None = None, account: str | None = None,
                 max_parallel: int | None = None, options: Sequence[str] | None = None,
                 job_name_prefix: str = DEFAULT_PREFIX, max_array_size: int | None = None,
                 step_memory_gb: float = 4, step_time_limit_s: float = 7200, poll_s: float = POLL_S,
                 node_python: str | None = None, **unknown):
        if unknown:
            raise InputError(f"Slurm backend: {', '.join(sorted(unknown))}: not an option (known: "
                             f"{', '.join(OPTIONS)})")
        if max_parallel is not None and int(max_parallel) < 1:
            raise InputError(f"--max-parallel {max_parallel}: expected at least 1")
        self.layout = layout
        self.max_parallel = int(max_parallel) if max_parallel else None
        self.common = [*([f"--partition={partition}"] if partition else []),
                       *([f"--account={account}"] if account else []),
                       *check_sbatch_options(options, "--sbatch-option")]
        self.prefix = check_prefix(job_name_prefix, "--job-name-prefix")
        self.max_array_size = max_array_size
        self.step_memory_gb = float(step_memory_gb)
        self.step_time_limit_s = float(step_time_limit_s)
        self.poll_s = float(poll_s)
        self.python = node_python or sys.executable  # what the jobs run on the nodes
        self.folder = layout.out / "slurm"
        self.limits: ClusterLimits | None = None  # read at the first submission's tasks
        self.tasks_submitted = 0
        self.earlier_steps: list[SlurmHandle] = []  # an earlier run's evaluations running now: waited for

    def job_name(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def _sbatch(self, name: str, options: list[str], command: list[str], manifest: Path | None = None) -> SlurmHandle:
        self.layout.logs.mkdir(parents=True, exist_ok=True)
        output = self.layout.logs / ("slurm-%x-%A_%a.out" if any(o.startswith("--array") for o in options)
                                     else "slurm-%x-%j.out")
        submitted = slurm_command("sbatch", "--parsable", f"--job-name={self.job_name(name)}",
                                  f"--chdir={self.layout.out}", f"--output={output}", *options, *self.common,
                                  "--wrap", f"exec {shlex.join(command)}")
        job_id = submitted.stdout.strip().split(";")[0]
        if not job_id.isdigit():
            raise SlurmError(f"sbatch gave no job id: {submitted.stdout.strip()[:200]}")
        handle = SlurmHandle(job_id, manifest, self.job_name(name))
        record = self.folder / "submitted" / f"{job_id}.json"
        record.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(record, {"job_id": job_id, "name": handle.name,
                                   "manifest": str(manifest) if manifest else None})
        return handle

    def cluster_limits(self) -> ClusterLimits:
        """The cluster's limits (read once), the site's max_array_size when lower."""
        if self.limits is None:
            limits = cluster_limits()
            size = min(limits.max_array_size, self.max_array_size or limits.max_array_size)
            self.limits = ClusterLimits(size, limits.max_jobs)
        return self.limits

    def _manifest(self, team: str, specs: Sequence[Path]) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        number = sum(1 for _ in self.folder.glob(f"{team}-*.tasks"))
        manifest = self.folder / f"{team}-{number + 1}.tasks"
        write_text_atomic(manifest, "".join(f"{spec.absolute()}\n" for spec in specs))
        return manifest

    def submit_tasks(self, team: str, specs: Sequence[Path], resources: Resources) -> SlurmGroup:
        """The specs as arrays of at most the cluster's MaxArraySize tasks; `max_parallel` shared among them."""
        limits = self.cluster_limits()
        self.tasks_submitted += len(specs)
        if limits.max_jobs is not None and self.tasks_submitted > limits.max_jobs:
            raise SlurmError(f"{self.tasks_submitted} tasks to submit: more than the {limits.max_jobs} jobs this "
                             "cluster takes from one user at once (MaxJobCount, MaxSubmitJobs); run the phase's "
                             "submissions in parts (a submissions file each, one OUT)")
        chunks = array_chunks(len(specs), limits.max_array_size)
        throttle = max(1, self.max_parallel // len(chunks)) if self.max_parallel else None
        arrays = []
        for chunk in chunks:
            manifest = self._manifest(team, [specs[i] for i in chunk])
            arrays.append(self._sbatch(team, task_options(resources, len(chunk), throttle),
                                       [self.python, "-m", "medchallenge.phase.slurm", "task", str(manifest)],
                                       manifest))
        log.info("submission %s: %d job(s) as Slurm array %s", team, len(specs),
                 ", ".join(a.job_id for a in arrays))
        return SlurmGroup(tuple(arrays))

    def submit_task(self, name: str, spec: Path, resources: Resources) -> SlurmHandle:
        """One task as a job of its own (not an array): `python -m medchallenge.phase.task SPEC`."""
        handle = self._sbatch(name, job_options(resources),
                              [self.python, "-m", "medchallenge.phase.task", str(spec.absolute())])
        log.info("task %s: Slurm job %s", spec.stem, handle.job_id)
        return handle

    def submit_after(self, handles: Sequence[SlurmHandle | SlurmGroup], argv: Sequence[str],
                     name: str) -> SlurmHandle:
        jobs = flat([*handles, *(h for h in self.earlier_steps if h.name == self.job_name(name))])
        after = [f"--dependency=afterany:{':'.join(h.job_id for h in jobs)}"] if jobs else []
        arrays = [a for h in jobs if h.manifest is not None for a in ("--array", f"{h.job_id}={h.manifest}")]
        options = [*after, "--cpus-per-task=1", f"--mem={math.ceil(self.step_memory_gb * 1024)}M",
                   f"--time={math.ceil(self.step_time_limit_s / 60)}"]
        command = [self.python, "-m", "medchallenge.phase.slurm", "after", str(self.layout.out), *arrays, "--",
                   *argv]
        return self._sbatch(name, options, command)

    def held(self) -> dict[str, SlurmHandle]:
        """The jobs that a task of an earlier run's array still holds in Slurm (pending or running): job id -> its
        array, which this run waits for instead of submitting the job again. The earlier runs' evaluation and
        leaderboard jobs still pending are cancelled (this run submits its own, after every array); those running
        are waited for; the records of jobs Slurm no longer runs are dropped."""
        earlier = submitted_jobs(self.layout)
        states = queue_states([h.job_id for h in earlier])
        arrays = [h for h in earlier if h.manifest is not None]
        live = live_tasks(self.layout, arrays, states)
        for handle in earlier:
            tasks = [state for task, state in states.items() if task.partition("_")[0] == handle.job_id]
            if handle.manifest is None and tasks and all(state not in RUNNING for state in tasks):
                slurm_command("scancel", handle.job_id, check=False)
                log.info("%s: Slurm job %s of an earlier run cancelled before it started (submitted again)",
                         handle.name, handle.job_id)
                tasks = []
            elif handle.manifest is None and tasks:
                self.earlier_steps.append(handle)
            if not tasks:
                (self.folder / "submitted" / f"{handle.job_id}.json").unlink(missing_ok=True)
        if live:
            log.info("%d job(s) still in Slurm from an earlier run (array %s): waited for, not submitted again",
                     len(live), ", ".join(sorted({h.job_id for h, _ in live.values()}, key=int)))
        return {job: handle for job, (handle, _) in live.items()}

    def interrupted(self) -> str:
        """What Ctrl-C leaves: the jobs go on in Slurm."""
        return (f"interrupted: the submitted jobs go on in Slurm (`squeue --name={self.prefix}...`, `scancel` "
                f"stops them); `medchallenge phase status {self.layout.out}` counts them, and the same command run "
                "again waits for them and submits only the jobs no Slurm task holds")

    def wait(self, handles: Sequence[SlurmHandle | SlurmGroup]) -> None:
        """Until Slurm has none of the handles' jobs pending or running; Ctrl-C leaves them to the cluster. An
        array's states are read again (and Slurm asked why tasks ended) only when its tasks in squeue change."""
        jobs = flat(handles)
        ids = [h.job_id for h in jobs]
        arrays = [h for h in jobs if h.manifest is not None]
        phase_jobs = {spec.stem: None for h in arrays for spec in manifest_specs(h.manifest)}
        seen: dict[str, frozenset[str]] = {}
        finished: set[str] = set()  # a final state never changes: not read again (25,000 files a poll at full size)
        shown = None
        while ids:
            active = active_jobs(ids)
            changed = False
            for handle in arrays:
                tasks = frozenset(a for a in active if a.split("_")[0] == handle.job_id)
                if seen.get(handle.job_id) != tasks:
                    seen[handle.job_id] = tasks
                    record_causes(self.layout, handle)
                    record_usage(self.layout, handle)
                    changed = True
            if changed or shown is None:
                finished.update(job for job in phase_jobs
                                if job not in finished and is_final(read_state(self.layout, job)))
            progress = f"slurm: {len(finished)}/{len(phase_jobs)} job(s) done, {len(active)} pending or running"
            if progress != shown:
                log.info("%s", progress)
                shown = progress
            if not active:
                break
            time.sleep(self.poll_s)


def run_array_task(manifest: Path) -> int:
    """The array's task SLURM_ARRAY_TASK_ID: the one-task entry point on its spec; the state it wrote gets Slurm's id
    of the task and how often Slurm requeued it."""
    from .task import HELD
    from .task import main as run_task

    index = int(os.environ["SLURM_ARRAY_TASK_ID"])
    spec = manifest_specs(manifest)[index]
    code = run_task([str(spec)])
    if code == HELD:  # another task's job: its state is that task's
        return 0
    layout = PhaseLayout(Path(json.loads(spec.read_text())["out"]))
    slurm = {"slurm_job_id": f"{os.environ.get('SLURM_ARRAY_JOB_ID', '')}_{index}",
             "requeued": int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)}
    state = read_state(layout, spec.stem)
    if state is not None:
        write_state(layout, spec.stem, {**state, **slurm})
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m medchallenge.phase.slurm")
    commands = parser.add_subparsers(dest="command", required=True)
    task = commands.add_parser("task", help="run a task of a submission's array")
    task.add_argument("manifest", type=Path)
    after = commands.add_parser("after", help="note why tasks ended without a result, then run COMMAND")
    after.add_argument("out", type=Path)
    after.add_argument("--array", action="append", default=[], metavar="JOB=MANIFEST")
    after.add_argument("command", nargs="+")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.command == "task":
        return run_array_task(args.manifest)
    layout = PhaseLayout(args.out)
    for array in args.array:
        job_id, _, manifest = array.partition("=")
        noted = record_causes(layout, SlurmHandle(job_id, Path(manifest)))
        if noted:
            log.info("array %s: %d task(s) ended without a result (noted in their state.json)", job_id, len(noted))
        record_usage(layout, SlurmHandle(job_id, Path(manifest)))
    sys.stdout.flush()
    return subprocess.call(args.command)


if __name__ == "__main__":
    sys.exit(main())
