"""DICOM TLS in both directions (issue 22, part 1), with certificates of a self-signed CA made here by openssl: callers
must present a certificate of the configured CA (plain TCP and another CA's certificate fail), and the gateway
checks the PACS's certificate and host name when it sends."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from pathlib import Path

import pydicom
import pytest
from gateway_helpers import FakePacs, associate, audit_lines, start_gateway, states, wait_for

from medchallenge.dicom.sr import read_failure_note


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run([shutil.which("openssl") or "openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(folder: Path, name: str) -> None:
    """`name`-ca.crt/.key, and certificates for `name`-server (127.0.0.1) and `name`-client signed by it."""
    folder.mkdir(exist_ok=True)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name} test CA",
            "-keyout", f"{name}-ca.key", "-out", f"{name}-ca.crt", cwd=folder)
    for role in ("server", "client"):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}-{role}", "-keyout", f"{name}-{role}.key",
                "-out", f"{name}-{role}.csr", cwd=folder)
        (folder / f"{name}-{role}.ext").write_text("subjectAltName = IP:127.0.0.1\n")
        openssl("x509", "-req", "-in", f"{name}-{role}.csr", "-CA", f"{name}-ca.crt", "-CAkey", f"{name}-ca.key",
                "-CAcreateserial", "-days", "2", "-extfile", f"{name}-{role}.ext", "-out", f"{name}-{role}.crt",
                cwd=folder)


def client_context(folder: Path, name: str, ca: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(folder / f"{ca}-ca.crt"))
    context.load_cert_chain(str(folder / f"{name}-client.crt"), str(folder / f"{name}-client.key"))
    return context


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
