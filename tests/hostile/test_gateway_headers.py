"""Deflated instances and heavy headers against a gateway on loopback (issue 29, items 1 and 3): a deflated instance
whose stream is followed by a pad byte (as pydicom writes every odd-length stream) is answered, stored and routed, and
a large one frees its association's slot; an instance of more tiny elements than the header bounds is refused before
anything holds them; a study whose handling got the gateway killed is set aside after the restart instead of being
handled again (a real process killed with SIGKILL while it routes the study)."""

from __future__ import annotations

import time
import zlib

import numpy as np
import pydicom
from gateway_fuzz import add_tiny_elements, write_deflated_zeros
from gateway_helpers import MR_IMAGE_STORAGE, GatewayProcess, send_files, start_gateway, states, wait_for
from pydicom.uid import DeflatedExplicitVRLittleEndian, ExplicitVRLittleEndian, ImplicitVRLittleEndian, generate_uid

from medchallenge.dicom.deflated import dataset_offset
from medchallenge.dicom.files import MAX_HEADER_ELEMENTS, read_pixels
from medchallenge.dicom.sr import read_failure_note

OUT_OF_RESOURCES = 0xA700
SYNTAXES = [ExplicitVRLittleEndian, DeflatedExplicitVRLittleEndian, ImplicitVRLittleEndian]


def mr_instance(source, **changes):
    """An MR instance of the MR study (new SOP Instance UID), with `changes` set."""
    ds = pydicom.dcmread(source)
    ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID = generate_uid()
    for keyword, value in changes.items():
        setattr(ds, keyword, value)
    return ds


def padded_deflated(source, path):
    """An honest deflated MR written by pydicom (2 MiB of pixels inflated), whose deflate stream is odd, so that
    pydicom pads it with one byte."""
    for seed in range(50):
        pixels = np.random.default_rng(seed).integers(0, 16, (1024, 1024), dtype=np.uint16)
        ds = mr_instance(source, Rows=1024, Columns=1024, PixelData=pixels.tobytes())
        ds.file_meta.TransferSyntaxUID = DeflatedExplicitVRLittleEndian
        ds.save_as(path, enforce_file_format=True)
        inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        inflater.decompress(path.read_bytes()[dataset_offset(path)[1]:])
        if inflater.unused_data == b"\0":
            return path, pixels
    raise AssertionError("no odd deflate stream in 50 tries")


def store(port: int, *paths) -> list[int | None]:
    """C-STOREs of the files' bytes as they are (chunked, each in its own transfer syntax) in one association; their
    statuses (None: no answer within the DIMSE timeout)."""
    from pynetdicom import AE, _config

    ae = AE(ae_title="SENDER")
    ae.acse_timeout = ae.dimse_timeout = ae.network_timeout = 60
    for syntax in SYNTAXES:
        ae.add_requested_context(MR_IMAGE_STORAGE, [syntax])
    chunked, _config.STORE_SEND_CHUNKED_DATASET = _config.STORE_SEND_CHUNKED_DATASET, True
    try:
        sender = ae.associate("127.0.0.1", port, ae_title="GATEWAY")
        assert sender.is_established
        statuses = [getattr(sender.send_c_store(path), "Status", None) for path in paths]
        if sender.is_established:
            sender.release()
    finally:
        _config.STORE_SEND_CHUNKED_DATASET = chunked
    return statuses


def test_deflated_instances_with_data_after_their_stream_are_answered_stored_and_routed(tmp_path, pacs, studies):
    gateway, port, _ = start_gateway(tmp_path, pacs.port, ["false"], gateway_extra="max_associations = 1\n")
    work = tmp_path / "work"
    try:
        honest, pixels = padded_deflated(studies["mr"][0], tmp_path / "honest.dcm")
        assert store(port, honest) == [0]  # on main: no answer, the association's thread spins
        wait_for(lambda: states(work)["unroutable"] == 1, 60, "the honest deflated study routed")
        (routed,) = (work / "unroutable").iterdir()
        assert "MR/BRAIN (1)" in (routed / "error.txt").read_text()  # its header was read by routing
        _, stored = read_pixels(next((routed / "input").glob("*.dcm")))
        assert np.array_equal(stored, pixels)
        large = write_deflated_zeros(tmp_path / "large.dcm", mr_instance(studies["mr"][0], Rows=8192, Columns=8192,
                                                                          NumberOfFrames=2), 256 << 20)
        assert large.stat().st_size < 1 << 20
        started = time.monotonic()
        assert store(port, large) == [0]  # 256 MiB inflated, under the instance limit: stored
        assert time.monotonic() - started < 120
        assert store(port, honest) == [0]  # the single association slot was freed
        assert gateway.process.poll() is None
    finally:
        assert gateway.stop() == 0


