"""The PACS client: C-STORE of result objects, each sent once (the ledger of confirmed UIDs)."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from .config import GatewayConfig
from .contexts import identify, proposed_transfer_syntaxes
from .queue import WorkQueue


def stored_form(association, path: Path, file_meta):
    """What send_c_store is given for a result file: its path, so that pynetdicom sends the file's bytes as stored
    (STORE_SEND_CHUNKED_DATASET), where the PACS accepted the file's SOP class in the file's transfer syntax (each
    transfer syntax is proposed in a context of its own); else the decoded dataset, which pynetdicom encodes in a
    transfer syntax the PACS accepted."""
    import pydicom

    if any(context.abstract_syntax == file_meta.MediaStorageSOPClassUID
           and context.transfer_syntax[0] == file_meta.TransferSyntaxUID for context in association.accepted_contexts):
        return path
    return pydicom.dcmread(path)


class Pacs:
    """C-STORE of result objects to the PACS (one association per study)."""

    def __init__(self, config: GatewayConfig):
        self.config = config

    def send(self, queue: WorkQueue, files: list[Path]) -> int:
        """Send the files not sent before; each one's UID goes to the ledger once the PACS confirmed it. Returns the
        number sent; an InputError when the PACS cannot be reached or refuses one. Only a file's meta information is
        read: its SOP class and instance and its transfer syntax (the gateway's writers set them)."""
        from pydicom.filereader import read_file_meta_info
        from pynetdicom import AE, _config

        _config.STORE_SEND_CHUNKED_DATASET = True  # a file given by its path is sent as stored, never decoded
        already = queue.sent_uids()
        pending = [(path, meta) for path, meta in ((f, read_file_meta_info(f)) for f in files)
                   if str(meta.MediaStorageSOPInstanceUID) not in already]
        if not pending:
            return 0
        ae = AE(ae_title=self.config.ae_title)
        identify(ae)
        limits = self.config.limits
        ae.acse_timeout, ae.dimse_timeout = limits.acse_timeout_seconds, limits.dimse_timeout_seconds
        ae.network_timeout = limits.network_timeout_seconds
        for sop_class in sorted({str(meta.MediaStorageSOPClassUID) for _, meta in pending}):
            for transfer_syntax in proposed_transfer_syntaxes():  # one context each: the PACS says which it takes
                ae.add_requested_context(sop_class, [transfer_syntax])
        c = self.config
        tls = (c.pacs_tls.client_context(), c.pacs_host) if c.pacs_tls else None
        association = ae.associate(c.pacs_host, c.pacs_port, ae_title=c.pacs_ae_title, tls_args=tls)
        if not association.is_established:
            raise InputError(f"PACS {c.pacs_ae_title}@{c.pacs_host}:{c.pacs_port}: association refused or no answer")
        try:
            for path, meta in pending:
                uid = str(meta.MediaStorageSOPInstanceUID)
                status = association.send_c_store(stored_form(association, path, meta))
                code = getattr(status, "Status", None)
                if code != 0x0000:
                    raise InputError(f"PACS {c.pacs_ae_title}: C-STORE of {uid} failed (status "
                                     f"{'none' if code is None else hex(code)})")
                queue.record_sent(uid)
        finally:
            association.release()
        return len(pending)
