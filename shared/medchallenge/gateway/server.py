"""The DICOM Storage SCP: only the configured callers, each instance checked against the size limits and on disk
in incoming/ before its C-STORE is answered with success; one audit line per association."""

from __future__ import annotations

import logging
import re
import tempfile
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from ..dicom.deflated import InflatedTooLarge, inflated_size, is_deflated
from ..dicom.files import HeaderTooLarge, read_header
from ..errors import InputError
from .audit import AuditLog, utc_now
from .config import GatewayConfig, same_ae_title, significant_ae_title
from .connections import ConnectionGuard
from .contexts import identify
from .queue import INTERRUPTED, RECEIVING, TOO_LARGE, WorkQueue, is_disk_full

log = logging.getLogger("medchallenge.gateway")

UID = re.compile(r"[0-9]+(\.[0-9]+)*")
SUCCESS = 0x0000
OUT_OF_RESOURCES = 0xA700
CANNOT_UNDERSTAND = 0xC000
NOT_MATCHING_SOP_CLASS = 0xA900
STORE_TAGS = ("StudyInstanceUID", "SOPInstanceUID")  # what storing an instance reads of its header
MAX_PDU_BYTES = 4 << 20  # a PDU claiming more is cut off before it is read (the gateway offers 16 kB PDUs)


@dataclass
class AssociationRecord:
    """What one association did, for its audit line."""

    calling_ae: str
    called_ae: str
    address: str
    port: int
    started: str = field(default_factory=utc_now)
    stored: dict[str, int] = field(default_factory=dict)  # instances per study
    refused: dict[str, int] = field(default_factory=dict)  # refusals per reason
    bytes_in_message: int = 0  # P-DATA bytes since the last complete C-STORE
    released: bool = False


def gateway_server_class(guard: ConnectionGuard):
    """pynetdicom's threaded server, every connection admitted by `guard` when accepted (connections.py), its TLS
    handshake done in the connection's own thread (pynetdicom does it while accepting, so one caller that connects
    and sends nothing would stop every other connection) and bounded by the guard's deadline."""
    from pynetdicom.transport import ThreadedAssociationServer

    class GatewayServer(ThreadedAssociationServer):
        def get_request(self):
            return self.socket.accept()

        def verify_request(self, request, client_address) -> bool:
            return guard.admit(request, client_address) is not None

        def process_request_thread(self, request, client_address) -> None:
            if self.ssl_context:
                request = guard.handshake(request, self.ssl_context)
                if request is None:
                    return
            super().process_request_thread(request, client_address)

        def service_actions(self) -> None:  # every poll of the accepting loop (0.5 s)
            super().service_actions()
            guard.sweep()

    return GatewayServer


