"""Which connections the gateway's storage server takes, and for how long before they associate.

Every connection is accepted into a `ConnectionGuard` before pynetdicom sees it: over `max_connections_per_address`
open from its address it is closed at once; its TLS handshake and its A-ASSOCIATE request must be complete within
`acse_timeout_seconds` of its accept (the guard shuts the socket down at that deadline, whatever pynetdicom is
blocked in); while it has not associated it counts against `max_pending_connections` only (when these are all taken,
the oldest is closed for the new one), never against `max_associations`, which counts the associations the gateway
accepted. Each connection that ends without an A-ASSOCIATE request has its audit line and log line here."""

from __future__ import annotations

import fcntl
import logging
import select
import socket
import ssl
import struct
import termios
import threading
import time
from dataclasses import dataclass, field

from ..logs import escape
from .audit import AuditLog, utc_now
from .config import Limits

log = logging.getLogger("medchallenge.gateway")

PENDING, REQUESTED, ASSOCIATED = "pending", "requested", "associated"


@dataclass(eq=False)
class Connection:
    """One accepted connection: its socket (the TLS socket once wrapped) and how far it got."""

    sock: socket.socket
    address: str
    port: int
    deadline: float  # time.monotonic() by which its A-ASSOCIATE request must have arrived
    started: str = field(default_factory=utc_now)
    state: str = PENDING  # PENDING until its A-ASSOCIATE request, REQUESTED, ASSOCIATED once the gateway accepts it
    bytes_received: int = 0
    ended: str = ""  # why the guard ended it ("" while it is open, or when pynetdicom closed it)
    result: str = ""  # the audit line's result when the guard ended it
    awaiting: str = "A-ASSOCIATE request"  # what the deadline is for
    association: threading.Thread | None = None  # pynetdicom's Association thread, once it has one

    def is_open(self) -> bool:
        return not self.ended and self.sock.fileno() != -1 and not self._association_over() and not self._peer_left()

    def _association_over(self) -> bool:
        return self.association is not None and self.association.ident is not None and \
            not self.association.is_alive()

    def _peer_left(self) -> bool:
        """Before its request: whether the peer closed its side and everything it sent was read (pynetdicom keeps
        such a socket until its ACSE timer ends), asked of the kernel without reading."""
        if self.state != PENDING:
            return False
        poll = select.poll()
        try:
            poll.register(self.sock, select.POLLRDHUP)
            hung_up = any(events & (select.POLLRDHUP | select.POLLHUP | select.POLLERR) for _, events in poll.poll(0))
            return hung_up and struct.unpack("i", fcntl.ioctl(self.sock, termios.FIONREAD, b"\0" * 4))[0] == 0
        except (OSError, ValueError):  # closed meanwhile
            return True

    def overdue(self) -> str:
        return f"no complete {self.awaiting} within the ACSE timeout"

    def malformed(self) -> str:
        return f"closed on a malformed or incomplete A-ASSOCIATE request ({self.bytes_received} byte(s) received)"

    def shut_down(self, result: str, reason: str) -> None:
        """End it now, from any thread: a reader blocked on it (pynetdicom, the TLS handshake) sees the end at once;
        its thread closes it."""
        self.result, self.ended = result, reason
        try:
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)  # the fd, not SSLSocket.shutdown (not thread-safe)
        except OSError:
            pass


