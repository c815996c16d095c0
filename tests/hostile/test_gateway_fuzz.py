"""The gateway under a seeded DICOM fuzzer (issue 22, part 7; issue 29): mutated synthetic studies (tags, VRs, lengths,
transfer syntaxes, pixel data, UIDs, many tiny elements, deflate streams padded, cut, concatenated, random) sent to a
gateway on loopback with its real detectors, bounded in count and time. The
gateway never exits, never writes outside its work folder, and every study it accepted ends in sent/, failed/,
unroutable/ or duplicate/. The counts are printed. MEDCHALLENGE_FUZZ_SEED and MEDCHALLENGE_FUZZ_STUDIES change the
seed (default 22) and the number of studies (default 16). The one inflater of deflated data sets is fuzzed on its own
too: random streams, intact, padded, truncated, concatenated, random or flipped, each inflated in bounded time to its
payload or refused with one InputError."""

from __future__ import annotations

import io
import os
import random
import signal
import sys
import time
import zlib
from collections import Counter

import pydicom
from dicom_helpers import write_tiny_series
from gateway_fuzz import STREAM_MUTATIONS, StudyFuzzer, mutate_stream
from gateway_helpers import (INFERENCE, MR_IMAGE_STORAGE, OBJECT_CXR_INFERENCE, GatewayProcess, config_text,
                             free_port, route_text, states, wait_for)
from pydicom.uid import DeflatedExplicitVRLittleEndian

from medchallenge.dicom.deflated import InflatedTooLarge, inflate
from medchallenge.errors import InputError

STREAM_CASE_SECONDS = 60  # far more than any case takes: a case over it is a hang

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


def deflated_part10_prefix() -> bytes:
    """The preamble and file meta information of a deflated Part-10 file (its data set follows)."""
    meta = pydicom.dataset.FileMetaDataset()
    meta.MediaStorageSOPClassUID = MR_IMAGE_STORAGE
    meta.MediaStorageSOPInstanceUID = "1.2.3.4"
    meta.TransferSyntaxUID = DeflatedExplicitVRLittleEndian
    out = io.BytesIO()
    pydicom.filewriter.write_file_meta_info(pydicom.filebase.DicomFileLike(out), meta)
    return b"\0" * 128 + b"DICM" + out.getvalue()


def timed_out(*_):
    raise AssertionError(f"an inflation ran over {STREAM_CASE_SECONDS} s")


def test_fuzzed_deflate_streams_inflate_in_bounded_time_or_are_refused(tmp_path, capsys):
    seed = int(os.environ.get("MEDCHALLENGE_FUZZ_SEED", "22"))
    rng = random.Random(seed)
    prefix, path = deflated_part10_prefix(), tmp_path / "deflated.dcm"
    outcomes: Counter[str] = Counter()
    previous = signal.signal(signal.SIGALRM, timed_out)
    try:
        for _ in range(200):
            size = rng.choice((0, 1, rng.randrange(1 << 16), rng.randrange(1 << 22)))
            payload = bytes(size) if rng.random() < 0.5 else rng.randbytes(size) * rng.randint(1, 3)
            deflater = zlib.compressobj(rng.randint(0, 9), zlib.DEFLATED, -zlib.MAX_WBITS)
            stream = deflater.compress(payload) + deflater.flush()
            kind = rng.choice(STREAM_MUTATIONS)
            path.write_bytes(prefix + mutate_stream(rng, stream, kind))
            limit = rng.choice((len(payload), len(payload) + 1, max(0, len(payload) - 1), 1 << 30))
            signal.alarm(STREAM_CASE_SECONDS)
            try:
                inflated = b"".join(inflate(path, limit))
                outcome = "inflated"
            except InflatedTooLarge:
                outcome = "over the limit"
                assert len(payload) > limit or kind in ("random", "bit_flip")
            except InputError as exc:
                outcome = "refused"
                assert str(path) in str(exc) and "\n" not in str(exc)
            finally:
                signal.alarm(0)
            if kind in ("intact", "padded", "concatenated") and limit >= len(payload):
                assert outcome == "inflated" and inflated == payload, kind  # what follows the stream's end: ignored
            if kind == "truncated":
                assert outcome != "inflated" or inflated == payload  # a cut stream never inflates to other data
            outcomes[f"{kind} {outcome}"] += 1
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert outcomes["padded inflated"] and outcomes["truncated refused"]
    with capsys.disabled():
        print(f"\ndeflate stream fuzz seed {seed}: {dict(sorted(outcomes.items()))}")
