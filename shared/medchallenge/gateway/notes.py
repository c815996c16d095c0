"""Failure notes: a DICOM SR in a study the detector could not process, sent to the PACS."""

from __future__ import annotations

import logging
from pathlib import Path

from ..dicom.series import dicom_files, read_headers
from ..errors import InputError
from ..io import write_dicom_atomic
from .config import Route
from .pacs import Pacs
from .queue import WorkQueue

log = logging.getLogger("medchallenge.gateway")

FAILURE_NOTE_FOLDER = "note"


def send_failure_note(queue: WorkQueue, pacs: Pacs, study: Path, route: Route, message: str) -> None:
    """A DICOM SR in the study saying the detector failed and why (`sr.failure_note`); a note that cannot be made
    or sent is one more log line, the gateway goes on."""
    from ..dicom.sr import failure_note

    try:
        note = failure_note(read_headers(dicom_files(study / "input")), route.name, message)
        path = write_dicom_atomic(study / FAILURE_NOTE_FOLDER / f"{note.SOPInstanceUID}.dcm", note)
        sent = pacs.send(queue, [path])
    except (InputError, OSError, ValueError, AttributeError) as exc:
        log.error("study %s: no failure note in the PACS (%s)", study.name, exc)
        return
    log.info("study %s: failure note %s (%s)", study.name, "sent to the PACS" if sent else "sent before",
             note.SOPInstanceUID)
