"""Bounded resources (issue 22, part 4, the gateway's part), against a gateway on loopback: size limits per instance
(checked while it arrives, and on the inflated size of a deflated one), per study and for the work folder, each a
refusal with out of resources (0xA700); unroutable studies removed after their time; a flood of idle connections
holds no slot longer than the ACSE timeout."""

from __future__ import annotations

import socket
import time

import numpy as np
import pydicom
import pytest
from gateway_helpers import associate, copy_study, send_files, start_gateway, states, wait_for
from pydicom.uid import DeflatedExplicitVRLittleEndian, generate_uid

from medchallenge.dicom.sr import read_failure_note

OUT_OF_RESOURCES = 0xA700


def deflated_bomb(source, path, side: int = 2000):
    """A radiograph whose pixel data (side x side zeros, 8 MB) deflates to a few kilobytes."""
    ds = pydicom.dcmread(source)
    ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID = generate_uid()
    ds.Rows = ds.Columns = side
    ds.PixelData = np.zeros((side, side), np.uint16).tobytes()
    ds.file_meta.TransferSyntaxUID = DeflatedExplicitVRLittleEndian
    ds.save_as(path, enforce_file_format=True)
    return path


def test_size_limits_per_instance_study_and_work_folder(tmp_path, pacs, studies):
    # a CT slice is 72 kB: instances up to 100 kB, 6 slices a study, 9 slices in the whole work folder
    limits = "max_instance_mib = 0.1\nmax_study_mib = 0.42\nwork_quota_mib = 0.65\n"
    gateway, port, _ = start_gateway(tmp_path, pacs.port, ["false"], quiet=1.0, gateway_extra=limits)
    work = tmp_path / "work"
    try:
        large = pydicom.dcmread(studies["cxr"][0])
        large.Rows = large.Columns = 400  # 160 kB of pixel data: over 100 kB
        large.PixelData = np.full((400, 400), 7, np.uint8).tobytes()
        large.save_as(tmp_path / "large.dcm")
        assert send_files([tmp_path / "large.dcm"], port) == [OUT_OF_RESOURCES]
        bomb = deflated_bomb(studies["cxr"][0], tmp_path / "bomb.dcm")
        assert bomb.stat().st_size < 20_000
        sender = associate(port, contexts=(str(pydicom.dcmread(bomb).SOPClassUID),),
                           transfer_syntaxes=[DeflatedExplicitVRLittleEndian])  # sent deflated, as it is
        assert sender.send_c_store(bomb).Status == OUT_OF_RESOURCES
        sender.release()
        statuses = send_files(studies["tb"][:8], port)  # over the study's limit after 6 slices
        assert statuses == [0] * 6 + [OUT_OF_RESOURCES] * 2
        wait_for(lambda: states(work)["failed"] == 1 and len(pacs.received) == 1, 60, "the study over its limit")
        assert "exceeds the size limits of the gateway" in read_failure_note(pacs.received[0])
        other = copy_study(studies["tb"][:4], tmp_path / "other", StudyInstanceUID=generate_uid())
        assert send_files(other, port) == [0] * 3 + [OUT_OF_RESOURCES]  # 6 + 3 slices: the work folder is full
        assert not list((work / "incoming").rglob(f"{pydicom.dcmread(bomb).SOPInstanceUID}*"))
    finally:
        assert gateway.stop() == 0
    log = (tmp_path / "gateway.log").read_text()
    for reason in ("instance over the size limit", "deflated instance inflating over the size limit",
                   "study over the size limit", "work folder quota reached"):
        assert reason in log


def test_an_instance_growing_past_the_limit_is_cut_off_while_it_arrives(tmp_path, pacs, studies):
    gateway, port, _ = start_gateway(tmp_path, pacs.port, ["false"], gateway_extra="max_instance_mib = 1\n")
    work = tmp_path / "work"
    big = pydicom.dcmread(studies["cxr"][0])
    big.Rows = big.Columns = 2048  # 8 MiB of pixel data
    big.PixelData = np.random.default_rng(0).integers(0, 4096, (2048, 2048), dtype=np.uint16).tobytes()
    try:
        sender = associate(port, contexts=(str(big.SOPClassUID),))
        status = sender.send_c_store(big)
        assert not status or status.Status != 0  # no success: aborted by the gateway
        wait_for(lambda: not sender.is_established, 30, "the association aborted")
        wait_for(lambda: "an instance over 1048576 bytes; aborted" in (tmp_path / "gateway.log").read_text(), 30,
                 "the abort in the log")
        assert not any((work / "incoming").iterdir())
        received = sum(p.stat().st_size for p in (work / "tmp").iterdir())
        assert received < 3 << 20  # what was written before the abort: about the limit, not the 8 MiB
    finally:
        assert gateway.stop() == 0


def test_unroutable_studies_are_removed_after_their_time(tmp_path, pacs, studies):
    gateway, port, _ = start_gateway(tmp_path, pacs.port, ["false"], gateway_extra="unroutable_keep_hours = 0.0005\n")
    work = tmp_path / "work"
    try:
        assert set(send_files(studies["mr"], port)) == {0}
        wait_for(lambda: states(work)["unroutable"] == 1, 30, "the unroutable study")
        wait_for(lambda: states(work)["unroutable"] == 0, 30, "the unroutable study removed")
    finally:
        assert gateway.stop() == 0
    assert "removed from unroutable/ after 0.0005 hour(s)" in (tmp_path / "gateway.log").read_text()


def test_a_flood_of_idle_connections_blocks_real_associations_for_at_most_the_acse_timeout(tmp_path, pacs, studies):
    settings = "max_associations = 4\nacse_timeout_seconds = 2\nnetwork_timeout_seconds = 5\n"
    gateway, port, _ = start_gateway(tmp_path, pacs.port, ["false"], gateway_extra=settings)
    flood = []
    try:
        for _ in range(200):  # bounded: 200 idle TCP connections on loopback, none sends a byte (from another
            # address than the sender's: the flood's own address has max_connections_per_address at most)
            flood.append(socket.create_connection(("127.0.0.1", port), timeout=5, source_address=("127.0.0.2", 0)))
        started = time.monotonic()
        while not (association := associate(port)).is_established:
            assert time.monotonic() - started < 20, "no association within 20 s of the flood"
            time.sleep(0.5)
        waited = time.monotonic() - started
        association.release()
        assert gateway.process.poll() is None
        assert set(send_files(studies["mr"], port)) == {0}
    finally:
        for connection in flood:
            connection.close()
        assert gateway.stop() == 0
    print(f"flood of {len(flood)} idle connections: a real association after {waited:.1f} s")


def test_a_pdu_claiming_gigabytes_is_cut_off_before_it_is_read(tmp_path, pacs, studies):
    gateway, port, _ = start_gateway(tmp_path, pacs.port, ["false"])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
            connection.sendall(b"\x01\x00" + (3_000_000_000).to_bytes(4, "big"))  # an A-ASSOCIATE-RQ of 3 GB
            sent = 0
            with pytest.raises(OSError):  # closed by the gateway long before 64 MiB
                while sent < 64 << 20:
                    connection.sendall(b"\x00" * (1 << 20))
                    sent += 1 << 20
        assert sent < 16 << 20
        wait_for(lambda: "a PDU of 3000000000 bytes; closed" in (tmp_path / "gateway.log").read_text(), 30, "the log")
        assert set(send_files(studies["mr"], port)) == {0}
    finally:
        assert gateway.stop() == 0
