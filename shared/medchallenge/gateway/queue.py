"""The work queue: one folder per state, a study moving between them by atomic renames, and the ledger of the
result UIDs the PACS confirmed."""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
from pathlib import Path

from ..io import atomic_output, write_text_atomic

log = logging.getLogger("medchallenge.gateway")

STATES = ("incoming", "received", "running", "sent", "failed", "unroutable", "duplicate")
SENT_LEDGER = "sent-uids.txt"


def study_instances(folder: Path) -> list[str]:
    """The SOP Instance UIDs of a study folder's images (their file names)."""
    return sorted(p.name[:-4] for p in (folder / "input").glob("*.dcm"))


def read_job(study: Path) -> dict:
    path = study / "job.json"
    return json.loads(path.read_text()) if path.exists() else {}


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
