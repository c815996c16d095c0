"""One bad study never stops the gateway, and no result is wrong or lost (issue 22, parts 2 and 3), against a gateway on
loopback: an instance without SeriesInstanceUID, a detector writing a broken result, a full disk, a reception cut
off by a kill or an A-ABORT, a study sent again with more slices, two studies sharing a series UID, a kill while the
images of a sent study were being removed."""

from __future__ import annotations

import errno
import json
import logging
import shutil
import sys
import tempfile
import threading
import time

import pydicom
from gateway_helpers import (INFERENCE, GatewayProcess, associate, audit_lines, config_text, copy_study,
                             free_port, send_files, start_gateway, states, wait_for)
from pydicom.uid import generate_uid

from medchallenge.dicom.sr import read_failure_note
from medchallenge.gateway import Gateway, load_config

TB = [sys.executable, str(INFERENCE), "--device", "cpu"]
BROKEN_RESULT_DETECTOR = """
import os, pathlib
(pathlib.Path(os.environ["OUTPUT_DIR"]) / "tb-cavern-boxes.json").write_text('{"boxes": [')
"""


def test_a_study_breaking_routing_or_sending_fails_alone_and_the_gateway_goes_on(tmp_path, pacs, studies):
    detector = tmp_path / "detector.py"
    detector.write_text(BROKEN_RESULT_DETECTOR)
    gateway, port, config = start_gateway(tmp_path, pacs.port, [sys.executable, str(detector)])
    work = tmp_path / "work"
    (no_series,) = copy_study(studies["tb"][:1], tmp_path / "no-series", StudyInstanceUID=generate_uid())
    ds = pydicom.dcmread(no_series)
    del ds.SeriesInstanceUID
    ds.save_as(no_series)
    try:
        assert send_files([no_series], port) == [0]
        wait_for(lambda: states(work)["failed"] == 1, 60, "the study without series UID failed")
        assert send_files(studies["mr"], port) == [0] * len(studies["mr"])  # still serving
        wait_for(lambda: states(work)["unroutable"] == 1, 60, "the next study")
        assert set(send_files(studies["tb"], port)) == {0}  # its algorithm writes a broken output socket
        wait_for(lambda: states(work)["failed"] == 2 and len(pacs.received) == 1, 60, "the broken result's study")
    finally:
        assert gateway.stop() == 0
    restarted = GatewayProcess(config, tmp_path / "gateway.log")  # no crash loop at the next start either
    restarted.wait_ready()
    assert restarted.stop() == 0
    assert "the gateway's log" in read_failure_note(pacs.received[0])
    assert "the detector could not process the images of this study" in read_failure_note(pacs.received[0])
    errors = sorted(p.read_text() for p in (work / "failed").glob("*/error.txt"))
    assert any("without StudyInstanceUID or SeriesInstanceUID" in e for e in errors)
    assert any("The output file 'tb-cavern-boxes.json' is not valid json" in e for e in errors)
    log = (tmp_path / "gateway.log").read_text()
    assert log.count("moved to failed") == 2 and log.count("gateway stopped") == 2
    assert "no readable instance of the study" in log  # no note where no header can be read


def test_a_full_disk_keeps_the_study_queued_and_refuses_instances_until_space_returns(tmp_path, pacs, studies,
                                                                                     monkeypatch, caplog):
    """The gateway in this process (its disk made full by a failing job.json write), on loopback."""
    import medchallenge.gateway.worker as worker

    port = free_port()
    (tmp_path / "gateway.toml").write_text(config_text(tmp_path / "work", port, pacs.port, TB, quiet=0.5,
                                                       gateway_extra="disk_full_retry_seconds = 1"))
    full = threading.Event()
    full.set()
    real_write = worker.write_json_atomic

    def write_json(path, data):
        if full.is_set():
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(path, data)

    monkeypatch.setattr(worker, "write_json_atomic", write_json)
    monkeypatch.setattr(tempfile, "tempdir", tempfile.tempdir)  # the server points it into its work folder
    caplog.set_level(logging.INFO, logger="medchallenge.gateway")
    gateway = Gateway(load_config(tmp_path / "gateway.toml"))
    serving = threading.Thread(target=gateway.serve)
    serving.start()
    work = tmp_path / "work"
    try:
        wait_for(lambda: "listening on" in caplog.text, 60, "the gateway to listen")
        assert set(send_files(studies["tb"], port)) == {0}
        wait_for(lambda: "disk full" in caplog.text, 30, "the disk full")
        assert send_files(studies["mr"][:1], port) == [0xA700]  # out of resources while the disk is full
        time.sleep(2.5)  # retried (every second) and still full: queued, not failed
        assert states(work)["received"] == 1 and states(work)["failed"] == 0 and serving.is_alive()
        full.clear()
        wait_for(lambda: states(work)["sent"] == 1 and len(pacs.received) == 1, 120, "the study sent after all")
        wait_for(lambda: "disk space back: receiving again" in caplog.text, 30, "receiving again")
        assert send_files(studies["mr"][:1], port) == [0]
    finally:
        gateway.stopping.set()
        serving.join(60)
    assert caplog.text.count("disk full") >= 2 and "stays queued" in caplog.text


