"""The PACS client: C-STORE of result objects, each sent once (the ledger of confirmed UIDs)."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from .config import GatewayConfig
from .contexts import proposed_transfer_syntaxes
from .queue import WorkQueue


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
        limits = self.config.limits
        ae.acse_timeout, ae.dimse_timeout = limits.acse_timeout_seconds, limits.dimse_timeout_seconds
        ae.network_timeout = limits.network_timeout_seconds
        for sop_class in sorted({str(ds.SOPClassUID) for ds in datasets}):
            ae.add_requested_context(sop_class, proposed_transfer_syntaxes())
        c = self.config
        tls = (c.pacs_tls.client_context(), c.pacs_host) if c.pacs_tls else None
        association = ae.associate(c.pacs_host, c.pacs_port, ae_title=c.pacs_ae_title, tls_args=tls)
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
