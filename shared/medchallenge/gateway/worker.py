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
from ..jobs.errors import EngineFault
from ..logs import escape
from .audit import AuditLog, utc_now
from .config import GatewayConfig, Route
from .jobs import run_detector
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
IDLE_SECONDS = 0.5  # the worker's longest wait for news: a job's end or the stop wake it at once


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
        self.wake = threading.Event()  # a job's end or the stop: the worker looks again at once (an instance stored
        # makes nothing ready: the quiet period of its study starts again; idle_seconds waits for the next one)
        self.retry_at = 0.0  # while the disk is full: when the worker tries again
        self.recounted = 0.0
        self.current: Path | None = None  # the study the worker is on
        self.stuck: set[str] = set()  # studies whose handling raised even while failing them: skipped
        self.places = {route.name: threading.Semaphore(route.max_parallel_jobs) for route in config.routes}
        self.running: dict[str, threading.Thread] = {}  # by study UID: the thread running its job and sending
        self.routed: dict[str, tuple[int, tuple[Route | None, str] | InputError]] = {}  # by study UID: the
        # st_mtime_ns of its input/ and route_study's answer for it (route_of)

    def stop(self) -> None:
        """Stop the worker (the jobs handed to the job-runner service stay there) and the server."""
        self.stopping.set()
        self.wake.set()

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
        """Start the oldest received study whose route has a free place (max_parallel_jobs): checked and routed
        here, its job run and its results sent in a thread of its own (`job`). False when none can start. While a
        study is handled in received/ it carries the HANDLING mark: a study found with it was being handled when the
        gateway was killed (out of memory, for one), so it is set aside in failed/ instead of being handled again
        (and again)."""
        for study in self.queue.studies("received"):
            if study.name in self.stuck or study.name in self.running:  # its earlier part still running: after it
                continue
            self.current = study
            if (study / HANDLING).exists():
                self.fail(study, Failure.GATEWAY_STOPPED, "the gateway stopped (killed, for example out of memory) "
                          f"while handling this study (started {(study / HANDLING).read_text().strip()}); set "
                          "aside, not tried again", None)
                return True
            try:
                route = self.route_of(study)[0]
            except InputError:
                route = None  # prepare() fails it
            if route is not None and not self.places[route.name].acquire(blocking=False):
                continue  # the route runs as many jobs as it may: the study waits; others may go elsewhere
            if not self.start(study) and route is not None:
                self.places[route.name].release()
            return True
        return False

    def route_of(self, study: Path) -> tuple[Route | None, str]:
        """route_study's answer (or its InputError) for the study in received/, kept while its input/ is unchanged:
        a study waiting for a place is not read again. Its headers are read under the HANDLING mark (a kill while
        reading them sets the study aside, as one while handling it)."""
        try:
            stamp = (study / "input").stat().st_mtime_ns
        except FileNotFoundError:
            stamp = 0
        known = self.routed.get(study.name)
        if known is None or known[0] != stamp:
            marked = (study / HANDLING).exists()
            if not marked:
                write_text_atomic(study / HANDLING, f"{utc_now()}\n")
            try:
                answer: tuple[Route | None, str] | InputError = route_study(self.config.routes, study)
            except InputError as exc:
                answer = exc
            finally:
                if not marked:
                    (study / HANDLING).unlink(missing_ok=True)
            known = self.routed[study.name] = (stamp, answer)
        if isinstance(known[1], InputError):
            raise known[1]
        return known[1]

    def start(self, study: Path) -> bool:
        """The study in received/ checked and prepared, then moved to running/ and its job started in a thread;
        False when no job started (the study moved where it belongs, or kept queued on a full disk)."""
        write_text_atomic(study / HANDLING, f"{utc_now()}\n")
        route = None
        try:
            route = self.prepare(study)
            if route is None:
                return False
            thread = threading.Thread(target=self.job, args=(self.queue.root / "running" / study.name, route),
                                      name=f"study {study.name}", daemon=True)
            self.running[study.name] = thread
            self.queue.move(study, "running")
            thread.start()
            return True
        except Exception as exc:
            self.running.pop(study.name, None)
            self.handle_error(study, route, exc)
            return False
        finally:  # still in received/ (disk full, or an error set it aside until the next start): not a kill
            (self.queue.root / "received" / study.name / HANDLING).unlink(missing_ok=True)
            self.routed.pop(study.name, None)

    def job(self, study: Path, route: Route) -> None:
        """A study's job run and its results sent (its thread), whatever fails handled; the route's place freed."""
        try:
            try:
                self.run_study(study, route)
            except Exception as exc:
                self.handle_error(study, route, exc)
        except Exception as exc:  # even failing the study failed (as the serve loop's own errors)
            self.worker_error(exc, study)
        finally:
            self.running.pop(study.name, None)
            self.places[route.name].release()
            self.wake.set()

    def handle_error(self, study: Path, route: Route | None, exc: Exception) -> None:
        """What the handling of a study raised: the study failed (its note to the PACS), kept queued on a full disk,
        or left to the job-runner service while the gateway stops."""
        if isinstance(exc, GatewayStopping):
            log.info("study %s: left to the detector; taken up again at the next start", study.name)
        elif isinstance(exc, StudyFailed):
            self.fail(study, exc.failure, str(exc), route)
        elif isinstance(exc, OSError) and is_disk_full(exc):
            self.disk_full(study, exc)
        elif isinstance(exc, OSError):
            self.fail(study, Failure.INTERNAL, f"{type(exc).__name__}: {exc}", route)
        else:  # a gateway bug or a broken file: this study fails, the gateway goes on
            log.error("study %s: unexpected error", study.name, exc_info=exc)
            self.fail(study, Failure.INTERNAL, f"{type(exc).__name__}: {exc}", route)

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
            route, holds = self.route_of(study)
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
        except EngineFault as exc:  # the engine's, not the detector's: the note says so
            raise StudyFailed(Failure.ENGINE, str(exc)) from None
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
            with self.queue.lock:  # a job's thread: the worker may be moving the same study's newer part there
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
        """One turn of the worker; False when there was nothing to do. While the disk is full, the turn that tries
        again waits for the job it started: whether it hit the full disk again decides."""
        full = self.server.disk_full.is_set()
        if full and time.monotonic() < self.retry_at:
            return False
        retry_at = self.retry_at
        self.housekeeping()
        self.complete_studies()
        busy = self.run_next()
        if full:
            for thread in list(self.running.values()):
                thread.join()
        if full and self.retry_at == retry_at:  # the retry did not hit a full disk again: C-STOREs taken again
            self.server.disk_full.clear()
            log.info("disk space back: receiving again")
        return busy

    def idle_seconds(self) -> float:
        """How long the worker may wait for news: until the next study of incoming/ is quiet, IDLE_SECONDS at most."""
        now = time.time()
        with self.queue.lock:
            quiet = [study.stat().st_mtime + self.config.study_quiet_seconds - now
                     for study in self.queue.studies("incoming")]
        return max(0.01, min([IDLE_SECONDS, *quiet]))

    def worker_error(self, exc: Exception, study: Path | None) -> None:
        """An error of the worker's own (e.g. the disk full while moving a study): logged; the study set aside until
        the next start (not the same study again and again: the others go on), or tried again."""
        aside = study is not None and not is_disk_full(exc)
        if is_disk_full(exc):
            self.server.disk_full.set()
            self.retry_at = time.monotonic() + self.config.disk_full_retry_seconds
        elif aside:
            self.stuck.add(study.name)
        log.error("worker: %s: %s; %s", type(exc).__name__, exc, f"study {study.name} set aside until the next "
                  "start" if aside else "trying again", exc_info=exc)

    def serve(self) -> None:
        recover(self.queue, self.config.max_attempts)
        self.server.start()
        try:
            while not self.stopping.is_set():
                self.wake.clear()  # what happens from here on wakes the wait below
                try:
                    busy = self.step()
                except Exception as exc:
                    self.worker_error(exc, self.current)
                    busy = False
                finally:
                    self.current = None
                if not busy:
                    self.wake.wait(self.idle_seconds())
        finally:
            for thread in list(self.running.values()):  # the jobs of the job-runner service end at once
                thread.join()
            self.server.shutdown()
            log.info("gateway stopped")
