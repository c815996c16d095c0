"""DICOM TLS in both directions (issue 22, part 1), with certificates of a self-signed CA made here by openssl: callers
must present a certificate of the configured CA (plain TCP and another CA's certificate fail), and the gateway
checks the PACS's certificate and host name when it sends."""

from __future__ import annotations

import socket
import ssl
import time
from pathlib import Path

import pydicom
import pytest
from gateway_helpers import (FakePacs, associate, audit_lines, client_context, closed_at, connect, connection_lines,
                             make_ca, start_gateway, states, wait_for)

from medchallenge.dicom.sr import read_failure_note


@pytest.fixture
def certificates(tmp_path) -> Path:
    folder = tmp_path / "tls"
    make_ca(folder, "hospital")
    make_ca(folder, "stranger")
    return folder


def test_dicom_tls_both_ways_with_a_self_signed_ca(tmp_path, certificates, studies):
    pacs_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    pacs_context.load_cert_chain(str(certificates / "hospital-server.crt"), str(certificates / "hospital-server.key"))
    pacs = FakePacs(ssl_context=pacs_context)
    tls = f"""
[gateway.tls]
certificate = "{certificates / 'hospital-server.crt'}"
private_key = "{certificates / 'hospital-server.key'}"
ca_certificates = "{certificates / 'hospital-ca.crt'}"
"""
    pacs_tls = f"""
[pacs.tls]
ca_certificates = "{certificates / 'hospital-ca.crt'}"
"""
    gateway, port, _ = start_gateway(tmp_path, pacs.port, ["false"], gateway_extra=tls, pacs_extra=pacs_tls)
    work = tmp_path / "work"
    ct = pydicom.dcmread(studies["tb"][0])
    try:
        assert not associate(port).is_established  # plain TCP
        silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]  # connect, never handshake
        assert not associate(port, tls_args=(client_context(certificates, "stranger", "hospital"),
                                             "127.0.0.1")).is_established  # another CA's certificate
        sender = associate(port, contexts=(str(ct.SOPClassUID),),
                           tls_args=(client_context(certificates, "hospital", "hospital"), "127.0.0.1"))
        assert sender.is_established
        assert {sender.send_c_store(pydicom.dcmread(p)).Status for p in studies["tb"]} == {0}
        sender.release()
        for connection in silent:
            connection.close()
        wait_for(lambda: states(work)["failed"] == 1 and len(pacs.received) == 1, 60, "the note over TLS")
    finally:
        assert gateway.stop() == 0
        pacs.close()
    assert "could not process this study" in read_failure_note(pacs.received[0])
    assert "(TLS)" in (tmp_path / "gateway.log").read_text()
    assert any(r["event"] == "association" and r["result"] == "released" for r in audit_lines(work))


def test_tls_handshakes_are_bounded_and_audited(tmp_path, pacs, certificates):
    """Issue 29, items 2 and 11: a handshake that stalls holds no association slot, is closed within the ACSE
    timeout and audited, as is one that fails."""
    tls = f"""acse_timeout_seconds = 3
max_associations = 1
[gateway.tls]
certificate = "{certificates / 'hospital-server.crt'}"
private_key = "{certificates / 'hospital-server.key'}"
ca_certificates = "{certificates / 'hospital-ca.crt'}"
"""
    gateway, port, _ = start_gateway(tmp_path, pacs.port, ["false"], gateway_extra=tls)
    work = tmp_path / "work"
    try:
        opened = time.monotonic()
        stalled = [connect(port, f"127.0.0.{n}") for n in range(2, 6)]  # a ClientHello's first byte, then nothing
        for connection in stalled:
            connection.sendall(b"\x16")
        assert not associate(port, tls_args=(client_context(certificates, "stranger", "hospital"),
                                             "127.0.0.1")).is_established
        sender = associate(port, tls_args=(client_context(certificates, "hospital", "hospital"), "127.0.0.1"))
        assert sender.is_established  # the one slot is the sender's
        sender.release()
        for connection in stalled:
            assert closed_at(connection, 20) - opened < 3 + 5
    finally:
        assert gateway.stop() == 0
    lines = connection_lines(work)
    assert len([r for r in lines if r["reason"] == "no complete TLS handshake within the ACSE timeout"]) == 4
    (failed,) = [r for r in lines if r["result"] == "tls-failed"]
    assert failed["address"] == "127.0.0.1" and failed["reason"].startswith("TLS handshake failed")
