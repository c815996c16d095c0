"""A route with `backend = "slurm"`: its study's job on a Slurm cluster, through the phase's code. The study is
converted here (image_routes.prepare_job), its job written as a phase task spec (phase.plan.task_spec) in
WORK/cluster/<study>/ and submitted as one Slurm job running `python -m medchallenge.phase.task SPEC` (the unit a
phase's array task runs: the job runner on the node, with its engine); its result goes into the study's DICOM
objects as a local job's does (image_routes.job_datasets).

WORK (the gateway's work_dir) must be a shared folder the nodes see at the same path, and the gateway's Python
(sys.executable) must be there too, as for a phase (docs/phase.md).

The guarantees of the gateway hold: each submission is written into the study's folder (slurm.json) under a job name
of its own before `sbatch`, and its Slurm id after, so a gateway restarted meanwhile takes up the same job instead of
submitting another (by its id, or by its name where the gateway stopped between the two); a job
the cluster lost (its node failed, preempted, cancelled, killed by the node's out-of-memory killer: the task wrote no
final state, phase.slurm's causes) is submitted again up to the route's `max_resubmissions`, then the study fails
with a note; a job that failed on its own gets the detector's failure note, its record in job/result.json."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import threading
from pathlib import Path

from ..errors import InputError
from ..grand_challenge.emulator import AlgorithmSpec
from ..io import write_json_atomic
from ..jobs import JobLimits
from ..phase.cases import Case
from ..phase.hashes import sha256_file, sha256_json
from ..phase.layout import PhaseLayout
from ..phase.plan import PhaseSettings, resources, task_spec, write_if_changed
from ..phase.records import FINAL, is_final, read_result, read_state
from ..phase.slurm import SlurmBackend, active_jobs, job_end, jobs_named, lost_cause
from ..phase.submissions import Submission
from .audit import utc_now
from .config import Route
from .image_routes import JOB_FOLDER, PreparedJob, job_datasets, prepare_job, write_results
from .stopping import GatewayStopping

log = logging.getLogger("medchallenge.gateway")

CLUSTER_FOLDER = "cluster"  # WORK/cluster/<study>: the job's folder on the shared file system
RECORD = "slurm.json"  # in the study's folder: the Slurm jobs submitted for it, and how each ended
ENGINE = "docker"
POLL_SECONDS = 2.0
CLUSTER_COMMANDS = ("sbatch", "squeue", "scontrol")


def cluster_layout(study: Path) -> PhaseLayout:
    """WORK/cluster/<study>: the job's spec, input and result, at a path that stays the same while the study moves
    between the queue's folders (WORK/running/<study> -> WORK/received/<study> at a restart)."""
    return PhaseLayout.of(study.parent.parent / CLUSTER_FOLDER / study.name)


def write_task(route: Route, study: Path, prepared: PreparedJob, layout: PhaseLayout, disk_gb: float) -> dict:
    """The study's job as a phase task spec (the converted input copied to the shared folder)."""
    value = prepared.input_value
    image_file = layout.out / "input" / value.image_file.name
    image_file.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(value.image_file, image_file)
    gpu = route.slurm.gpus > 0
    limits = JobLimits(memory_gb=route.memory_gb, time_limit_s=route.timeout_seconds, disk_gb=disk_gb,
                       cpus=route.slurm.cpus)
    case = Case(file=study, hash=sha256_json([study.name, sha256_file(image_file)]), image_pk=value.image_pk,
                image_name=value.image_name, image_file=image_file)
    algorithm = AlgorithmSpec(image=route.image, inference_script="", case_patterns=(),
                              input_socket=value.socket, output_sockets=tuple(prepared.interface.outputs))
    spec = task_spec(layout, PhaseSettings(route.interface, ENGINE, limits, gpu), algorithm,
                     Submission(route.name, route.image, None, route.model), None, None, limits, gpu, case)
    write_if_changed(layout.task(spec["job_id"]), spec)
    return spec


def _read_record(study: Path) -> dict:
    try:
        record = json.loads((study / RECORD).read_text())
    except FileNotFoundError:
        return {"task": None, "submissions": []}
    except ValueError:
        raise InputError(f"study {study.name}: {RECORD} is not valid JSON") from None
    return record


