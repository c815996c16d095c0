"""The gateway: its storage server and the worker taking studies through the queue (complete, route, run, send).
Whatever goes wrong with one study moves it to failed/ (a note to the PACS where it can be made); a full disk keeps
the study queued and the worker retries later; the worker itself never stops on an error."""

from __future__ import annotations

import logging
import shutil
import subprocess
import threading
import time
from pathlib import Path

from ..errors import InputError
from ..io import write_json_atomic, write_text_atomic
from ..jobs.conditions import GIB
from ..logs import escape
from .audit import AuditLog, utc_now
from .config import GatewayConfig, Route
from .jobs import POLL_SECONDS, run_detector
from .notes import Failure, send_failure_note
from .pacs import Pacs
from .queue import (HANDLING, INTERRUPTED, RECEIVING, TOO_LARGE, WorkQueue, is_disk_full, read_job, read_senders,
                    recover, study_instances)
from .routing import route_study
from .server import StorageServer
from .stopping import GatewayStopping

log = logging.getLogger("medchallenge.gateway")

RESULT_FOLDER = "dicom"
RECOUNT_SECONDS = 10.0


class StudyFailed(Exception):
    """The study cannot be processed: `failure` says why in the note's words, the message in the log's."""

    def __init__(self, failure: Failure, message: str):
        super().__init__(message)
        self.failure = failure


