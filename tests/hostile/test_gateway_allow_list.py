"""The callers' allow-list as a hospital's security officer reads it (issue 29, item 9): `addresses = []` and a
network with host bits set (`10.0.0.20/8`) are refused by --check with the line saying what to write; an IPv4 caller
of a gateway listening on "::" (arriving as ::ffff:127.0.0.1) is compared as IPv4; AE titles are compared as DICOM
compares them, on the bytes sent: only leading and trailing spaces are insignificant, so a tab or a newline makes a
title that matches none. Against a real gateway on loopback."""

from __future__ import annotations

import socket

import pytest
from gateway_helpers import GatewayProcess, config_text, free_port

from medchallenge.gateway import main

ACCEPT, REJECT = 0x02, 0x03  # A-ASSOCIATE-AC, A-ASSOCIATE-RJ
ABORT = b"\x07\x00\x00\x00\x00\x04\x00\x00\x00\x00"


def _item(kind: int, body: bytes) -> bytes:
    return bytes([kind, 0]) + len(body).to_bytes(2, "big") + body


def association_request(called: bytes, calling: bytes) -> bytes:
    """An A-ASSOCIATE-RQ (PS3.8 9.3.2) for Verification, its AE title fields exactly `called` and `calling` padded
    with spaces to 16 bytes: what pynetdicom's own AE would refuse to send."""
    context = _item(0x20, b"\x01\x00\x00\x00" + _item(0x30, b"1.2.840.10008.1.1") + _item(0x40, b"1.2.840.10008.1.2"))
    body = (b"\x00\x01\x00\x00" + called.ljust(16) + calling.ljust(16) + bytes(32)
            + _item(0x10, b"1.2.840.10008.3.1.1.1") + context + _item(0x50, _item(0x51, (16384).to_bytes(4, "big"))))
    return b"\x01\x00" + len(body).to_bytes(4, "big") + body


def answer(port: int, called: bytes = b"GATEWAY", calling: bytes = b"SENDER", host: str = "127.0.0.1",
           source: str = "127.0.0.1") -> int:
    """The PDU type the gateway answers an association request with."""
    with socket.create_connection((host, port), timeout=30, source_address=(source, 0)) as connection:
        connection.sendall(association_request(called, calling))
        kind = connection.recv(1)[0]
        connection.sendall(ABORT)
    return kind


def write_config(tmp_path, port: int, host: str = "127.0.0.1", addresses: str = '["127.0.0.1"]'):
    text = config_text(tmp_path / "work", port, free_port(), ["true"])
    text = text.replace('host = "127.0.0.1"\nport', f'host = "{host}"\nport', 1)
    path = tmp_path / "gateway.toml"
    path.write_text(text.replace('addresses = ["127.0.0.1"]', f"addresses = {addresses}", 1))
    return path


def test_an_ipv4_caller_of_a_gateway_listening_on_ipv6_is_compared_as_ipv4(tmp_path):
    port = free_port()
    gateway = GatewayProcess(write_config(tmp_path, port, host="::"), tmp_path / "gateway.log")
    gateway.wait_ready()
    try:
        assert answer(port) == ACCEPT  # arriving as ::ffff:127.0.0.1, listed as 127.0.0.1
        assert answer(port, source="127.0.0.2") == REJECT  # ::ffff:127.0.0.2 is not 127.0.0.1
        assert answer(port, host="::1", source="::1") == REJECT  # IPv6 loopback is not 127.0.0.1 either
    finally:
        assert gateway.stop() == 0
    log = (tmp_path / "gateway.log").read_text()
    assert log.count("rejected an association") == 2 and "at ::ffff:127.0.0.2" in log


def test_ae_titles_are_compared_as_dicom_compares_them(tmp_path):
    port = free_port()
    gateway = GatewayProcess(write_config(tmp_path, port), tmp_path / "gateway.log")
    gateway.wait_ready()
    try:
        assert answer(port, calling=b"  SENDER") == ACCEPT  # leading and trailing spaces are padding
        assert answer(port, called=b" GATEWAY") == ACCEPT
        assert answer(port, calling=b"SENDER\t") == REJECT  # other white space is no padding: no valid AE title
        assert answer(port, calling=b"SENDER\r\n") == REJECT
        assert answer(port, calling=b"\x0bSENDER") == REJECT
        assert answer(port, called=b"GATEWAY\t") == REJECT
        assert answer(port, calling=b"sender") == REJECT  # case is significant
    finally:
        assert gateway.stop() == 0
    log = (tmp_path / "gateway.log").read_text()
    assert log.count("rejected an association") == 5
    assert log.count("calling AE title holds a character no AE title may hold") == 3


@pytest.mark.parametrize("addresses, message", [
    ("[]", "addresses = [] lists no address: give the sender's IP addresses or networks, or leave addresses out to "
           "accept this AE title from any address"),
    ('["10.0.0.20/8"]', "addresses: '10.0.0.20/8' has host bits set: write '10.0.0.0/8' for the whole network, or "
                        "'10.0.0.20' for the one address"),
    ('["::ffff:127.0.0.1"]', "addresses: '::ffff:127.0.0.1' is an IPv4-mapped IPv6 address: write it as IPv4, "
                             "'127.0.0.1'"),
])
def test_check_refuses_an_allow_list_that_says_other_than_it_means(tmp_path, capsys, addresses, message):
    path = write_config(tmp_path, free_port(), addresses=addresses)
    assert main(["--config", str(path), "--check"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {path} [[caller]] 1: {message}"), err


def test_check_accepts_networks_and_says_when_a_caller_is_accepted_from_anywhere(tmp_path, caplog):
    path = write_config(tmp_path, free_port(), addresses='["10.0.0.0/8", "127.0.0.1", "fd00::/8", "::1"]')
    assert main(["--config", str(path), "--check"]) == 0
    assert "accepted from any address" not in caplog.text
    path.write_text(path.read_text().replace('addresses = ["10.0.0.0/8", "127.0.0.1", "fd00::/8", "::1"]\n', "", 1))
    assert main(["--config", str(path), "--check"]) == 0
    assert f"{path} [[caller]] 1: no addresses: AE title 'SENDER' is accepted from any address" in caplog.text