def test_instances_of_more_tiny_elements_than_the_header_bounds_are_refused(tmp_path, pacs, studies):
    gateway, port, _ = start_gateway(tmp_path, pacs.port, ["false"])
    work = tmp_path / "work"
    try:
        count = MAX_HEADER_ELEMENTS + 1000
        flat = mr_instance(studies["mr"][0])
        add_tiny_elements(flat, count)
        nested = mr_instance(studies["mr"][0])
        add_tiny_elements(nested, count, nested=True)
        for name, ds, syntax in (("flat", flat, ExplicitVRLittleEndian), ("nested", nested, ImplicitVRLittleEndian),
                                 ("deflated", flat, DeflatedExplicitVRLittleEndian)):
            ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID = generate_uid()
            ds.file_meta.TransferSyntaxUID = syntax
            ds.save_as(tmp_path / f"{name}.dcm", enforce_file_format=True)
            assert store(port, tmp_path / f"{name}.dcm") == [OUT_OF_RESOURCES], name  # on main: stored (0)
        assert not any((work / "incoming").iterdir())
        assert send_files(studies["mr"], port) == [0] * len(studies["mr"])  # an honest study goes on
        wait_for(lambda: states(work)["unroutable"] == 1, 60, "the honest study routed")
        assert gateway.process.poll() is None
    finally:
        assert gateway.stop() == 0
    assert (tmp_path / "gateway.log").read_text().count("header over its bounds") == 3


def test_a_study_whose_handling_killed_the_gateway_is_set_aside_after_the_restart(tmp_path, pacs, studies):
    gateway, port, config = start_gateway(tmp_path, pacs.port, ["false"], quiet=5.0)  # the heavy study in one
    work = tmp_path / "work"
    heavy = mr_instance(studies["mr"][0], StudyInstanceUID=generate_uid(), SeriesInstanceUID=generate_uid())
    add_tiny_elements(heavy, MAX_HEADER_ELEMENTS - 10_000)  # under the bounds: stored, slow to route
    template = "1.2.826.0.1.3680043.8.498.1{:019d}"
    heavy.SOPInstanceUID = heavy.file_meta.MediaStorageSOPInstanceUID = template.format(0)
    heavy.save_as(tmp_path / "heavy.dcm", enforce_file_format=True)
    data = (tmp_path / "heavy.dcm").read_bytes()
    files = []
    for number in range(1, 7):  # the same instance under other SOP Instance UIDs of the same length
        files.append(tmp_path / f"heavy{number}.dcm")
        files[-1].write_bytes(data.replace(template.format(0).encode(), template.format(number).encode()))
    marker = work / "received" / str(heavy.StudyInstanceUID) / "worker-started"
    try:
        assert store(port, *files) == [0] * len(files)
        wait_for(marker.exists, 120, "the worker handling the study")  # on main: no mark, never seen
        gateway.kill()  # as the kernel's out-of-memory killer would, mid-study
        assert marker.exists()
        gateway = GatewayProcess(config, tmp_path / "gateway.log")
        gateway.wait_ready()
        wait_for(lambda: states(work)["failed"] == 1, 120, "the study set aside")
        failed = work / "failed" / str(heavy.StudyInstanceUID)
        assert "the gateway stopped (killed" in (failed / "error.txt").read_text()
        assert not (failed / "worker-started").exists()
        wait_for(lambda: pacs.received, 120, "the failure note")
        assert "the gateway stopped while handling it" in read_failure_note(pacs.received[0])
        assert send_files(studies["mr"], port) == [0] * len(studies["mr"])  # the flow goes on
        mr_study = pydicom.dcmread(studies["mr"][0], stop_before_pixels=True).StudyInstanceUID
        wait_for((work / "unroutable" / str(mr_study)).exists, 60, "the next study routed")
        assert gateway.process.poll() is None
    finally:
        if gateway.process.poll() is None:
            assert gateway.stop() == 0
