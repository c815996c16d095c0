"""Running a detector on one study: `run_detector(route, study, stopping)` fills the study's output/ or raises
(InputError: the detector failed; DetectorKilled; subprocess.TimeoutExpired; GatewayStopping). The one place that
knows how a detector is run: a command here, a detector container (or the job-runner service of image routes)
watching an inbox folder, or a grand-challenge algorithm image run here by the job runner (image_routes.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from ..errors import InputError
from .config import Route
from .image_routes import run_image_route

POLL_SECONDS = 0.5
IMAGE_JOB_MARGIN_SECONDS = 300


class DetectorKilled(Exception):
    """The detector died of a signal (killed, out of memory): the study runs again, up to `max_attempts`."""


class GatewayStopping(Exception):
    """The gateway is stopping while a detector container works on the study: it stays in running/ (and the job in
    the inbox), and the next start takes it up again."""


def die_with_parent() -> None:
    """In the detector's process: be killed when the gateway dies, so that no orphan writes into the queue."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def run_command(route: Route, study: Path) -> None:
    """The route's command on the study's input/ into its output/; its home and temporary folder are a scratch
    folder of the study (removed afterwards), so that nothing is written outside the work folder."""
    command = [*route.command, "--input", str(study / "input"), "--output", str(study / "output")]
    scratch = study / "scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    env = {**os.environ, "HOME": str(scratch), "TMPDIR": str(scratch)}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=route.timeout_seconds,
                              preexec_fn=die_with_parent, env=env)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if done.returncode < 0:
        raise DetectorKilled(f"detector {route.name} killed by signal {-done.returncode}")
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        last = (errors or done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise InputError(f"detector {route.name} failed: {last.removeprefix('error: ')}")


def run_in_inbox(route: Route, study: Path, stopping: threading.Event) -> None:
    """Hand the study to the detector container watching `route.inbox` (a job already handed over, e.g. before a
    restart of the gateway, is not handed over again) and take its output back."""
    job = study.name
    folders = {state: route.inbox / state / job for state in ("pending", "running", "done")}
    if not any(folder.exists() for folder in folders.values()):
        staging = route.inbox / "pending" / f".{job}.part"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(study / "input", staging / "input")
        os.rename(staging, folders["pending"])
    # an image route's job runner converts the study and starts the container before the job's own time limit
    deadline = time.monotonic() + route.timeout_seconds + (IMAGE_JOB_MARGIN_SECONDS if route.image else 0)
    while not folders["done"].exists():
        if time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(str(route.inbox), route.timeout_seconds)
        if stopping.wait(POLL_SECONDS):
            raise GatewayStopping(job)
    status = json.loads((folders["done"] / "status.json").read_text())
    shutil.rmtree(study / "output", ignore_errors=True)
    if (folders["done"] / "output").exists():
        shutil.move(folders["done"] / "output", study / "output")
    shutil.rmtree(folders["done"])
    if status["returncode"] != 0:
        raise InputError(f"detector {route.name} failed: {status['error']}")


def run_detector(route: Route, study: Path, stopping: threading.Event) -> None:
    """The route's detector on the study's input/ into its output/."""
    if route.image is not None and route.inbox is None:
        run_image_route(route, study)
    elif route.inbox is None:
        run_command(route, study)
    else:
        run_in_inbox(route, study, stopping)
