"""Planning a phase: each submission's image and model identified by their hashes, and one task spec per (submission,
case) job in OUT/tasks/<job_id>.json: everything a task needs to run the job on any machine that sees OUT.

A job's id is the hash of what decides its result: the challenge, the image's digest, the case file's hash, the model
tarball's hash and the limits. The same image and model on the same case is one job, whichever teams submitted it;
a new submission, case or limit is a new job; a team's new image replaces its jobs."""

from __future__ import annotations

import functools
import json
import os
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ..errors import InputError
from ..grand_challenge.emulator import AlgorithmSpec
from ..io import write_json_atomic
from ..jobs import JobLimits
from ..jobs.model_tarball import unpack_model_once
from .archive import DEFAULT_MAX_IMAGE_GB, GIB, VerifiedImage, verify_archive
from .backend import Resources
from .cases import Case
from .hashes import HashCache, sha256_file, sha256_json
from .images import EngineError, tag_digest
from .layout import PhaseLayout
from .submissions import Submission

SPEC_VERSION = 1


@dataclass(frozen=True)
class PhaseSettings:
    """What the phase's command line sets for every submission (a submission may ask for its own memory and GPU)."""

    challenge: str
    engine: str
    limits: JobLimits
    gpu: bool
    max_image_bytes: int = int(DEFAULT_MAX_IMAGE_GB * GIB)  # an archive's uncompressed size


@dataclass
class PlannedSubmission:
    """A submission's jobs (case name, job id) in case order, or why it was refused before any job."""

    team: str
    jobs: list[tuple[str, str]] = field(default_factory=list)
    resources: Resources | None = None
    refused: str | None = None


def job_id(challenge: str, digest: str, case_hash: str, model_hash: str | None, limits: JobLimits,
           gpu: bool) -> str:
    return sha256_json({"challenge": challenge, "image": digest, "case": case_hash, "model": model_hash,
                        "limits": json.loads(_shared_json(limits)), "gpu": gpu})[:32]


@functools.lru_cache(maxsize=256)
def _shared_json(value: object) -> str:
    """The JSON of a frozen value every task spec of a submission shares (its limits, its resources, the
    challenge's sockets), made once: a submission has a spec per case, 500 in a phase of 500 cases."""
    if isinstance(value, AlgorithmSpec):
        return json.dumps({"outputs": [socket.slug for socket in value.output_sockets],
                           "sockets": [asdict(socket) for socket in (value.input_socket, *value.output_sockets)]})
    return json.dumps(value.to_json())


def resources(limits: JobLimits, gpu: bool) -> Resources:
    """What each of the submission's tasks asks for: the job's CPUs as the job runner gives them (the limit, else
    grand-challenge's instance's), its memory limit, its GPU and time limit."""
    return Resources(cpus=limits.effective_cpus(gpu), memory_gb=limits.memory_gb, gpus=int(gpu),
                     time_limit_s=limits.time_limit_s)


def _image(submission: Submission, settings: PhaseSettings, hashes: HashCache) -> tuple[str, dict | None]:
    """The submission's image digest, and for an archive what it was verified to hold (kept by the archive's size
    and time: a rerun does not read it again, but a lower budget refuses it)."""
    if submission.archive is not None:
        verified = json.loads(hashes.get(submission.archive, "verified-image", lambda path: json.dumps(
            verify_archive(path, settings.max_image_bytes).to_json())))
        if verified["size"] > settings.max_image_bytes:
            raise InputError(f"image archive {submission.archive.name}: larger than the image size budget of "
                             f"{settings.max_image_bytes / GIB:g} GiB uncompressed")
        return VerifiedImage.from_json(verified).digest, verified
    try:
        return tag_digest(settings.engine, submission.image), None
    except EngineError as exc:
        raise InputError(str(exc)) from None