def take_up_unrecorded(record: dict, ran_to_its_end: bool, backend: SlurmBackend) -> None:
    """A submission written before `sbatch` whose Slurm id was not (the gateway stopped between the two): the job
    Slurm knows by its name; else, where the job's state says it ran to its end, a job Slurm has forgotten since
    (the entry stays, without an id); else none was submitted and the entry goes."""
    current = record["submissions"][-1] if record["submissions"] else None
    if current is None or current["slurm_job_id"] is not None:
        return
    named = jobs_named(backend.job_name(current["name"]))
    if named:
        current["slurm_job_id"] = named[-1]
    elif not ran_to_its_end:
        record["submissions"].pop()


def _wait(job_id: str, stopping: threading.Event) -> None:
    """Until Slurm has the job neither pending nor running (a requeued job is waited for too)."""
    while active_jobs([job_id]):
        if stopping.wait(POLL_SECONDS):
            raise GatewayStopping(job_id)


def _await_job(route: Route, study: Path, prepared: PreparedJob, layout: PhaseLayout, disk_gb: float, record: dict,
               stopping: threading.Event) -> None:
    """Until the study's job is over (succeeded, or failed on its own): submitted unless a job of the study is on
    the cluster already, and again each time the cluster loses it, at most `max_resubmissions` times."""
    backend = SlurmBackend(layout, partition=route.slurm.partition, account=route.slurm.account,
                           options=list(route.slurm.extra), job_name_prefix=route.slurm.job_name_prefix)
    submissions = record["submissions"]
    take_up_unrecorded(record, record["task"] is not None and is_final(read_state(layout, record["task"])), backend)
    while True:
        current = submissions[-1] if submissions else None
        if current is not None and current["end"] is None and current["slurm_job_id"] is not None:
            _wait(current["slurm_job_id"], stopping)
        state = read_state(layout, record["task"]) if record["task"] else None
        if is_final(state):
            current["end"] = state["status"]
            write_json_atomic(study / RECORD, record)
            return
        if current is not None and current["end"] is None:
            current["end"] = (state.get("cause") or "engine") if state else lost_cause(job_end(current["slurm_job_id"]))
            write_json_atomic(study / RECORD, record)
            log.warning("study %s: the cluster lost Slurm job %s (%s%s)", study.name, current["slurm_job_id"],
                        current["end"], f": {state['error']}" if state and state.get("error") else "")
        lost = [s["end"] for s in submissions if s["end"] not in FINAL]
        if len(lost) > route.slurm.max_resubmissions:
            raise InputError(f"detector {route.name}: the cluster lost its job {len(lost)} time(s) (last: "
                             f"{lost[-1]}); not submitted again")
        if not submissions:  # what an earlier study of this name may have left
            shutil.rmtree(layout.out, ignore_errors=True)
        spec = write_task(route, study, prepared, layout, disk_gb)
        shutil.rmtree(layout.job(spec["job_id"]), ignore_errors=True)  # the state of the attempt the cluster lost
        asks = dataclasses.replace(resources(JobLimits(**spec["limits"]), spec["gpu"]), gpus=route.slurm.gpus)
        name = f"gw-{route.name}-{sha256_json([study.name, spec['job_id'], len(submissions)])[:16]}"
        submissions.append({"name": name, "slurm_job_id": None, "submitted": utc_now(), "end": None})
        record["task"] = spec["job_id"]
        write_json_atomic(study / RECORD, record)  # before sbatch: a restart finds the job by this name
        submissions[-1]["slurm_job_id"] = backend.submit_task(name, layout.task(spec["job_id"]), asks).job_id
        write_json_atomic(study / RECORD, record)  # before waiting: a restart waits for this same job


def run_on_cluster(route: Route, study: Path, stopping: threading.Event, disk_gb: float) -> None:
    """The route's job on the study through Slurm, into its output/dicom/, as image_routes.run_image_route does it
    locally; the Slurm jobs submitted, and how each ended, in the study's slurm.json."""
    layout = cluster_layout(study)
    work = study / JOB_FOLDER
    record = _read_record(study)
    shutil.rmtree(work, ignore_errors=True)
    try:
        prepared = prepare_job(route, study, work)
        _await_job(route, study, prepared, layout, disk_gb, record, stopping)
        sockets = {socket.slug: socket for socket in (prepared.input_value.socket, *prepared.interface.outputs)}
        datasets = job_datasets(prepared, read_result(layout, record["task"], sockets), work / "result.json")
    finally:  # the study's converted copies go, and the job's folder once no job of the study is on the cluster;
        # its record (result.json) stays
        for name in ("upload", "converted"):
            shutil.rmtree(work / name, ignore_errors=True)
        if not record["submissions"] or record["submissions"][-1]["end"] is not None:
            shutil.rmtree(layout.out, ignore_errors=True)
    write_results(study, datasets)
