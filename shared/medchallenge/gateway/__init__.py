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

Modules, one idea each: config (the TOML, checked), queue (the folders and the ledger), server (the Storage SCP),
routing (which detector), jobs (running a detector: the one place that knows how), pacs (C-STORE of results),
notes (failure notes), worker (the loop over the queue), main (the command line).
"""

from .config import GatewayConfig, Route, load_config
from .main import build_parser, main
from .pacs import Pacs
from .queue import WorkQueue
from .worker import Gateway

__all__ = ["Gateway", "GatewayConfig", "Pacs", "Route", "WorkQueue", "build_parser", "load_config", "main"]
