"""`medchallenge gateway --config gateway.toml`: between a hospital's PACS and the detectors.

A DICOM Storage SCP (pynetdicom) receives studies from the PACS. Each instance is written atomically to
`WORK/incoming/<StudyInstanceUID>/input/<SOPInstanceUID>.dcm` before the C-STORE is answered with success. A study is
complete when no instance of it arrived for `study_quiet_seconds`; it is then routed by the modality and body part of
its series to the first matching detector, run, and the detector's result objects (OUTPUT/dicom/*.dcm: SR, SEG) are
sent back to the PACS with C-STORE.

The work queue is folders, and a study moves between them by atomic renames:

    incoming/ -> received/ -> running/ -> sent/         (done: its instance and result UIDs kept, the images removed)
                                       -> failed/       (the detector failed or timed out: `error.txt` says why,
                                                         and a failure note, a DICOM SR with that line, goes to
                                                         the PACS)
                           -> unroutable/               (no route takes it)
                           -> duplicate/                (every instance of it was run before, sent or failed: not
                                                         run again; move failed/<study> to received/ to retry)

On start, a study left in running/ (the gateway or its detector was killed) goes back to received/ and runs again
(at most `max_attempts` runs in all, then failed/). Results are never sent twice: every result SOP Instance UID sent is
appended to `WORK/sent-uids.txt` (fsync'd) after the PACS confirmed it and is skipped afterwards; since the detectors
derive result UIDs from the source series and their findings, a result whose confirmation was lost in a crash is
sent again as the same object, which the PACS stores once. Instances whose UID is in that ledger (our own results,
when a PACS forwards a whole study again) are acknowledged and dropped, so they never start a detector.

The configuration (TOML) is read and checked at start; every problem is one `error:` line naming the key.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .dicom.series import dicom_files, read_headers
from .errors import InputError, report_errors
from .io import atomic_output, write_dicom_atomic, write_json_atomic, write_text_atomic
from .logs import setup_logging

log = logging.getLogger("medchallenge.gateway")

STATES = ("incoming", "received", "running", "sent", "failed", "unroutable", "duplicate")
SENT_LEDGER = "sent-uids.txt"
UID = re.compile(r"[0-9]+(\.[0-9]+)*")
AE_TITLE = re.compile(r"[ -\[\]-~]{1,16}")  # printable ASCII without backslash, at most 16 characters
RESULT_FOLDER = "dicom"
FAILURE_NOTE_FOLDER = "note"
POLL_SECONDS = 0.5


@dataclass(frozen=True)
class Route:
    """Studies with a series of one of `modalities` (and, if given, one of `body_parts`) go to a detector: either
    `command`, run with `--input DIR --output DIR` (an algorithm's entry script), or `inbox`, the folder a detector
    container without network watches (`inference.py --watch DIR`: jobs in pending/, results in done/)."""

    name: str
    modalities: tuple[str, ...]
    body_parts: tuple[str, ...]
    command: tuple[str, ...]
    inbox: Path | None
    timeout_seconds: float


@dataclass(frozen=True)
class GatewayConfig:
    ae_title: str
    host: str
    port: int
    work_dir: Path
    study_quiet_seconds: float
    max_attempts: int
    pacs_ae_title: str
    pacs_host: str
    pacs_port: int
    routes: tuple[Route, ...]


def _take(table: dict, key: str, kind, where: str, default=None):
    """`table[key]` checked against `kind`; `default` when absent and a default is given."""
    if key not in table:
        if default is None:
            raise InputError(f"{where}: missing key {key!r}")
        return default
    value = table[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise InputError(f"{where}: {key} = {value!r}: expected {' or '.join(k.__name__ for k in kinds)}")
    return value


def _port(table: dict, where: str, default=None) -> int:
    port = _take(table, "port", int, where, default)
    if not 1 <= port <= 65535:
        raise InputError(f"{where}: port = {port}: expected 1 to 65535")
    return port


def _ae_title(table: dict, where: str, default=None) -> str:
    title = _take(table, "ae_title", str, where, default)
    if not AE_TITLE.fullmatch(title) or not title.strip():
        raise InputError(f"{where}: ae_title = {title!r}: expected 1 to 16 printable ASCII characters, no backslash")
    return title


def _strings(table: dict, key: str, where: str, required: bool) -> tuple[str, ...]:
    values = _take(table, key, list, where, None if required else [])
    if (required and not values) or not all(isinstance(v, str) and v for v in values):
        raise InputError(f"{where}: {key} = {values!r}: expected a {'non-empty ' if required else ''}list of strings")
    return tuple(values)


def _no_unknown_keys(table: dict, known: set[str], where: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise InputError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")


def load_config(path: Path) -> GatewayConfig:
    """The gateway's configuration, checked: one InputError line naming the file and key for each kind of mistake."""
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read the configuration ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid TOML ({exc})") from None
    _no_unknown_keys(document, {"gateway", "pacs", "route"}, str(path))
    gateway = _take(document, "gateway", dict, str(path))
    pacs = _take(document, "pacs", dict, str(path))
    where_g, where_p = f"{path} [gateway]", f"{path} [pacs]"
    _no_unknown_keys(gateway, {"ae_title", "host", "port", "work_dir", "study_quiet_seconds", "max_attempts"}, where_g)
    _no_unknown_keys(pacs, {"ae_title", "host", "port"}, where_p)
    quiet = float(_take(gateway, "study_quiet_seconds", (int, float), where_g, 30))
    attempts = _take(gateway, "max_attempts", int, where_g, 2)
    if quiet <= 0 or attempts < 1:
        raise InputError(f"{where_g}: study_quiet_seconds must be positive and max_attempts at least 1")
    routes = []
    tables = _take(document, "route", list, str(path))
    if not tables:
        raise InputError(f"{path}: no [[route]]: the gateway would route nothing")
    for number, table in enumerate(tables, start=1):
        where = f"{path} [[route]] {number}"
        if not isinstance(table, dict):
            raise InputError(f"{where}: expected a table")
        _no_unknown_keys(table, {"name", "modalities", "body_parts", "command", "inbox", "timeout_seconds"}, where)
        if ("command" in table) == ("inbox" in table):
            raise InputError(f"{where}: give either command (a detector run here) or inbox (a detector container's "
                             "watched folder)")
        command = _strings(table, "command", where, required=True) if "command" in table else ()
        inbox = Path(_take(table, "inbox", str, where)) if "inbox" in table else None
        timeout = float(_take(table, "timeout_seconds", (int, float), where, 3600))
        routes.append(Route(_take(table, "name", str, where), tuple(m.upper() for m in _strings(table, "modalities",
                            where, True)), tuple(b.upper() for b in _strings(table, "body_parts", where, False)),
                            command, inbox, timeout))
    names = [r.name for r in routes]
    if len(set(names)) != len(names):
        raise InputError(f"{path}: route names must differ ({', '.join(names)})")
    return GatewayConfig(
        ae_title=_ae_title(gateway, where_g, "MEDCHALLENGE"), host=_take(gateway, "host", str, where_g, "0.0.0.0"),
        port=_port(gateway, where_g, 11112), work_dir=Path(_take(gateway, "work_dir", str, where_g)),
        study_quiet_seconds=quiet, max_attempts=attempts, pacs_ae_title=_ae_title(pacs, where_p),
        pacs_host=_take(pacs, "host", str, where_p), pacs_port=_port(pacs, where_p), routes=tuple(routes))


def study_instances(folder: Path) -> list[str]:
    """The SOP Instance UIDs of a study folder's images (their file names)."""
    return sorted(p.name[:-4] for p in (folder / "input").glob("*.dcm"))


class WorkQueue:
    """The folders of the work queue and the ledger of sent result UIDs."""

    def __init__(self, root: Path):
        self.root = root
        for state in STATES:
            (root / state).mkdir(parents=True, exist_ok=True)
        self.ledger = root / SENT_LEDGER
        self.ledger.touch()
        self.sent = set(self.ledger.read_text().split())
        self.lock = threading.Lock()  # between the storage handler (network threads) and the worker

    def folder(self, state: str, study_uid: str) -> Path:
        return self.root / state / study_uid

    def studies(self, state: str) -> list[Path]:
        return sorted((p for p in (self.root / state).iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)

    def move(self, study: Path, state: str) -> Path:
        """Rename `study` into `state` (atomic; a leftover of the same study there is replaced)."""
        target = self.root / state / study.name
        if target.exists():
            shutil.rmtree(target)
        os.rename(study, target)
        return target

    def store(self, study_uid: str, sop_uid: str, encoded: bytes) -> None:
        """One received instance into incoming/, written atomically (complete or absent)."""
        with self.lock:
            folder = self.folder("incoming", study_uid) / "input"
            with atomic_output(folder / f"{sop_uid}.dcm", "wb") as handle:
                handle.write(encoded)
            os.utime(folder.parent)  # the study's last arrival

    def sent_uids(self) -> set[str]:
        return set(self.sent)

    def record_sent(self, sop_uid: str) -> None:
        with open(self.ledger, "a") as handle:
            handle.write(sop_uid + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self.sent.add(sop_uid)

    def processed_instances(self, study_uid: str) -> set[str]:
        """The instances of the study that were run before, whether its results were sent or it failed (a failed
        study moved back to received/ is tried again)."""
        done = set()
        for state in ("sent", "failed"):
            record = self.folder(state, study_uid) / "job.json"
            if record.exists():
                done |= set(json.loads(record.read_text()).get("instances", []))
        return done


def recover(queue: WorkQueue, max_attempts: int) -> None:
    """After a restart: studies left running go back to received (or to failed after `max_attempts` runs), partial
    instance files are removed, and the quiet period of studies still being received starts again."""
    for study in queue.studies("running"):
        job = read_job(study)
        if job.get("attempts", 0) >= max_attempts:
            write_text_atomic(study / "error.txt", f"interrupted {job['attempts']} time(s) (gateway or detector "
                                                   "killed); not tried again\n")
            queue.move(study, "failed")
            log.error("study %s: interrupted %d time(s); moved to failed", study.name, job["attempts"])
        else:
            shutil.rmtree(study / "output", ignore_errors=True)
            queue.move(study, "received")
            log.info("study %s: was running when the gateway stopped; queued again", study.name)
    for part in queue.root.glob("incoming/*/input/.*.part"):
        part.unlink()
    for study in queue.studies("incoming"):  # the time the gateway was down is no quiet time: the PACS may resend
        os.utime(study)


def read_job(study: Path) -> dict:
    path = study / "job.json"
    return json.loads(path.read_text()) if path.exists() else {}


def route_study(routes: tuple[Route, ...], study: Path) -> tuple[Route | None, str]:
    """The first route taking one of the study's series, and what the study holds (for the log)."""
    series = read_headers(dicom_files(study / "input"))
    holds = ", ".join(f"{s.modality or '?'}/{s.body_part or '?'} ({len(s.files)})" for s in series)
    for route in routes:
        if any(s.modality in route.modalities and (not route.body_parts or s.body_part in route.body_parts)
               for s in series):
            return route, holds
    return None, holds


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
    """The route's command on the study's input/ into its output/."""
    command = [*route.command, "--input", str(study / "input"), "--output", str(study / "output")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=route.timeout_seconds,
                          preexec_fn=die_with_parent)
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
    deadline = time.monotonic() + route.timeout_seconds
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


class Pacs:
    """C-STORE of result objects to the PACS (one association per study)."""

    def __init__(self, config: GatewayConfig):
        self.config = config

    def send(self, queue: WorkQueue, files: list[Path]) -> int:
        """Send the files not sent before; each one's UID goes to the ledger once the PACS confirmed it. Returns the
        number sent; an InputError when the PACS cannot be reached or refuses one."""
        import pydicom
        from pynetdicom import AE

        already = queue.sent_uids()
        datasets = [ds for ds in (pydicom.dcmread(f) for f in files) if str(ds.SOPInstanceUID) not in already]
        if not datasets:
            return 0
        ae = AE(ae_title=self.config.ae_title)
        for sop_class in sorted({str(ds.SOPClassUID) for ds in datasets}):
            ae.add_requested_context(sop_class)
        c = self.config
        association = ae.associate(c.pacs_host, c.pacs_port, ae_title=c.pacs_ae_title)
        if not association.is_established:
            raise InputError(f"PACS {c.pacs_ae_title}@{c.pacs_host}:{c.pacs_port}: association refused or no answer")
        try:
            for ds in datasets:
                status = association.send_c_store(ds)
                code = getattr(status, "Status", None)
                if code != 0x0000:
                    raise InputError(f"PACS {c.pacs_ae_title}: C-STORE of {ds.SOPInstanceUID} failed (status "
                                     f"{'none' if code is None else hex(code)})")
                queue.record_sent(str(ds.SOPInstanceUID))
        finally:
            association.release()
        return len(datasets)


class Gateway:
    """The storage SCP and the worker over the work queue."""

    def __init__(self, config: GatewayConfig):
        self.config = config
        self.queue = WorkQueue(config.work_dir)
        self.pacs = Pacs(config)
        self.stopping = threading.Event()
        self.server = None

    # --- receiving ---------------------------------------------------------------------------------------------
    def handle_store(self, event) -> int:
        """C-STORE: the instance on disk before success is answered; a dataset without usable UIDs is refused."""
        ds = event.dataset
        study_uid, sop_uid = str(ds.get("StudyInstanceUID", "")), str(ds.get("SOPInstanceUID", ""))
        if not (UID.fullmatch(study_uid) and UID.fullmatch(sop_uid)) or len(study_uid) > 64 or len(sop_uid) > 64:
            log.error("refused an instance from %s without valid StudyInstanceUID/SOPInstanceUID",
                      event.assoc.requestor.ae_title)
            return 0xA900  # dataset does not match SOP class
        if sop_uid in self.queue.sent:  # one of our results coming back (a PACS forwarding the whole study)
            return 0x0000
        try:
            self.queue.store(study_uid, sop_uid, event.encoded_dataset())
        except OSError as exc:
            log.error("study %s: cannot store instance %s (%s)", study_uid, sop_uid, exc.strerror or exc)
            return 0xA700  # out of resources
        return 0x0000

    def start_server(self) -> None:
        from pynetdicom import AE, ALL_TRANSFER_SYNTAXES, AllStoragePresentationContexts, evt
        from pynetdicom.sop_class import Verification

        ae = AE(ae_title=self.config.ae_title)
        for context in AllStoragePresentationContexts:
            ae.add_supported_context(context.abstract_syntax, ALL_TRANSFER_SYNTAXES)
        ae.add_supported_context(Verification)
        self.server = ae.start_server((self.config.host, self.config.port), block=False,
                                      evt_handlers=[(evt.EVT_C_STORE, self.handle_store)])
        log.info("gateway %s listening on %s:%d; PACS %s@%s:%d; work queue %s", self.config.ae_title,
                 self.config.host, self.config.port, self.config.pacs_ae_title, self.config.pacs_host,
                 self.config.pacs_port, self.config.work_dir)

    # --- the worker ----------------------------------------------------------------------------------------------
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
        if route.inbox is None:
            run_command(route, study)
        else:
            run_in_inbox(route, study, self.stopping)
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
            self.send_failure_note(study, route, message)

    def send_failure_note(self, study: Path, route: Route, message: str) -> None:
        """A DICOM SR in the study saying the detector failed and why (`sr.failure_note`); a note that cannot be made
        or sent is one more log line, the gateway goes on."""
        from .dicom.sr import failure_note

        try:
            note = failure_note(read_headers(dicom_files(study / "input")), route.name, message)
            path = write_dicom_atomic(study / FAILURE_NOTE_FOLDER / f"{note.SOPInstanceUID}.dcm", note)
            sent = self.pacs.send(self.queue, [path])
        except (InputError, OSError, ValueError, AttributeError) as exc:
            log.error("study %s: no failure note in the PACS (%s)", study.name, exc)
            return
        log.info("study %s: failure note %s (%s)", study.name, "sent to the PACS" if sent else "sent before",
                 note.SOPInstanceUID)

    def serve(self) -> None:
        recover(self.queue, self.config.max_attempts)
        self.start_server()
        try:
            while not self.stopping.is_set():
                self.complete_studies()
                if not self.run_next():
                    self.stopping.wait(POLL_SECONDS)
        finally:
            self.server.shutdown()
            log.info("gateway stopped")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="medchallenge gateway", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=Path(os.environ.get("GATEWAY_CONFIG", "/etc/medchallenge/"
                                                                           "gateway.toml")),
                        help="the configuration file (default $GATEWAY_CONFIG or /etc/medchallenge/gateway.toml)")
    parser.add_argument("--check", action="store_true", help="check the configuration and stop")
    return parser


@report_errors
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging()
    logging.getLogger("pynetdicom").setLevel(logging.WARNING)
    config = load_config(args.config)
    if args.check:
        log.info("%s: configuration valid (%d route(s))", args.config, len(config.routes))
        return 0
    gateway = Gateway(config)
    signal.signal(signal.SIGTERM, lambda *_: gateway.stopping.set())
    signal.signal(signal.SIGINT, lambda *_: gateway.stopping.set())
    gateway.serve()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
