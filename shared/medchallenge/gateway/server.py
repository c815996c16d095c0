"""The DICOM Storage SCP: each instance on disk in incoming/ before its C-STORE is answered with success."""

from __future__ import annotations

import logging
import re

from .config import GatewayConfig
from .queue import WorkQueue

log = logging.getLogger("medchallenge.gateway")

UID = re.compile(r"[0-9]+(\.[0-9]+)*")


class StorageServer:
    """The gateway's listening AE, storing what it receives into the work queue."""

    def __init__(self, config: GatewayConfig, queue: WorkQueue):
        self.config = config
        self.queue = queue
        self.server = None

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

    def start(self) -> None:
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

    def shutdown(self) -> None:
        if self.server is not None:
            self.server.shutdown()