def task_spec(layout: PhaseLayout, settings: PhaseSettings, spec: AlgorithmSpec, submission: Submission,
              digest: str, model_hash: str | None, limits: JobLimits, gpu: bool, case: Case,
              model_dir: Path | None = None, verified: dict | None = None) -> dict:
    """A job's task spec; `model_dir`: the submission's model unpacked once for the phase (else `model` is the
    tarball, extracted into the job's folder); `verified`: what the submission's archive was verified to hold, which
    is all its task loads."""
    identity = job_id(settings.challenge, digest, case.hash, model_hash, limits, gpu)
    pk_base = int(identity[:12], 16) * 16
    return {
        "version": SPEC_VERSION, "job_id": identity, "out": str(layout.out), "challenge": settings.challenge,
        "engine": settings.engine, "python": sys.executable,
        "image": {"ref": None if submission.archive else submission.image,
                  "archive": str(submission.archive) if submission.archive else None, "digest": digest,
                  "verified": verified},
        "run_image": digest,
        "inputs": [{"socket": spec.input_socket.slug, "pk": pk_base, "image_pk": case.image_pk,
                    "image_name": case.image_name, "image_file": str(case.image_file)}],
        **json.loads(_shared_json(spec)),
        "model": str(submission.model) if submission.model and not model_dir else None,
        "model_dir": str(model_dir) if model_dir else None,
        "limits": json.loads(_shared_json(limits)), "gpu": gpu,
        "resources": json.loads(_shared_json(resources(limits, gpu))),
        "work_dir": str(layout.job(identity)), "pk_base": pk_base,
    }


def write_if_changed(path: Path, value: dict, durable: bool = True) -> bool:
    """An unchanged file is left alone (its time stamp too); whether it was written (compact JSON: a machine's
    file, written 25,000 times for a 50 x 500 phase)."""
    try:
        if json.loads(path.read_text()) == value:
            return False
    except (OSError, ValueError):
        pass
    write_json_atomic(path, value, indent=None, durable=durable)
    return True


def plan_submission(layout: PhaseLayout, settings: PhaseSettings, spec: AlgorithmSpec, submission: Submission,
                    cases: list[Case], hashes: HashCache, specs_present: set[str] | None = None) -> PlannedSubmission:
    """The submission's task specs written (and its submission.json), or its refusal in one line: a bad archive,
    model or image of one team does not stop the phase. `specs_present`: the file names in OUT/tasks
    (`existing_specs`, listed here unless given: a phase lists them once for all its submissions)."""
    planned = PlannedSubmission(submission.team)
    gpu = settings.gpu if submission.gpu is None else submission.gpu
    record = {"team": submission.team, "image": submission.image, "model": submission.model.name
              if submission.model else None, "limits": settings.limits.to_json(), "gpu": gpu}
    try:
        if submission.refused:
            raise InputError(submission.refused)
        limits = replace(settings.limits, memory_gb=submission.memory_gb or settings.limits.memory_gb)
        record["limits"] = limits.to_json()
        digest, verified = _image(submission, settings, hashes)
        model_hash = hashes.get(submission.model, "sha256", sha256_file) if submission.model else None
        model_dir = unpack_model_once(submission.model, layout.model(model_hash), limits.disk_bytes) \
            if submission.model and model_hash else None
    except InputError as exc:  # EmulationError too: limits out of bounds
        planned.refused = str(exc)
        write_if_changed(layout.submission_file(submission.team), {**record, "refused": planned.refused, "jobs": []})
        return planned
    planned.resources = resources(limits, gpu)
    tasks = [task_spec(layout, settings, spec, submission, digest, model_hash, limits, gpu, case, model_dir,
                       verified) for case in cases]
    planned.jobs = [(case.name, task["job_id"]) for case, task in zip(cases, tasks)]
    tasks_hash = sha256_json(tasks)
    if _stored_tasks_hash(layout.submission_file(submission.team)) != tasks_hash \
            or not {f"{task['job_id']}.json" for task in tasks} <= (existing_specs(layout) if specs_present is None
                                                                     else specs_present):
        written = [write_if_changed(layout.task(task["job_id"]), task, durable=False) for task in tasks]
        if any(written):
            os.sync()  # the specs on disk, at once (an fsync each is 3 ms: 75 s for 25,000), before submission.json
    write_if_changed(layout.submission_file(submission.team),
                     {**record, "digest": digest, "model_sha256": model_hash, "refused": None,
                      "jobs": [{"case": name, "job_id": identity} for name, identity in planned.jobs],
                      "tasks_sha256": tasks_hash})
    return planned


def _stored_tasks_hash(path: Path) -> str | None:
    try:
        return json.loads(path.read_text()).get("tasks_sha256")
    except (OSError, ValueError, AttributeError):
        return None


def existing_specs(layout: PhaseLayout) -> set[str]:
    """The names in OUT/tasks, in one listing: a submission whose task specs are all there and hash as its
    submission.json says is not read again (a rerun of 25,000 jobs would read 25,000 specs)."""
    try:
        return set(os.listdir(layout.tasks))
    except FileNotFoundError:
        return set()