class Gateway:
    """The storage SCP and the worker over the work queue."""

    def __init__(self, config: GatewayConfig):
        self.config = config
        self.queue = WorkQueue(config.work_dir)
        self.audit = AuditLog(config.audit_log)
        self.pacs = Pacs(config)
        self.server = StorageServer(config, self.queue, self.audit)
        self.stopping = threading.Event()
        self.retry_at = 0.0  # while the disk is full: when the worker tries again
        self.recounted = 0.0
        self.current: Path | None = None  # the study the worker is on
        self.stuck: set[str] = set()  # studies whose handling raised even while failing them: skipped

    def complete_studies(self) -> None:
        """incoming -> received for every study quiet for `study_quiet_seconds`."""
        now = time.time()
        with self.queue.lock:
            for study in self.queue.studies("incoming"):
                if now - study.stat().st_mtime >= self.config.study_quiet_seconds:
                    self.queue.study_bytes.pop(study.name, None)
                    self.queue.move(study, "received")

    def finish(self, study: Path, state: str, **record) -> Path:
        """The study into a final state, with its audit line."""
        study = self.queue.move(study, state)
        job = read_job(study)
        self.audit.write("study", study=study.name, result=state, route=job.get("route"), senders=read_senders(study),
                         attempts=job.get("attempts"),
                         instances=len(job.get("instances") or job.get("received") or study_instances(study)),
                         **record)
        return study

    def run_next(self) -> bool:
        """Process the oldest received study; False when there is none. While a study is handled in received/ it
        carries the HANDLING mark: a study found with it was being handled when the gateway was killed (out of
        memory, for one), so it is set aside in failed/ instead of being handled again (and again)."""
        studies = [s for s in self.queue.studies("received") if s.name not in self.stuck]
        if not studies:
            return False
        study, route = studies[0], None
        self.current = study
        if (study / HANDLING).exists():
            self.fail(study, Failure.GATEWAY_STOPPED, "the gateway stopped (killed, for example out of memory) while "
                      f"handling this study (started {(study / HANDLING).read_text().strip()}); set aside, not tried "
                      "again", None)
            return True
        write_text_atomic(study / HANDLING, f"{utc_now()}\n")
        try:
            route = self.prepare(study)
            if route is None:
                return True
            study = self.queue.move(study, "running")
            self.run_study(study, route)
        except GatewayStopping:
            log.info("study %s: left to the detector; taken up again at the next start", study.name)
        except StudyFailed as exc:
            self.fail(study, exc.failure, str(exc), route)
        except OSError as exc:
            if not is_disk_full(exc):
                self.fail(study, Failure.INTERNAL, f"{type(exc).__name__}: {exc}", route)
            else:
                self.disk_full(study, exc)
        except Exception as exc:  # a gateway bug or a broken file: this study fails, the gateway goes on
            log.exception("study %s: unexpected error", study.name)
            self.fail(study, Failure.INTERNAL, f"{type(exc).__name__}: {exc}", route)
        finally:  # still in received/ (disk full, or an error set it aside until the next start): not a kill
            (self.queue.root / "received" / study.name / HANDLING).unlink(missing_ok=True)
        return True

    def prepare(self, study: Path) -> Route | None:
        """Checks before the detector runs: a duplicate, a study received incompletely or over its size limit, a
        study no route takes (each moved where it belongs; None); else its route, with job.json written."""
        instances = study_instances(study)
        if set(instances) <= self.queue.processed_instances(study.name):
            self.finish(study, "duplicate")
            log.info("study %s: all %d instance(s) were processed before; not run again", study.name, len(instances))
            return None
        job = read_job(study)
        if (study / INTERRUPTED).exists() or (study / TOO_LARGE).exists():
            write_json_atomic(study / "job.json", {**job, "received": instances})
            if (study / TOO_LARGE).exists():
                raise StudyFailed(Failure.TOO_LARGE, f"instances refused: over the study size limit of "
                                                     f"{self.config.limits.max_study_bytes} bytes")
            raise StudyFailed(Failure.INCOMPLETE, f"reception interrupted after {len(instances)} instance(s) "
                                                  "(gateway stopped or association aborted); not run")
        try:
            route, holds = route_study(self.config.routes, study)
        except InputError as exc:
            raise StudyFailed(Failure.UNREADABLE, str(exc)) from None
        if route is None:
            write_text_atomic(study / "error.txt", f"no route takes this study ({escape(holds)})\n")
            self.finish(study, "unroutable")
            log.error("study %s: no route takes it (%s); moved to unroutable", study.name, holds)
            return None
        job.update(route=route.name, attempts=job.get("attempts", 0) + 1, instances=instances)
        write_json_atomic(study / "job.json", job)
        return route

    def run_study(self, study: Path, route: Route) -> None:
        """Run the route's detector on the study and send its results; the study is in sent/ (its record written)
        before its images are removed."""
        job = read_job(study)
        started = time.perf_counter()
        try:
            run_detector(route, study, self.stopping, self.config.limits.work_quota_bytes / GIB)
        except subprocess.TimeoutExpired:
            raise StudyFailed(Failure.TIMEOUT, f"detector {route.name} ran over {route.timeout_seconds:g} s") from None
        except InputError as exc:
            raise StudyFailed(Failure.DETECTOR, str(exc)) from None
        detector_seconds = time.perf_counter() - started
        results = sorted((study / "output" / RESULT_FOLDER).glob("*.dcm"))
        sending = time.perf_counter()
        try:
            sent = self.pacs.send(self.queue, results)
        except InputError as exc:
            raise StudyFailed(Failure.SEND, str(exc)) from None
        job.update(detector_seconds=round(detector_seconds, 3), send_seconds=round(time.perf_counter() - sending, 3),
                   results=[p.name[:-4] for p in results], sent=sent)
        write_json_atomic(study / "job.json", job)
        study = self.finish(study, "sent", results=job["results"], sent=sent)
        shutil.rmtree(study / "input", ignore_errors=True)  # the images stay in the PACS, the UIDs in job.json (what
        # is left, if the gateway stops now, is removed at its next start)
        log.info("study %s: %s in %.1f s, %d result object(s) sent (%d sent before)", study.name, route.name,
                 detector_seconds, sent, len(results) - sent)

    def fail(self, study: Path, failure: Failure, message: str, route: Route | None) -> None:
        """The study to failed/ with its error line (the details; the log has them too) and a failure note in the
        fixed words of its class to the PACS."""
        try:
            write_text_atomic(study / "error.txt", escape(message) + "\n")
            study = self.finish(study, "failed", failure=failure.name)
        except OSError as exc:
            if is_disk_full(exc):
                self.disk_full(study, exc)
                return
            raise
        log.error("study %s: %s; moved to failed", study.name, message)
        send_failure_note(self.queue, self.pacs, study, failure, route.name if route else None)

    def disk_full(self, study: Path, exc: OSError) -> None:
        """The disk is full: the study stays queued (back in received/), C-STOREs are refused with out of
        resources, and the worker tries again after `disk_full_retry_seconds`."""
        if study.parent.name == "running" and study.exists():
            shutil.rmtree(study / "output", ignore_errors=True)
            study = self.queue.move(study, "received")
        self.server.disk_full.set()
        self.retry_at = time.monotonic() + self.config.disk_full_retry_seconds
        log.error("study %s: disk full (%s); the study stays queued, C-STOREs are refused, retrying in %g s",
                  study.name, exc.strerror or exc, self.config.disk_full_retry_seconds)

    def housekeeping(self) -> None:
        """Every few seconds: the bytes held counted again, unroutable studies past their time removed."""
        if time.monotonic() - self.recounted < RECOUNT_SECONDS:
            return
        self.recounted = time.monotonic()
        for name in self.queue.remove_older_than("unroutable", self.config.unroutable_keep_hours * 3600):
            log.info("study %s: removed from unroutable/ after %g hour(s)", name, self.config.unroutable_keep_hours)
        limits = self.config.limits
        stale = limits.network_timeout_seconds + limits.dimse_timeout_seconds
        for name in self.queue.remove_older_than(RECEIVING, stale):
            log.info("removed %s: the instance of an association cut off while sending it", name)
        self.queue.recount()

    def step(self) -> bool:
        """One turn of the worker; False when there was nothing to do."""
        full = self.server.disk_full.is_set()
        if full and time.monotonic() < self.retry_at:
            return False
        retry_at = self.retry_at
        self.housekeeping()
        self.complete_studies()
        busy = self.run_next()
        if full and self.retry_at == retry_at:  # the retry did not hit a full disk again: C-STOREs taken again
            self.server.disk_full.clear()
            log.info("disk space back: receiving again")
        return busy

    def serve(self) -> None:
        recover(self.queue, self.config.max_attempts)
        self.server.start()
        try:
            while not self.stopping.is_set():
                try:
                    busy = self.step()
                except Exception as exc:  # e.g. the disk full while moving a study: logged, tried again
                    if is_disk_full(exc):
                        self.server.disk_full.set()
                        self.retry_at = time.monotonic() + self.config.disk_full_retry_seconds
                    elif self.current is not None:  # not the same study again and again: the others go on
                        self.stuck.add(self.current.name)
                    log.exception("worker: %s: %s; %s", type(exc).__name__, exc, "study %s set aside until the next "
                                  "start" % self.current.name if self.current else "trying again")
                    busy = False
                finally:
                    self.current = None
                if not busy:
                    self.stopping.wait(POLL_SECONDS)
        finally:
            self.server.shutdown()
            log.info("gateway stopped")