def test_interrupted_receptions_are_not_processed_as_complete(tmp_path, pacs, studies):
    gateway, port, config = start_gateway(tmp_path, pacs.port, TB, quiet=1.0)
    work = tmp_path / "work"
    tb = studies["tb"]
    study_uid = pydicom.dcmread(tb[0]).StudyInstanceUID
    # an association aborted after 10 of 40 slices
    sender = associate(port, contexts=(str(pydicom.dcmread(tb[0]).SOPClassUID),))
    assert [sender.send_c_store(pydicom.dcmread(p)).Status for p in tb[:10]] == [0] * 10
    sender.abort()
    wait_for(lambda: states(work)["failed"] == 1 and len(pacs.received) == 1, 60, "the aborted study's note")
    assert read_failure_note(pacs.received[0]).startswith("The AI gateway could not process this study: the "
                                                          "transfer of this study to the gateway was interrupted")
    # the gateway killed after 16 of 40 slices, restarted, and the sender does not send again
    gateway.kill()
    shutil.rmtree(work / "failed")
    (work / "failed").mkdir()
    gateway = GatewayProcess(config, tmp_path / "gateway.log")
    gateway.wait_ready()
    assert set(send_files(tb[:16], port)) == {0}
    gateway.kill()
    gateway = GatewayProcess(config, tmp_path / "gateway.log")
    try:
        wait_for(lambda: states(work)["failed"] == 1 and len(pacs.received) == 2, 60, "the study held, its note")
        assert states(work)["sent"] == 0 and pacs.received[1].CompletionFlag == "PARTIAL"
        assert set(send_files(tb, port)) == {0}  # the whole study sent again: processed, its own result
        wait_for(lambda: states(work)["sent"] == 1 and len(pacs.received) == 3, 120, "the complete study's result")
    finally:
        assert gateway.stop() == 0
    assert all(ds.StudyInstanceUID == study_uid for ds in pacs.received)
    assert [ds.SeriesDescription.endswith(": failed") for ds in pacs.received] == [True, True, False]
    (job,) = [json.loads(p.read_text()) for p in (work / "sent").glob("*/job.json")]
    assert len(job["instances"]) == len(tb)
    assert "reception interrupted after 16 instance(s)" in (work / "failed" / study_uid / "error.txt").read_text()


def test_results_are_identified_by_study_series_and_instances_and_every_record_is_kept(tmp_path, pacs, studies):
    gateway, port, config = start_gateway(tmp_path, pacs.port, TB, quiet=1.0)
    work = tmp_path / "work"
    tb = studies["tb"]
    study_uid = str(pydicom.dcmread(tb[0]).StudyInstanceUID)
    other = copy_study(tb, tmp_path / "other", StudyInstanceUID=generate_uid(), PatientID="OTHER",
                       PatientName="Other^Patient")  # another patient's study, the same SeriesInstanceUID
    try:
        assert set(send_files(tb[:30], port)) == {0}  # a study sent in part (cleanly), then complete
        wait_for(lambda: states(work)["sent"] + states(work)["failed"] == 1, 120, "the part")
        assert set(send_files(tb, port)) == {0}
        wait_for(lambda: states(work)["sent"] + states(work)["failed"] == 2, 120, "the complete study")
        assert set(send_files(other, port)) == {0}
        wait_for(lambda: states(work)["sent"] + states(work)["failed"] == 3, 120, "the other patient's study")
        # a kill while the images of a sent study were being removed: the images left are removed at the start
        (work / "sent" / study_uid / "input").mkdir()
        shutil.copy(tb[0], work / "sent" / study_uid / "input" / tb[0].name)
        gateway.kill()
        gateway = GatewayProcess(config, tmp_path / "gateway.log")
        gateway.wait_ready()
        time.sleep(2)
    finally:
        assert gateway.stop() == 0
    other_uid = str(pydicom.dcmread(other[0]).StudyInstanceUID)
    assert sorted(p.name for p in (work / "sent").iterdir()) == sorted([study_uid, f"{study_uid}~1", other_uid])
    assert not (work / "sent" / study_uid / "input").exists() and states(work)["received"] == 0
    results = [ds for ds in pacs.received]
    assert len(results) == 3 and len({ds.SOPInstanceUID for ds in results}) == 3  # nothing skipped as "sent before"
    assert [ds.PatientID for ds in results][2] == "OTHER"
    runs = [r for r in audit_lines(work) if r["event"] == "study"]
    assert [r["instances"] for r in runs] == [30, 40, 40] and {r["result"] for r in runs} == {"sent"}


def test_a_complete_resend_clears_the_interrupted_mark_of_the_part_still_waiting(tmp_path):
    from medchallenge.gateway.queue import INTERRUPTED, WorkQueue

    queue = WorkQueue(tmp_path / "work")
    waiting = queue.folder("received", "1.2.3")
    (waiting / "input").mkdir(parents=True)
    (waiting / INTERRUPTED).touch()  # the part received before the gateway stopped, not processed yet
    for state in ("incoming", "running"):
        (queue.folder(state, "1.2.3") / "input").mkdir(parents=True)
        (queue.folder(state, "1.2.3") / "input" / f"{state}.dcm").write_bytes(b"an instance")
    queue.move(queue.folder("running", "1.2.3"), "received")  # an older run put back: the newer part decides
    assert (waiting / INTERRUPTED).exists()
    queue.move(queue.folder("incoming", "1.2.3"), "received")  # the sender sent the study again, completely
    assert not (waiting / INTERRUPTED).exists()
    assert sorted(p.name for p in (waiting / "input").iterdir()) == ["incoming.dcm", "running.dcm"]
