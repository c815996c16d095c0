"""`medchallenge gateway --config gateway.toml`: between a hospital's PACS and the detectors.

A DICOM Storage SCP (pynetdicom) receives studies from the callers of its allow-list (`[[caller]]`: AE title and
addresses; optionally over TLS). Each instance is written to a file as it arrives (`WORK/tmp/`), checked against the
size limits and renamed to `WORK/incoming/<StudyInstanceUID>/input/<SOPInstanceUID>.dcm` before the C-STORE is
answered with success. A study is complete when no instance of it arrived for `study_quiet_seconds`; it is then
routed by the modality and body part of its series to the first matching route, whose algorithm runs as one
grand-challenge job (its series as the interface's input socket, the output sockets as DICOM objects,
OUTPUT/dicom/*.dcm: SR, SEG), and those are sent back to the PACS with C-STORE.

The work queue is folders, and a study moves between them by atomic renames:

    incoming/ -> received/ -> running/ -> sent/         (done: its record written, then the images removed)
                                       -> failed/       (anything went wrong with this study: `error.txt` says
                                                         what, and a failure note, a DICOM SR in fixed words per
                                                         kind of failure, goes to the PACS)
                           -> unroutable/               (no route takes it; removed after unroutable_keep_hours)
                           -> duplicate/                (every instance of it was run before, sent or failed: not
                                                         run again; move failed/<study> to received/ to retry)

A study reaching a final state again keeps its earlier record as `<study>~N`. On start, a study left in running/
(the gateway or its detector was killed) goes back to received/ and runs again (at most `max_attempts` runs in all,
then failed/); a study left in incoming/ is marked interrupted and, unless its sender sends again, goes to failed/
instead of being processed as complete (so does one whose association was aborted). Results are never sent twice:
every result SOP Instance UID sent is appended to `WORK/sent-uids.txt` (fsync'd) after the PACS confirmed it and is
skipped afterwards; since the detectors derive result UIDs from the study, the series, its set of instances and
their findings, a result whose confirmation was lost in a crash is sent again as the same object, which the PACS
stores once. Instances whose UID is in that ledger (our own results, when a PACS forwards a whole study again) are
acknowledged and dropped, so they never start a detector. A full disk keeps the study queued and refuses C-STOREs
until the worker's next try. One JSON line per association and per study goes to the audit log.

The configuration (TOML) is read and checked at start; every problem is one `error:` line naming the key.

Modules, one idea each: config (the TOML, checked), queue (the folders, the ledger, the bytes held), server (the
Storage SCP: allow-list, limits, with dicom.files's header bounds and dicom.deflated's streamed inflation), routing
(which route), jobs (running a route's algorithm: the one place that knows how; image_routes the job, output_dicom
its outputs as DICOM, job_runner the service holding the Docker socket, cluster a route's jobs on Slurm), pacs
(C-STORE of results), notes (failure notes), audit (the audit log), worker (the loop over the queue), main (the command
line).
"""

from .config import GatewayConfig, Route, load_config
from .main import build_parser, main
from .pacs import Pacs
from .queue import WorkQueue
from .worker import Gateway

__all__ = ["Gateway", "GatewayConfig", "Pacs", "Route", "WorkQueue", "build_parser", "load_config", "main"]
