"""The work queue: one folder per state, a study moving between them by atomic renames, the ledger of the result
UIDs the PACS confirmed, and the byte counts the size limits are checked against."""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from pathlib import Path

from ..io import is_disk_full, write_text_atomic  # is_disk_full: also the server's and the worker's

log = logging.getLogger("medchallenge.gateway")

STATES = ("incoming", "received", "running", "sent", "failed", "unroutable", "duplicate")
FINAL_STATES = ("sent", "failed", "unroutable", "duplicate")
SENT_LEDGER = "sent-uids.txt"
RECEIVING = "tmp"  # pynetdicom writes an instance being received here (the process's temporary folder)
SENDERS = "senders.txt"  # who sent the study: one "AE-title address" line per association that stored into it
INTERRUPTED = "reception-interrupted"  # marker: the study's reception was cut off (gateway killed, A-ABORT)
TOO_LARGE = "too-large"  # marker: an instance of the study was refused for the study's size limit
HANDLING = "worker-started"  # marker: the worker is handling the study in received/ (left there only when the
# gateway was killed while doing so: the study is then set aside, not handled again)
EARLIER = "~"  # sent/<study>~1, ~2...: the earlier records of a study that ended there more than once


def study_instances(folder: Path) -> list[str]:
    """The SOP Instance UIDs of a study folder's images (their file names)."""
    return sorted(p.name[:-4] for p in (folder / "input").glob("*.dcm"))


def read_senders(study: Path) -> list[str]:
    path = study / SENDERS
    return sorted(set(path.read_text(encoding="ascii").splitlines())) if path.exists() else []


def read_job(study: Path) -> dict:
    path = study / "job.json"
    return json.loads(path.read_text()) if path.exists() else {}