class StorageServer:
    """The gateway's listening AE, storing what it receives into the work queue."""

    def __init__(self, config: GatewayConfig, queue: WorkQueue, audit: AuditLog):
        self.config = config
        self.queue = queue
        self.audit = audit
        self.server = None
        self.disk_full = threading.Event()  # set by the worker while the disk is full: C-STOREs are refused
        self.associations: dict[int, AssociationRecord] = {}
        self.requested_titles = weakref.WeakKeyDictionary()  # association -> (called, calling) AE titles as sent
        self.lock = threading.Lock()
        self.guard = ConnectionGuard(config.limits, audit)

    # --- who may store ---------------------------------------------------------------------------------------
    def on_data_received(self, event) -> None:
        """Bytes of a PDU: an A-ASSOCIATE-RQ's AE title fields kept as sent (PS3.8 9.3.2: called at bytes 11-26,
        calling at 27-42), for on_requested: pynetdicom strips every whitespace character from them, a tab or a
        newline too, where DICOM drops only spaces."""
        if event.data[:1] == b"\x01" and len(event.data) >= 42:
            with self.lock:
                self.requested_titles[event.assoc] = (event.data[10:26].decode("latin-1"),
                                                      event.data[26:42].decode("latin-1"))

    def on_requested(self, event) -> None:
        """A-ASSOCIATE-RQ: rejected unless the called AE title is ours, the caller is on the allow-list (both AE
        titles compared as DICOM compares them: config.same_ae_title, on the titles as sent) and fewer than
        `max_associations` associations are open."""
        assoc, request = event.assoc, event.assoc.requestor.primitive
        calling, called = request.calling_ae_title.strip(), request.called_ae_title.strip()
        address, port = assoc.requestor.address, assoc.requestor.port
        connection = self.guard.find(assoc.dul.socket.socket)
        with self.lock:
            sent_called, sent_calling = self.requested_titles.pop(assoc, ("", ""))
        if not same_ae_title(sent_called, self.config.ae_title):
            reason, rejection = "called AE title is not the gateway's", (0x01, 0x01, 0x07)
        elif significant_ae_title(sent_calling) is None:  # pynetdicom shows it without the tab or newline
            reason, rejection = "calling AE title holds a character no AE title may hold", (0x01, 0x01, 0x03)
        elif not any(caller.allows(sent_calling, address) for caller in self.config.callers):
            reason, rejection = "calling AE title not allowed from this address", (0x01, 0x01, 0x03)
        elif self.guard.request(connection, accept=True):
            with self.lock:
                self.associations[id(assoc)] = AssociationRecord(calling, called, address, port)
            return
        else:  # rejected-transient, by the presentation service: local limit exceeded
            reason, rejection = f"{self.config.limits.max_associations} associations open (max_associations)", \
                (0x02, 0x03, 0x02)
        self.guard.request(connection, accept=False)
        log.warning("rejected an association from %r at %s:%d to %r: %s", calling, address, port, called, reason)
        self.audit.write("association", calling_ae=calling, called_ae=called, address=address, port=port,
                         result="rejected", reason=reason)
        assoc.acse.send_reject(*rejection)
        assoc.kill()  # as pynetdicom's own rejections: waits (ARTIM-bounded) until the reject is sent and closed

    def on_open(self, event) -> None:
        """A connection admitted by the guard: its reads counted for it and bounded, since pynetdicom reads a PDU
        whole, whatever length its header claims (a read past MAX_PDU_BYTES closes the connection)."""
        sock = event.assoc.dul.socket
        read = sock.recv
        connection = self.guard.find(sock.socket)
        if connection is not None:
            connection.association = event.assoc

        def bounded_read(nr_bytes: int):
            if nr_bytes > MAX_PDU_BYTES:
                log.error("connection from %s: a PDU of %d bytes; closed", event.address[0], nr_bytes)
                raise ConnectionError("PDU over the size limit")
            data = read(nr_bytes)
            if connection is not None:
                connection.bytes_received += len(data)
            return data

        sock.recv = bounded_read

    def on_pdu(self, event) -> None:
        """A P-DATA PDU received: an instance growing past the size limit aborts its association (the instance is
        never complete, so nothing of it is kept)."""
        from pynetdicom.pdu import P_DATA_TF

        if not isinstance(event.pdu, P_DATA_TF):
            return
        record = self.associations.get(id(event.assoc))
        if record is None:
            return
        record.bytes_in_message += len(event.pdu)
        if record.bytes_in_message > self.config.limits.max_instance_bytes + (1 << 20):
            record.refused["instance over the size limit (aborted)"] = 1
            log.error("association from %r at %s: an instance over %d bytes; aborted", record.calling_ae,
                      record.address, self.config.limits.max_instance_bytes)
            event.assoc.abort()

    def on_end(self, event) -> None:
        """Released, aborted or the connection closed: the association's audit line; studies it was storing when
        it was cut off are marked interrupted."""
        if event.event.name == "EVT_RELEASED":
            record = self.associations.get(id(event.assoc))
            if record is not None:
                record.released = True
            return
        with self.lock:
            record = self.associations.pop(id(event.assoc), None)
        if record is None:
            return
        if not record.released:
            for study_uid in record.stored:
                self.queue.mark(study_uid, INTERRUPTED)
        self.audit.write("association", calling_ae=record.calling_ae, called_ae=record.called_ae,
                         address=record.address, port=record.port, started=record.started,
                         result="released" if record.released else "aborted", stored=record.stored,
                         refused=record.refused)

    # --- storing ---------------------------------------------------------------------------------------------
    def refuse(self, record: AssociationRecord | None, reason: str, status: int, study_uid: str = "") -> int:
        if record is not None:
            record.refused[reason] = record.refused.get(reason, 0) + 1
        log.error("refused an instance%s from %r: %s", f" of study {study_uid}" if study_uid else "",
                  record.calling_ae if record else "?", reason)
        return status

    def handle_store(self, event) -> int:
        """C-STORE: the instance checked (UIDs, size, header bounds, inflated size, the study's size, the work
        folder's quota) and on disk before success is answered. Only the UIDs of its header are read, within the
        header bounds (`dicom.files`); a deflated instance is inflated as a stream to count its size, never whole."""
        record = self.associations.get(id(event.assoc))
        if record is not None:
            record.bytes_in_message = 0
        limits = self.config.limits
        path = Path(event.dataset_path)
        if self.disk_full.is_set():
            return self.refuse(record, "disk full", OUT_OF_RESOURCES)
        size = path.stat().st_size
        if size > limits.max_instance_bytes:
            return self.refuse(record, "instance over the size limit", OUT_OF_RESOURCES)
        try:
            header = read_header(path, STORE_TAGS)
            if is_deflated(header.file_meta):
                inflated_size(path, limits.max_instance_bytes)
            study_uid, sop_uid = str(header.get("StudyInstanceUID", "")), str(header.get("SOPInstanceUID", ""))
        except InflatedTooLarge:
            return self.refuse(record, "deflated instance inflating over the size limit", OUT_OF_RESOURCES)
        except HeaderTooLarge:
            return self.refuse(record, "header over its bounds (data elements or bytes before the pixel data)",
                               OUT_OF_RESOURCES)
        except Exception as exc:  # whatever a hostile file makes pydicom raise: refused, the gateway goes on
            log.error("an unreadable instance from %r (%s: %s)", record.calling_ae if record else "?",
                      type(exc).__name__, exc)
            return self.refuse(record, "unreadable instance", CANNOT_UNDERSTAND)
        if not (UID.fullmatch(study_uid) and UID.fullmatch(sop_uid)) or len(study_uid) > 64 or len(sop_uid) > 64:
            return self.refuse(record, "no valid StudyInstanceUID/SOPInstanceUID", NOT_MATCHING_SOP_CLASS)
        if sop_uid in self.queue.sent:  # one of our results coming back (a PACS forwarding the whole study)
            return SUCCESS
        if self.queue.study_bytes.get(study_uid, 0) + size > limits.max_study_bytes:
            self.queue.mark(study_uid, TOO_LARGE)
            return self.refuse(record, "study over the size limit", OUT_OF_RESOURCES, study_uid)
        if self.queue.bytes_held + size > limits.work_quota_bytes:
            return self.refuse(record, "work folder quota reached", OUT_OF_RESOURCES, study_uid)
        try:
            first = record is not None and study_uid not in record.stored  # the association's first of it
            self.queue.store(study_uid, sop_uid, path, f"{record.calling_ae} {record.address}" if first else None)
        except OSError as exc:
            if is_disk_full(exc):
                self.disk_full.set()
            log.error("study %s: cannot store instance %s (%s)", study_uid, sop_uid, exc.strerror or exc)
            return self.refuse(record, "cannot store", OUT_OF_RESOURCES, study_uid)
        if record is not None:
            record.stored[study_uid] = record.stored.get(study_uid, 0) + 1
        return SUCCESS

    def start(self) -> None:
        from pynetdicom import AE, _config, evt

        _config.STORE_RECV_CHUNKED_DATASET = True  # instances are written to a file as they arrive, not kept in memory
        tempfile.tempdir = str(self.queue.root / RECEIVING)  # ... in the work folder (renamed into incoming/)
        limits = self.config.limits
        ae = AE(ae_title=self.config.ae_title)
        identify(ae)
        ae.maximum_associations = 1 << 20  # pynetdicom counts every connection's thread: the guard counts them
        ae.acse_timeout = limits.acse_timeout_seconds
        ae.dimse_timeout = limits.dimse_timeout_seconds
        ae.network_timeout = limits.network_timeout_seconds
        for abstract_syntax, transfer_syntaxes in self.config.accepted_contexts():
            ae.add_supported_context(abstract_syntax, transfer_syntaxes)
        handlers = [(evt.EVT_CONN_OPEN, self.on_open), (evt.EVT_C_STORE, self.handle_store),
                    (evt.EVT_REQUESTED, self.on_requested), (evt.EVT_DATA_RECV, self.on_data_received),
                    (evt.EVT_PDU_RECV, self.on_pdu), (evt.EVT_RELEASED, self.on_end),
                    (evt.EVT_ABORTED, self.on_end), (evt.EVT_CONN_CLOSE, self.on_end)]
        tls = self.config.tls.server_context() if self.config.tls else None
        try:
            self.server = ae.make_server((self.config.host, self.config.port), evt_handlers=handlers,
                                         ssl_context=tls, server_class=gateway_server_class(self.guard))
        except OSError as exc:  # the port taken, the address not this host's
            raise InputError(f"cannot listen on {self.config.host}:{self.config.port} "
                             f"({exc.strerror or exc})") from None
        ae._servers.append(self.server)  # as AE.start_server does: its shutdown() removes it from there
        threading.Thread(target=self.server.serve_forever, name="gateway-acceptor", daemon=True).start()
        log.info("gateway %s listening on %s:%d%s; callers %s; PACS %s@%s:%d; work queue %s", self.config.ae_title,
                 self.config.host, self.config.port, " (TLS)" if tls else "",
                 ", ".join(c.ae_title for c in self.config.callers),
                 self.config.pacs_ae_title, self.config.pacs_host, self.config.pacs_port, self.config.work_dir)

    def shutdown(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.guard.sweep()  # the audit lines of the connections that ended since the last poll
