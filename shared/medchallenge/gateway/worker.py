"""The gateway: its storage server and the worker taking studies through the queue (complete, route, run, send)."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from ..errors import InputError
from ..io import write_json_atomic, write_text_atomic
from .config import GatewayConfig, Route
from .jobs import POLL_SECONDS, DetectorKilled, GatewayStopping, run_detector
from .notes import send_failure_note
from .pacs import Pacs
from .queue import WorkQueue, read_job, recover, study_instances
from .routing import route_study
from .server import StorageServer

log = logging.getLogger("medchallenge.gateway")

RESULT_FOLDER = "dicom"


class Gateway:
    """The storage SCP and the worker over the work queue."""

    def __init__(self, config: GatewayConfig):
        self.config = config
        self.queue = WorkQueue(config.work_dir)
        self.pacs = Pacs(config)
        self.server = StorageServer(config, self.queue)
        self.stopping = threading.Event()

    def complete_studies(self) -> None:
        """incoming -> received for every study quiet for `study_quiet_seconds`."""
        now = time.time()
        with self.queue.lock:
            for study in self.queue.studies("incoming"):
                if now - study.stat().st_mtime >= self.config.study_quiet_seconds:
                    received = self.queue.folder("received", study.name)
                    if received.exists():  # more of a study still waiting: merge
                        for path in (study / "input").iterdir():
                            os.replace(path, received / "input" / path.name)
                        shutil.rmtree(study)
                    else:
                        self.queue.move(study, "received")

    def run_next(self) -> bool:
        """Process the oldest received study; False when there is none."""
        studies = self.queue.studies("received")
        if not studies:
            return False
        study = studies[0]
        instances = study_instances(study)
        if set(instances) <= self.queue.processed_instances(study.name):
            self.queue.move(study, "duplicate")
            log.info("study %s: all %d instance(s) were processed before; not run again", study.name, len(instances))
            return True
        route, holds = route_study(self.config.routes, study)
        if route is None:
            write_text_atomic(study / "error.txt", f"no route takes this study ({holds})\n")
            self.queue.move(study, "unroutable")
            log.error("study %s: no route takes it (%s); moved to unroutable", study.name, holds)
            return True
        job = read_job(study)
        job.update(route=route.name, attempts=job.get("attempts", 0) + 1, instances=instances)
        write_json_atomic(study / "job.json", job)
        study = self.queue.move(study, "running")
        try:
            self.run_study(study, route, job)
        except GatewayStopping:
            log.info("study %s: left to the detector; taken up again at the next start", study.name)
        except DetectorKilled as exc:
            if job["attempts"] >= self.config.max_attempts:
                self.fail(study, f"{exc} ({job['attempts']} time(s))", route)
            else:
                shutil.rmtree(study / "output", ignore_errors=True)
                self.queue.move(study, "received")
                log.error("study %s: %s; queued again", study.name, exc)
        except subprocess.TimeoutExpired:
            self.fail(study, f"detector {route.name} ran over {route.timeout_seconds:g} s", route)
        except InputError as exc:
            self.fail(study, str(exc), route)
        except Exception as exc:  # a gateway bug or a broken result file: this study fails, the gateway goes on
            self.fail(study, f"{type(exc).__name__}: {exc}", route)
        return True

    def run_study(self, study: Path, route: Route, job: dict) -> None:
        """Run the route's detector on the study and send its results (InputError, DetectorKilled or
        TimeoutExpired when that fails)."""
        started = time.perf_counter()
        run_detector(route, study, self.stopping)
        detector_seconds = time.perf_counter() - started
        results = sorted((study / "output" / RESULT_FOLDER).glob("*.dcm"))
        sending = time.perf_counter()
        sent = self.pacs.send(self.queue, results)
        job.update(detector_seconds=round(detector_seconds, 3), send_seconds=round(time.perf_counter() - sending, 3),
                   results=[p.name[:-4] for p in results], sent=sent)
        write_json_atomic(study / "job.json", job)
        shutil.rmtree(study / "input")  # the images stay in the PACS; the UIDs stay in job.json
        self.queue.move(study, "sent")
        log.info("study %s: %s in %.1f s, %d result object(s) sent (%d sent before)", study.name, route.name,
                 detector_seconds, sent, len(results) - sent)

    def fail(self, study: Path, message: str, route: Route | None = None) -> None:
        """The study to failed/ with its error line, and, when a detector failed on it, a failure note to the PACS."""
        write_text_atomic(study / "error.txt", message + "\n")
        study = self.queue.move(study, "failed")
        log.error("study %s: %s; moved to failed", study.name, message)
        if route is not None:
            send_failure_note(self.queue, self.pacs, study, route, message)

    def serve(self) -> None:
        recover(self.queue, self.config.max_attempts)
        self.server.start()
        try:
            while not self.stopping.is_set():
                self.complete_studies()
                if not self.run_next():
                    self.stopping.wait(POLL_SECONDS)
        finally:
            self.server.shutdown()
            log.info("gateway stopped")
