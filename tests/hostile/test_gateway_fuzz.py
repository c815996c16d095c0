"""The gateway under a seeded DICOM fuzzer (issue 22, part 7): mutated synthetic studies (tags, VRs, lengths, transfer
syntaxes, pixel data, UIDs) sent to a gateway on loopback with its real detectors, bounded in count and time. The
gateway never exits, never writes outside its work folder, and every study it accepted ends in sent/, failed/,
unroutable/ or duplicate/. The counts are printed. MEDCHALLENGE_FUZZ_SEED and MEDCHALLENGE_FUZZ_STUDIES change the
seed (default 22) and the number of studies (default 16)."""

from __future__ import annotations

import os
import sys
import time
from collections import Counter

import pydicom
from dicom_helpers import write_tiny_series
from gateway_fuzz import StudyFuzzer
from gateway_helpers import (INFERENCE, OBJECT_CXR_INFERENCE, GatewayProcess, config_text, free_port,
                             route_text, states, wait_for)

FINAL = ("sent", "failed", "unroutable", "duplicate")
SEND_SECONDS = 180  # the time bound of the sending; the queue then has as long again to drain


def send_raw(files, port: int) -> list[int | None]:
    """Each file's bytes as they are (chunked C-STORE) in one association; a status per file (None: not sent, the
    sender itself refused it, or the association ended)."""
    from pynetdicom import AE, _config

    chunked, _config.STORE_SEND_CHUNKED_DATASET = _config.STORE_SEND_CHUNKED_DATASET, True
    try:
        ae = AE(ae_title="SENDER")
        ae.acse_timeout = ae.dimse_timeout = ae.network_timeout = 30
        metas = {}
        for path in files:
            meta = pydicom.filereader.read_file_meta_info(path)
            metas[path] = meta
            ae.add_requested_context(str(meta.MediaStorageSOPClassUID), [str(meta.TransferSyntaxUID)])
        association = ae.associate("127.0.0.1", port, ae_title="GATEWAY")
        assert association.is_established
        statuses = []
        for path in files:
            if not association.is_established:
                statuses.append(None)
                continue
            try:
                status = association.send_c_store(path)
            except (ValueError, AttributeError):
                statuses.append(None)
                continue
            statuses.append(getattr(status, "Status", None))
        if association.is_established:
            association.release()
        return statuses
    finally:
        _config.STORE_SEND_CHUNKED_DATASET = chunked


def accepted_study(path) -> str:
    return str(pydicom.dcmread(path, stop_before_pixels=True, specific_tags=["StudyInstanceUID"]).StudyInstanceUID)


def test_fuzzed_studies_never_stop_the_gateway_and_all_end_in_a_final_state(tmp_path, pacs, studies, capsys):
    seed = int(os.environ.get("MEDCHALLENGE_FUZZ_SEED", "22"))
    count = int(os.environ.get("MEDCHALLENGE_FUZZ_STUDIES", "16"))
    _, _, ct = write_tiny_series(tmp_path / "base-ct", key="fuzz-ct", shape=(32, 32, 12))
    fuzzer = StudyFuzzer(seed, [ct, studies["cxr"], studies["mr"]])
    port, work = free_port(), tmp_path / "work"
    config = tmp_path / "gateway.toml"
    config.write_text(config_text(work, port, pacs.port, [sys.executable, str(INFERENCE), "--device", "cpu"],
                                  quiet=1.0, gateway_extra="max_instance_mib = 4\n")
                      + route_text("object-cxr", ["CR", "DX"], ["CHEST"],
                                   [sys.executable, str(OBJECT_CXR_INFERENCE), "--device", "cpu"]))
    outside = {name: tmp_path / name for name in ("cwd", "home", "tmpdir")}
    for folder in outside.values():
        folder.mkdir()
    gateway = GatewayProcess(config, tmp_path / "gateway.log", cwd=outside["cwd"],
                             extra_env={"HOME": str(outside["home"]), "TMPDIR": str(outside["tmpdir"])})
    gateway.wait_ready()
    statuses: Counter[str] = Counter()
    accepted: set[str] = set()
    started = time.monotonic()
    sent_studies = 0
    try:
        for number in range(count):
            if time.monotonic() - started > SEND_SECONDS:
                break
            files = fuzzer.study(tmp_path / "fuzz" / str(number))
            for path, status in zip(files, send_raw(files, port)):
                statuses["not sent" if status is None else hex(status)] += 1
                if status == 0:
                    accepted.add(accepted_study(path))
            sent_studies += 1
            assert gateway.process.poll() is None, f"the gateway exited at fuzzed study {number}"
        wait_for(lambda: not any(states(work)[s] for s in ("incoming", "received", "running")),
                 SEND_SECONDS + 120, "the queue to drain")
        assert gateway.process.poll() is None
    finally:
        assert gateway.stop() == 0
    ended = {state: {p.name.partition("~")[0] for p in (work / state).iterdir()} for state in FINAL}
    assert accepted <= set().union(*ended.values())  # every accepted study ended in a final state
    assert all(not any(folder.iterdir()) for folder in outside.values())  # nothing written outside the work folder
    log = (tmp_path / "gateway.log").read_text()
    assert sent_studies >= min(count, 8)
    with capsys.disabled():
        print(f"\nfuzz seed {seed}: {sent_studies} studies sent in {time.monotonic() - started:.0f} s; "
              f"instances {dict(statuses)}; mutations {dict(fuzzer.counts)}; studies accepted {len(accepted)}, "
              + ", ".join(f"{state} {len(ended[state])}" for state in FINAL)
              + f"; unexpected errors (tracebacks) in the log {log.count('Traceback')}")