class ConnectionGuard:
    """The open connections of one storage server, counted per address and by state."""

    def __init__(self, limits: Limits, audit: AuditLog):
        self.limits = limits
        self.audit = audit
        self.connections: dict[int, Connection] = {}  # by id() of the socket pynetdicom reads
        self.lock = threading.Lock()

    def admit(self, sock: socket.socket, address: tuple) -> Connection | None:
        """A connection just accepted: the guard's, or refused (closed, audited) when its address has
        `max_connections_per_address` open; the oldest pending one is closed when `max_pending_connections` are."""
        host, port = str(address[0]), int(address[1])
        sock.settimeout(self.limits.network_timeout_seconds)  # no read or write of this socket blocks for longer
        with self.lock:
            self._prune()
            from_there = sum(c.address == host for c in self.connections.values())
            if from_there >= self.limits.max_connections_per_address:
                refused = Connection(sock, host, port, 0.0)
            else:
                refused = None
                pending = [c for c in self.connections.values() if c.state == PENDING]
                if len(pending) >= self.limits.max_pending_connections:
                    oldest = min(pending, key=lambda c: c.deadline)
                    oldest.shut_down("closed", f"closed for a newer connection: {len(pending)} connections were "
                                               "waiting for their A-ASSOCIATE request (max_pending_connections)")
                    self._prune()
                connection = Connection(sock, host, port, time.monotonic() + self.limits.acse_timeout_seconds)
                self.connections[id(sock)] = connection
        if refused is not None:
            self._report(refused, "refused", f"{from_there} connections open from this address "
                                             "(max_connections_per_address)")
            return None
        return connection

    def handshake(self, sock: socket.socket, context: ssl.SSLContext) -> socket.socket | None:
        """The TLS handshake of an admitted connection, within what is left of its deadline; the TLS socket, or None
        (the connection closed and audited)."""
        with self.lock:
            connection = self.connections.pop(id(sock), None)
            if connection is None:  # ended (and audited) meanwhile
                sock.close()
                return None
            connection.awaiting = "TLS handshake"
            connection.sock = context.wrap_socket(connection.sock, server_side=True, do_handshake_on_connect=False)
            self.connections[id(connection.sock)] = connection
        try:
            connection.sock.settimeout(max(connection.deadline - time.monotonic(), 0.001))
            connection.sock.do_handshake()
            connection.sock.settimeout(self.limits.network_timeout_seconds)
            connection.awaiting = "A-ASSOCIATE request"
            return connection.sock
        except (OSError, ValueError) as exc:  # ssl.SSLError and TimeoutError are OSErrors
            if isinstance(exc, TimeoutError):
                connection.result, connection.ended = "timeout", connection.overdue()
            elif not connection.ended:
                connection.result, connection.ended = "tls-failed", f"TLS handshake failed ({exc})"
            connection.sock.close()
            with self.lock:
                self._prune()
            return None

    def find(self, sock: socket.socket | None) -> Connection | None:
        return self.connections.get(id(sock))

    def request(self, connection: Connection | None, accept: bool) -> bool:
        """Its A-ASSOCIATE request arrived (the audit line is the association's now): whether an association may
        be accepted for it, with `accept`, or is refused for `max_associations` (counted, the guard's own)."""
        with self.lock:
            associated = sum(c.state == ASSOCIATED and c.is_open() for c in self.connections.values())
            if connection is None:
                return False
            if accept and associated < self.limits.max_associations:
                connection.state = ASSOCIATED
                return True
            connection.state = REQUESTED
            return False

    def sweep(self) -> None:
        """Close the pending connections past their deadline; forget (and audit) those that ended."""
        now = time.monotonic()
        with self.lock:
            for connection in self.connections.values():
                if connection.state == PENDING and not connection.ended and now > connection.deadline:
                    if connection.bytes_received:  # PDUs read, none a request: pynetdicom waits for its abort
                        connection.shut_down("malformed", connection.malformed())
                    else:
                        connection.shut_down("timeout", connection.overdue())
            self._prune()

    def _prune(self) -> None:
        """Drop the connections that are no longer open; those that never sent an A-ASSOCIATE request are
        audited (the lock held)."""
        for key, connection in list(self.connections.items()):
            if connection.is_open():
                continue
            del self.connections[key]
            if connection.state != PENDING:
                continue
            if connection.ended:
                self._report(connection, connection.result, connection.ended)
            elif connection.bytes_received:
                self._report(connection, "malformed", connection.malformed())
            elif time.monotonic() >= connection.deadline:  # pynetdicom's own ACSE timer closed it
                self._report(connection, "timeout", connection.overdue())
            else:
                self._report(connection, "closed", "closed before sending anything")

    def _report(self, connection: Connection, result: str, reason: str) -> None:
        log.warning("connection from %s:%d %s: %s", connection.address, connection.port, result, escape(reason))
        self.audit.write("connection", address=connection.address, port=connection.port,
                         started=connection.started, result=result, reason=reason)
