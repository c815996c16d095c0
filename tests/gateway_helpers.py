"""A PACS stand-in (pynetdicom Storage SCP keeping what it receives), a C-STORE sender, free ports."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pydicom


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FakePacs:
    """Receives C-STOREs on loopback and keeps the datasets (by SOP Instance UID, as a PACS stores them)."""

    def __init__(self, ae_title: str = "FAKEPACS", host: str = "127.0.0.1", port: int | None = None):
        from pynetdicom import AE, ALL_TRANSFER_SYNTAXES, AllStoragePresentationContexts, evt

        self.port = port or free_port()
        self.received: list[pydicom.Dataset] = []
        ae = AE(ae_title=ae_title)
        for context in AllStoragePresentationContexts:
            ae.add_supported_context(context.abstract_syntax, ALL_TRANSFER_SYNTAXES)

        def store(event):
            ds = event.dataset
            ds.file_meta = event.file_meta
            self.received.append(ds)
            return 0x0000

        self.server = ae.start_server((host, self.port), block=False, evt_handlers=[(evt.EVT_C_STORE, store)])

    def stored(self) -> dict[str, pydicom.Dataset]:
        return {str(ds.SOPInstanceUID): ds for ds in self.received}

    def close(self) -> None:
        self.server.shutdown()


def send_files(files: list[Path], port: int, ae_title: str = "GATEWAY") -> list[int]:
    """C-STORE every file to 127.0.0.1:port; the status of each."""
    from pynetdicom import AE

    datasets = [pydicom.dcmread(f) for f in files]
    ae = AE(ae_title="SENDER")
    for sop_class in sorted({str(ds.SOPClassUID) for ds in datasets}):
        ae.add_requested_context(sop_class)
    for _ in range(100):  # the gateway may still be starting
        association = ae.associate("127.0.0.1", port, ae_title=ae_title)
        if association.is_established:
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"no association with 127.0.0.1:{port}")
    try:
        return [association.send_c_store(ds).Status for ds in datasets]
    finally:
        association.release()


def wait_for(condition, timeout: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")
