"""Who may talk to the gateway, and what reaches the PACS (issue 22, part 1), against a gateway on loopback: callers
not on the allow-list, from another address or to another called AE title are rejected and logged; failure notes
carry fixed words and the study's UID, never text from the images; the audit log has a line per association and
per study; a configuration without [[caller]] is refused by --check."""

from __future__ import annotations

import sys

import pydicom
from gateway_helpers import (associate, audit_lines, config_text, send_files, start_gateway, states,
                             wait_for)

from medchallenge.dicom.sr import read_failure_note
from medchallenge.gateway import main

FAILING_DETECTOR = """
import sys
sys.exit("error: /opt/secret/path/model.onnx: KeyError('PatientName=<script>') in series 1.2.3")
"""


def test_only_allowed_callers_store_and_notes_carry_fixed_words(tmp_path, pacs, studies):
    detector = tmp_path / "detector.py"
    detector.write_text(FAILING_DETECTOR)
    gateway, port, _ = start_gateway(tmp_path, pacs.port, [sys.executable, str(detector)])
    work = tmp_path / "work"
    try:
        stranger = associate(port, calling="STRANGER")
        wrong_called = associate(port, called="SOMEONE_ELSE")
        wrong_address = associate(port, source="127.0.0.2")  # SENDER is allowed from 127.0.0.1 only
        assert not (stranger.is_established or wrong_called.is_established or wrong_address.is_established)
        assert stranger.is_rejected and wrong_called.is_rejected and wrong_address.is_rejected
        allowed = associate(port)
        assert allowed.is_established
        allowed.release()
        # an allowed sender's study whose detector fails with a message full of internals
        assert set(send_files(studies["tb"], port)) == {0}
        wait_for(lambda: states(work)["failed"] == 1 and len(pacs.received) == 1, 120, "the failure note")
    finally:
        assert gateway.stop() == 0
    study_uid = pydicom.dcmread(studies["tb"][0]).StudyInstanceUID
    text = read_failure_note(pacs.received[0])
    assert text == ("AI detector tb-caverns could not process this study: the detector could not process the "
                    f"images of this study. Study {study_uid}; the details are in the gateway's log.")
    log = (tmp_path / "gateway.log").read_text()
    assert "rejected an association from 'STRANGER' at 127.0.0.1" in log and "calling AE title not allowed" in log
    assert "to 'SOMEONE_ELSE'" in log and "called AE title is not the gateway's" in log
    assert "from 'SENDER' at 127.0.0.2" in log
    assert "/opt/secret/path/model.onnx" in log  # the details stay in the log and the job's record
    assert "/opt/secret/path/model.onnx" in (work / "failed" / study_uid / "job" / "result.json").read_text()
    records = audit_lines(work)
    rejected = [r for r in records if r["event"] == "association" and r["result"] == "rejected"]
    assert {(r["calling_ae"], r["called_ae"], r["address"]) for r in rejected} == {
        ("STRANGER", "GATEWAY", "127.0.0.1"), ("SENDER", "SOMEONE_ELSE", "127.0.0.1"),
        ("SENDER", "GATEWAY", "127.0.0.2")}
    released = [r for r in records if r["event"] == "association" and r["result"] == "released"]
    assert {"calling_ae": "SENDER", "address": "127.0.0.1", "stored": {study_uid: len(studies["tb"])}}.items() \
        <= next(r for r in released if r["stored"]).items()
    (study,) = [r for r in records if r["event"] == "study"]
    assert study["study"] == study_uid and study["result"] == "failed" and study["failure"] == "DETECTOR"
    assert study["instances"] == len(studies["tb"]) and study["route"] == "tb-caverns" and study["time"]
    assert study["senders"] == ["SENDER 127.0.0.1"]


def test_check_refuses_a_configuration_without_callers(tmp_path, capsys):
    path = tmp_path / "gateway.toml"
    text = config_text(tmp_path / "work", 11112, 4242, ["true"])
    path.write_text(text.split("[[caller]]")[0] + "[pacs]" + text.split("[pacs]")[1])
    assert main(["--config", str(path), "--check"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no [[caller]]" in err
    path.write_text(text.replace('addresses = ["127.0.0.1"]', 'addresses = ["pacs.example"]', 1))
    assert main(["--config", str(path), "--check"]) == 1
    assert "addresses: 'pacs.example' is not an IP address or network" in capsys.readouterr().err
