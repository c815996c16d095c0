"""Failure notes: a DICOM SR in a study the gateway could not process, sent to the PACS. The note says what went
wrong in a fixed wording per failure class and names the study by its UID only; the details (paths, exception
names, the detector's error line, header values) stay in the gateway's log and the study's error.txt."""

from __future__ import annotations

import enum
import logging
from pathlib import Path

from ..dicom.series import DicomSeries, dicom_files, read_headers
from ..errors import InputError
from ..io import write_dicom_atomic
from .pacs import Pacs
from .queue import WorkQueue

log = logging.getLogger("medchallenge.gateway")

FAILURE_NOTE_FOLDER = "note"


class Failure(enum.Enum):
    """Why a study ended in failed/: the value is the wording of its failure note."""

    DETECTOR = "the detector could not process the images of this study"
    ENGINE = "the container engine that runs the detector failed"
    TIMEOUT = "the detector did not finish within its time limit"
    INTERRUPTED = "the detector stopped repeatedly before finishing"
    GATEWAY_STOPPED = "the gateway stopped while handling it, so it is set aside and not tried again"
    UNREADABLE = "the images of this study could not be read"
    INCOMPLETE = "the transfer of this study to the gateway was interrupted; please send the whole study again"
    TOO_LARGE = "this study exceeds the size limits of the gateway"
    SEND = "its results could not be stored in the PACS"
    INTERNAL = "an internal error of the gateway"


def note_text(failure: Failure, detector: str | None, study_uid: str) -> str:
    """The note's one sentence: fixed words, the route's name (from the configuration) and the study's UID."""
    who = f"AI detector {detector}" if detector else "The AI gateway"
    return (f"{who} could not process this study: {failure.value}. Study {study_uid}; the details are in the "
            "gateway's log.")


def readable_series(study: Path) -> list[DicomSeries]:
    """The series of the study's instances whose headers can be read and that belong to the study (the folder's
    name); the unreadable ones are left out, so that a note can still be made."""
    readable = []
    for path in dicom_files(study / "input"):
        try:
            read_headers([path])
        except InputError:
            continue
        readable.append(path)
    return [s for s in read_headers(readable) if s.study_uid == study.name]


def send_failure_note(queue: WorkQueue, pacs: Pacs, study: Path, failure: Failure, detector: str | None) -> None:
    """A DICOM SR in the study saying it could not be processed (`sr.failure_note`); a note that cannot be made or
    sent is one more log line, the gateway goes on."""
    from ..dicom.sr import failure_note

    try:
        series = readable_series(study)
        if not series:
            log.error("study %s: no failure note in the PACS (no readable instance of the study)", study.name)
            return
        note = failure_note(series, detector or "gateway", note_text(failure, detector, study.name))
        path = write_dicom_atomic(study / FAILURE_NOTE_FOLDER / f"{note.SOPInstanceUID}.dcm", note)
        sent = pacs.send(queue, [path])
    except Exception as exc:  # hostile headers can break the SR's making in many ways: a note is best effort
        log.error("study %s: no failure note in the PACS (%s: %s)", study.name, type(exc).__name__, exc)
        return
    log.info("study %s: failure note %s (%s)", study.name, "sent to the PACS" if sent else "sent before",
             note.SOPInstanceUID)