def folder_bytes(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


class WorkQueue:
    """The folders of the work queue, the ledger of sent result UIDs and the bytes the queue holds."""

    def __init__(self, root: Path):
        self.root = root
        for state in (*STATES, RECEIVING):
            (root / state).mkdir(parents=True, exist_ok=True)
        self.ledger = root / SENT_LEDGER
        self.ledger.touch()
        self.sent = set(self.ledger.read_text().split())
        self.ledger_lock = threading.Lock()
        self.lock = threading.Lock()  # between the storage handler (network threads) and the worker
        self.bytes_held = folder_bytes(root)  # recounted by the worker (`recount`); added to by `store`
        self.study_bytes = {p.name: folder_bytes(p) for p in (root / "incoming").iterdir()}  # by study UID

    def folder(self, state: str, study_uid: str) -> Path:
        return self.root / state / study_uid

    def studies(self, state: str) -> list[Path]:
        return sorted((p for p in (self.root / state).iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)

    def records(self, state: str, study_uid: str) -> list[Path]:
        """The study's folders in a final state: the latest and the earlier ones."""
        return [p for p in (self.folder(state, study_uid), *(self.root / state).glob(study_uid + EARLIER + "*"))
                if p.is_dir()]

    def move(self, study: Path, state: str) -> Path:
        """Rename `study` into `state` (atomic). In a final state an earlier record of the same study is kept
        (renamed `<study>~N`); into received/, instances of the same study already waiting there are merged."""
        target = self.root / state / study.name
        if target.exists() and state in FINAL_STATES:
            number = 1 + max((int(p.name.rpartition(EARLIER)[2]) for p in
                              (self.root / state).glob(study.name + EARLIER + "*")), default=0)
            os.rename(target, target.with_name(f"{study.name}{EARLIER}{number}"))
        elif target.exists() and state == "received":
            self.merge(study, target)
            return target
        elif target.exists():
            shutil.rmtree(target)
        os.rename(study, target)
        (target / HANDLING).unlink(missing_ok=True)  # the worker's mark is only meaningful in received/
        return target

    @staticmethod
    def merge(study: Path, target: Path) -> None:
        """The instances and markers of `study` into `target` (the same study), then `study` removed."""
        (target / "input").mkdir(exist_ok=True)
        for path in (study / "input").glob("*.dcm"):
            os.replace(path, target / "input" / path.name)
        if (study / TOO_LARGE).exists():
            (target / TOO_LARGE).touch()
        if (study / SENDERS).exists():
            with open(target / SENDERS, "a", encoding="ascii") as handle:
                handle.write((study / SENDERS).read_text(encoding="ascii"))
        if study.parent.name == "incoming":  # a newer reception of the study decides: a complete resend clears
            if (study / INTERRUPTED).exists():  # the mark of the part received before
                (target / INTERRUPTED).touch()
            else:
                (target / INTERRUPTED).unlink(missing_ok=True)
        if (study / "job.json").exists() and not (target / "job.json").exists():
            os.replace(study / "job.json", target / "job.json")
        shutil.rmtree(study)

    def store(self, study_uid: str, sop_uid: str, received: Path, sender: str | None = None) -> None:
        """One received instance (the file pynetdicom wrote in tmp/) into incoming/, by rename (complete or
        absent); `sender` ("AE-title address"), when given, is added to the study's senders. An instance arriving
        clears the study's interrupted mark: its sender is sending (again)."""
        size = received.stat().st_size
        with self.lock:
            folder = self.folder("incoming", study_uid)
            (folder / "input").mkdir(parents=True, exist_ok=True)
            if sender is not None:
                with open(folder / SENDERS, "a", encoding="ascii", errors="backslashreplace") as handle:
                    handle.write(sender + "\n")
            os.replace(received, folder / "input" / f"{sop_uid}.dcm")
            (folder / INTERRUPTED).unlink(missing_ok=True)
            os.utime(folder)  # the study's last arrival
            self.study_bytes[study_uid] = self.study_bytes.get(study_uid, 0) + size
            self.bytes_held += size

    def mark(self, study_uid: str, marker: str) -> None:
        """Put a marker on a study still being received (if it is)."""
        with self.lock:
            folder = self.folder("incoming", study_uid)
            if folder.is_dir():
                (folder / marker).touch()

    def recount(self) -> None:
        """The bytes held, counted again (the worker removes images as studies finish)."""
        held = folder_bytes(self.root)
        with self.lock:
            self.bytes_held = held

    def sent_uids(self) -> set[str]:
        with self.ledger_lock:
            return set(self.sent)

    def record_sent(self, sop_uid: str) -> None:
        with self.ledger_lock, open(self.ledger, "a") as handle:  # the worker's job threads send at once
            handle.write(sop_uid + "\n")
            handle.flush()
            os.fsync(handle.fileno())
            self.sent.add(sop_uid)

    def processed_instances(self, study_uid: str) -> set[str]:
        """The instances of the study that were run before, whether its results were sent or it failed (a failed
        study moved back to received/ is tried again)."""
        done = set()
        for state in ("sent", "failed"):
            for record in self.records(state, study_uid):
                done |= set(read_job(record).get("instances", []))
        return done

    def remove_older_than(self, state: str, seconds: float) -> list[str]:
        """Remove the studies of `state` (or the files of tmp/: instances of associations that were cut off) last
        changed more than `seconds` ago; their names."""
        limit = time.time() - seconds
        removed = []
        for path in self.studies(state) if state != RECEIVING else list((self.root / RECEIVING).iterdir()):
            if path.stat().st_mtime < limit:
                shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
                removed.append(path.name)
        return removed


def recover(queue: WorkQueue, max_attempts: int) -> None:
    """After a restart: studies left running go back to received (or to failed after `max_attempts` runs); the
    images of a study already in sent/ (the gateway stopped while removing them) are removed; instances half
    received are removed; studies still being received are marked interrupted (they are not processed as complete
    unless their sender sends again) and their quiet period starts again."""
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
    for study in (queue.root / "sent").iterdir():
        shutil.rmtree(study / "input", ignore_errors=True)
    for leftover in [*queue.root.glob("incoming/*/input/.*.part"), *(queue.root / RECEIVING).iterdir()]:
        if leftover.is_file():
            leftover.unlink()
    for study in queue.studies("incoming"):  # the time the gateway was down is no quiet time: the PACS may resend
        (study / INTERRUPTED).touch()
        os.utime(study)
        log.warning("study %s: its reception was interrupted by the stop of the gateway; it is processed only if "
                    "its sender sends it again", study.name)
    queue.recount()
