"""`medchallenge gateway --config FILE --job-runner`: the service that runs the jobs of the routes with an inbox,
apart from the gateway. The gateway faces the hospital network (its DICOM port); whoever may use the Docker engine is
root on the host in all but name, so the gateway never holds the Docker socket: a route with an `inbox` is handed
over through that folder, and this service, which holds the socket and needs no network, watches the inbox of every
such route and runs its job (image_routes.run_image_route). It reads the same configuration, so it runs only the
images the hospital configured, whatever a compromised gateway writes into an inbox. On the Docker host or in a
container (compose.hospital.yaml's job-runner): there the job folders are given to the engine by their host paths,
read from the container's own mounts (jobs.docker_run.host_path), and an inbox no mount holds stops it at start."""

from __future__ import annotations

import logging
import subprocess
import threading
from pathlib import Path

from ..errors import InputError
from ..inbox import watch_inbox
from ..jobs.conditions import DEFAULT_DISK_GB, GIB
from ..jobs.docker_run import host_mounts, host_path, sweep_expired
from ..jobs.runner import TIME_LIMIT
from ..jobs.uploads import preload_panimg
from .config import GatewayConfig, Route
from .image_routes import run_image_route

log = logging.getLogger("medchallenge.gateway")
SWEEP_S = 60  # job containers past their deadline removed this often


def run_route_job(route: Route, job: Path, disk_gb: float = DEFAULT_DISK_GB) -> None:
    """One job of the route's inbox, writing at most `disk_gb`: InputError (into the job's status.json) for any
    failure, the job runner's time-limit line for a job over its time (the gateway's time-out note)."""
    try:
        run_image_route(route, job, disk_gb)
    except subprocess.TimeoutExpired:
        raise InputError(f"{TIME_LIMIT} ({route.timeout_seconds:g} s)") from None


def _sweep(stopping: threading.Event) -> None:
    """Remove job containers past their deadline now and every SWEEP_S: those of a job runner stopped with its
    container (their watchdogs with it)."""
    while True:
        try:
            sweep_expired()
        except InputError as exc:
            log.warning("job runner: expired job containers not swept: %s", exc)
        if stopping.wait(SWEEP_S):
            return


def serve_job_runner(config: GatewayConfig, stopping: threading.Event) -> None:
    """Watch the inbox of every route with one, one thread per route (and one per job running: up to the route's
    max_parallel_jobs), until `stopping` is set; an image route's inbox that no job container could be given
    (job_runner in a container, the inbox not mounted) stops it first. panimg, which converts each study for its
    job, is imported at the start, not at the first study."""
    routes = [r for r in config.routes if r.inbox is not None]
    if not routes:
        raise InputError("no route with an inbox in the configuration: the job runner would have nothing to do")
    mounts = host_mounts()
    for route in routes:
        if route.image is not None:
            host_path(route.inbox, mounts)
    preload_panimg()  # every route's study is converted for its job (image_routes.prepare_job)
    threading.Thread(target=_sweep, args=(stopping,), name="job-runner sweep", daemon=True).start()
    disk_gb = config.limits.work_quota_bytes / GIB  # what one job may write
    threads = [threading.Thread(target=watch_inbox, name=f"job-runner {route.name}", daemon=True,
                                args=(route.inbox, lambda job, route=route: run_route_job(route, job, disk_gb),
                                      stopping.is_set, config.disk_full_retry_seconds, route.max_parallel_jobs))
               for route in routes]
    for thread in threads:
        thread.start()
    log.info("job runner: watching %s", ", ".join(str(r.inbox) for r in routes))
    for thread in threads:
        thread.join()
    log.info("job runner stopped")
