"""Running a route's algorithm on one study: `run_detector(route, study, stopping)` fills the study's output/ or
raises (InputError: the job failed; subprocess.TimeoutExpired; GatewayStopping). One way: a grand-challenge job by
the project's job runner (image_routes.py), run in this process, or, for a route with an `inbox`, handed through
that folder to the job-runner service (job_runner.py), which holds the Docker socket the gateway never holds, or, for
a route with backend = "slurm", submitted to the cluster (cluster.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from ..errors import InputError
from ..jobs.conditions import DEFAULT_DISK_GB
from ..jobs.errors import EngineFault
from ..jobs.runner import TIME_LIMIT
from .cluster import run_on_cluster
from .config import Route
from .image_routes import JOB_FOLDER, run_image_route
from .stopping import GatewayStopping

POLL_SECONDS = 0.05  # a look for the job-runner service's done/<study> (one stat): the result taken within this
JOB_MARGIN_SECONDS = 300  # the job runner converts the study and starts the container before the job's time limit


def run_in_inbox(route: Route, study: Path, stopping: threading.Event) -> None:
    """Hand the study to the job-runner service watching `route.inbox` (a job already handed over, e.g. before a
    restart of the gateway, is not handed over again) and take its output back."""
    job = study.name
    folders = {state: route.inbox / state / job for state in ("pending", "running", "done")}
    if not any(folder.exists() for folder in folders.values()):
        staging = route.inbox / "pending" / f".{job}.part"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(study / "input", staging / "input")
        os.rename(staging, folders["pending"])
    deadline = time.monotonic() + route.timeout_seconds + JOB_MARGIN_SECONDS
    while not folders["done"].exists():
        if time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(str(route.inbox), route.timeout_seconds)
        if stopping.wait(POLL_SECONDS):
            raise GatewayStopping(job)
    status = json.loads((folders["done"] / "status.json").read_text())
    for name in ("output", JOB_FOLDER):  # the results, and the job's record (result.json: its last log lines)
        shutil.rmtree(study / name, ignore_errors=True)
        if (folders["done"] / name).exists():
            shutil.move(folders["done"] / name, study / name)
    shutil.rmtree(folders["done"])
    if status["returncode"] != 0:  # the job runner's line (job_runner.run_route_job)
        if status["error"].startswith(TIME_LIMIT):
            raise subprocess.TimeoutExpired(str(route.inbox), route.timeout_seconds)
        raise (EngineFault if status.get("cause") == "engine" else InputError)(status["error"])


def run_detector(route: Route, study: Path, stopping: threading.Event, disk_gb: float = DEFAULT_DISK_GB) -> None:
    """The route's algorithm on the study's input/ into its output/, writing at most `disk_gb` (the job runner
    service's own configuration sets it for a route with an inbox)."""
    if route.slurm is not None:
        run_on_cluster(route, study, stopping, disk_gb)
    elif route.inbox is None:
        run_image_route(route, study, disk_gb)
    else:
        run_in_inbox(route, study, stopping)
