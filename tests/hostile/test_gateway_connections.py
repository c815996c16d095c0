"""Connections that never associate (issue 29, items 2, 10, 11 and 13), against a gateway on loopback: one byte of a
PDU header or nothing at all holds no association slot and is closed within the ACSE timeout; one address has at
most `max_connections_per_address` connections open; the waiting connections are at most
`max_pending_connections`, the oldest closed for a new one; every connection that ends without an A-ASSOCIATE
request has its audit line; what peers and DICOM headers say reaches the log and error.txt escaped, one line each;
a port already in use is one `error:` line."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import time

import pydicom
from gateway_helpers import (REPO, associate, audit_lines, closed_at, closed_within, config_text, connect,
                             connection_lines, copy_study, free_port, send_files, start_gateway, states, wait_for)

from medchallenge.gateway.config import load_config

VERIFICATION = "1.2.840.10008.1.1"


def test_one_byte_connections_hold_no_slot_and_are_closed_within_the_acse_timeout(tmp_path, pacs, studies):
    settings = "max_associations = 2\nacse_timeout_seconds = 3\nnetwork_timeout_seconds = 60\n"
    gateway, port, _ = start_gateway(tmp_path, pacs.port, ["false"], gateway_extra=settings)
    work = tmp_path / "work"
    try:
        opened = time.monotonic()
        one_byte = [connect(port, f"127.0.0.{n}") for n in range(2, 12)]  # ten hosts, one byte each, then silence
        idle = [connect(port, f"127.0.0.{n}") for n in range(12, 16)]  # four more that send nothing
        for connection in one_byte:
            connection.sendall(b"\x01")
        sender = associate(port)  # answered at once: the two slots are for associations
        assert sender.is_established
        sender.release()
        assert set(send_files(studies["mr"], port)) == {0}
        for connection in one_byte + idle:  # each closed by its deadline, 3 s after its accept
            assert closed_at(connection, 20) - opened < 3 + 5
        wait_for(lambda: len(connection_lines(work)) == 14, 10, "an audit line per connection")
    finally:
        assert gateway.stop() == 0
    lines = connection_lines(work)  # one each, a timeout (or, when pynetdicom's own ACSE timer closed it first,
    # the one byte as an incomplete request)
    assert sorted(r["address"] for r in lines) == sorted(f"127.0.0.{n}" for n in range(2, 16))
    assert {r["result"] for r in lines} <= {"timeout", "malformed"}
    assert {r["result"] for r in lines if int(r["address"].split(".")[-1]) >= 12} == {"timeout"}  # the idle ones


def test_an_address_has_at_most_its_connections_and_the_waiting_ones_are_bounded(tmp_path, pacs):
    settings = ("max_associations = 4\nmax_connections_per_address = 3\nmax_pending_connections = 5\n"
                "acse_timeout_seconds = 20\n")
    gateway, port, _ = start_gateway(tmp_path, pacs.port, ["false"], gateway_extra=settings)
    work = tmp_path / "work"
    try:
        same_host = [connect(port, "127.0.0.2") for _ in range(5)]
        assert [closed_within(c, 1) for c in same_host] == [False] * 3 + [True] * 2  # over the cap
        others = [connect(port, f"127.0.0.{n}") for n in range(3, 7)]  # 7 waiting: the two oldest are closed
        time.sleep(1)
        assert [closed_within(c, 1) for c in same_host[:3] + others] == [True] * 2 + [False] * 5
        sender = associate(port)  # the newest waiting connection, answered at once
        assert sender.is_established
        sender.release()
    finally:
        assert gateway.stop() == 0
    lines = connection_lines(work)
    refused = [r for r in lines if r["result"] == "refused"]
    assert len(refused) == 2 and {r["address"] for r in refused} == {"127.0.0.2"}
    assert "max_connections_per_address" in refused[0]["reason"]
    closed = [r for r in lines if r["reason"].startswith("closed for a newer connection")]
    assert len(closed) >= 2 and "max_pending_connections" in closed[0]["reason"]


def association_request(calling: bytes, called: bytes = b"GATEWAY") -> bytes:
    """An A-ASSOCIATE-RQ PDU for Verification whose calling AE title is `calling`, raw bytes, unchecked."""
    def item(kind: int, value: bytes) -> bytes:
        return struct.pack(">BBH", kind, 0, len(value)) + value

    context = item(0x20, b"\x01\x00\x00\x00" + item(0x30, VERIFICATION.encode()) +
                   item(0x40, b"1.2.840.10008.1.2"))
    body = (struct.pack(">HH", 1, 0) + called.ljust(16) + calling.ljust(16)[:16] + bytes(32) +
            item(0x10, b"1.2.840.10008.3.1.1.1") + context + item(0x50, item(0x51, struct.pack(">I", 16384))))
    return struct.pack(">BBI", 0x01, 0, len(body)) + body


MALFORMED = [
    b"\x09\x00\x00\x00\x00\x04abcd",  # an unknown PDU type
    b"\x01\x00\x00\x00\x00\x0a" + b"\xff" * 10,  # an A-ASSOCIATE-RQ of garbage
    b"\x04\x00\x00\x00\x00\x06\x00\x00\x00\x02\x01\x03",  # P-DATA before any association
    b"\x01\x00\x00\x00",  # a header cut short, then closed
    association_request(b"EVIL\n\x00FAKE LINE"),  # a request with a newline and NUL in its AE title (pynetdicom
    # logs the title, then refuses to decode it)
]


def test_malformed_requests_are_audited_and_logged_one_escaped_line_each(tmp_path, pacs):
    gateway, port, _ = start_gateway(tmp_path, pacs.port, ["false"], gateway_extra="acse_timeout_seconds = 5\n")
    work = tmp_path / "work"
    try:
        for pdu in MALFORMED:
            with connect(port, "127.0.0.1") as connection:
                connection.sendall(pdu)
                if pdu[:1] != b"\x01" or len(pdu) > 6:
                    closed_at(connection, 10)
        wait_for(lambda: len([r for r in audit_lines(work) if r["event"] in ("connection", "association")]) >= 5,
                 20, "an audit line per connection")
        assert associate(port).is_established
    finally:
        assert gateway.stop() == 0
    records = [r for r in audit_lines(work) if r["event"] in ("connection", "association")]
    by_result = sorted(r["result"] for r in records if r.get("calling_ae") != "SENDER")
    assert by_result == ["malformed"] * 5, records
    log = (tmp_path / "gateway.log").read_text()
    assert "\x00" not in log and "Traceback" not in log
    assert not any(line.startswith("FAKE") for line in log.splitlines())
    assert "'EVIL\\n\\x00FAKE LINE'" in log


def test_header_text_reaches_the_log_and_error_txt_escaped(tmp_path, pacs, studies):
    gateway, port, _ = start_gateway(tmp_path, pacs.port, ["false"])
    work = tmp_path / "work"
    forged = copy_study(studies["mr"], tmp_path / "forged",
                        BodyPartExamined="BRAIN\nSTUDY 1.2.3: TB-CAVERNS IN 1.0 S, 1 RESULT OBJECT(S) SENT")
    try:
        assert set(send_files(forged, port)) == {0}
        wait_for(lambda: states(work)["unroutable"] == 1, 60, "the unroutable study")
    finally:
        assert gateway.stop() == 0
    study_uid = str(pydicom.dcmread(forged[0]).StudyInstanceUID)
    error = (work / "unroutable" / study_uid / "error.txt").read_text()
    assert error.count("\n") == 1 and "BRAIN\\nSTUDY 1.2.3: TB-CAVERNS" in error
    log = (tmp_path / "gateway.log").read_text()
    assert not any(line.startswith("STUDY 1.2.3") for line in log.splitlines()) and "BRAIN\\nSTUDY 1.2.3" in log
    (study,) = [r for r in audit_lines(work) if r["event"] == "study"]
    assert study["result"] == "unroutable" and study["instances"] == len(forged)


def test_a_port_in_use_is_one_error_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "gateway.toml"
        config.write_text(config_text(tmp_path / "work", port, free_port(), ["false"]))
        load_config(config)
        done = subprocess.run([sys.executable, "-m", "medchallenge.gateway", "--config", str(config)],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(REPO / "shared")})
    assert done.returncode == 1
    assert done.stderr == f"error: cannot listen on 127.0.0.1:{port} (Address already in use)\n"
