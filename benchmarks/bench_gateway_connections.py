"""Benchmark: how long a legitimate sender waits for its association to be answered while connections that never
associate hold what they can of the gateway (issue 29, item 2), on the plain and the TLS port.

`run()` starts two gateways with the default limits (`max_associations` 10, `acse_timeout_seconds` 30,
`max_connections_per_address` = `max_associations`, `max_pending_connections` 50), one plain and one with mutual TLS
(certificates of a CA made by openssl; tests/gateway_helpers.py starts them), and for each, from loopback addresses
other than the sender's:
`pending_full`: `max_pending_connections` connections, half of which sent one byte of a PDU header (0x01; 0x16, a
ClientHello's first byte, on the TLS port) and went silent, half nothing; `flood`: 300 idle connections more from
30 addresses (10 each, the per-address cap); `after_close`: those 350 closed at once. After each, the sender (allowed,
127.0.0.1) requests an association: reported are the seconds until it is answered (`*_answer_seconds`) and whether it
was accepted (`*_accepted`); the goal is an answer within the ACSE timeout (`gateway_connections_goal_met`). The
gateway's own view (accepted, refused and timed-out connections) is in its audit log, counted here.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
ACSE_TIMEOUT = 30.0
PENDING = 50
FLOOD_ADDRESSES, PER_ADDRESS = 30, 10


def _answer_seconds(port: int, tls_args) -> tuple[float, bool]:
    """The seconds until the gateway answers an association request of the sender, and whether it accepted."""
    from pynetdicom import AE

    ae = AE(ae_title="SENDER")
    ae.acse_timeout = ae.network_timeout = ae.connection_timeout = 2 * ACSE_TIMEOUT
    ae.add_requested_context("1.2.840.10008.1.1")
    started = time.perf_counter()
    association = ae.associate("127.0.0.1", port, ae_title="GATEWAY", tls_args=tls_args)
    waited = time.perf_counter() - started
    accepted = association.is_established
    if accepted:
        association.release()
    return round(waited, 3), accepted


def _open(port: int, addresses: range, per_address: int, first_byte: bytes | None) -> list[socket.socket]:
    """Connections from 127.0.0.<a> for each a of `addresses`, `per_address` each; every other one sends
    `first_byte` when given."""
    connections = []
    for a in addresses:
        for n in range(per_address):
            try:
                connection = socket.create_connection(("127.0.0.1", port), timeout=10,
                                                      source_address=(f"127.0.0.{a}", 0))
            except OSError:
                continue
            if first_byte and n % 2 == 0:
                try:
                    connection.sendall(first_byte)
                except OSError:
                    pass
            connections.append(connection)
    return connections


def _measure(name: str, port: int, tls_args, first_byte: bytes) -> dict:
    result = {}
    held = _open(port, range(2, 2 + PENDING // PER_ADDRESS), PER_ADDRESS, first_byte)
    result[f"{name}_pending_full_answer_seconds"], result[f"{name}_pending_full_accepted"] = \
        _answer_seconds(port, tls_args)
    held += _open(port, range(20, 20 + FLOOD_ADDRESSES), PER_ADDRESS, None)
    result[f"{name}_flood_connections"] = len(held)
    result[f"{name}_flood_answer_seconds"], result[f"{name}_flood_accepted"] = _answer_seconds(port, tls_args)
    for connection in held:
        connection.close()
    result[f"{name}_after_close_answer_seconds"], result[f"{name}_after_close_accepted"] = \
        _answer_seconds(port, tls_args)
    return result


def run() -> dict:
    from gateway_helpers import GatewayProcess, client_context, config_text, free_port, make_ca

    result: dict = {"gateway_connections_acse_timeout_seconds": ACSE_TIMEOUT,
                    "gateway_connections_max_pending": PENDING}
    with tempfile.TemporaryDirectory(prefix="bench_gateway_connections_") as tmp:
        certificates = Path(tmp) / "tls"
        make_ca(certificates, "bench")
        tls_table = f"""[gateway.tls]
certificate = "{certificates / 'bench-server.crt'}"
private_key = "{certificates / 'bench-server.key'}"
ca_certificates = "{certificates / 'bench-ca.crt'}"
"""
        for name, tls, first_byte in (("gateway_connections_plain", "", b"\x01"),
                                      ("gateway_connections_tls", tls_table, b"\x16")):
            folder = Path(tmp) / name
            folder.mkdir()
            port = free_port()
            (folder / "gateway.toml").write_text(config_text(folder / "work", port, free_port(), ["false"],
                                                             gateway_extra=f"acse_timeout_seconds = {ACSE_TIMEOUT}\n"
                                                                           + tls))
            gateway = GatewayProcess(folder / "gateway.toml", folder / "gateway.log")
            try:
                gateway.wait_ready()
                tls_args = (client_context(certificates, "bench", "bench"), "127.0.0.1") if tls else None
                result.update(_measure(name, port, tls_args, first_byte))
            finally:
                gateway.stop()
            audit = [json.loads(line) for line in (folder / "work" / "audit.jsonl").read_text().splitlines()]
            for outcome in ("refused", "timeout", "closed", "tls-failed"):
                result[f"{name}_audited_{outcome}"] = sum(r.get("result") == outcome for r in audit)
    answers = [v for k, v in result.items() if k.endswith("_answer_seconds")]
    result["gateway_connections_goal_met"] = all(a < ACSE_TIMEOUT for a in answers) and \
        all(v for k, v in result.items() if k.endswith("_accepted"))
    result["gateway_connections_load_average_1min"] = round(os.getloadavg()[0], 2)
    return result


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
