"""Benchmark: the gateway's peak memory under the largest instances it accepts, and under the issue-29 shapes it
refuses (issue 29, item 3).

Each shape is sent (its bytes as they are, chunked C-STORE) to a fresh `medchallenge gateway` process on loopback
configured as `bench_gateway`'s (no route takes an MR), so that an MR instance is stored, routed (its header read) and
set in unroutable/;
then the gateway's peak resident memory (VmHWM of /proc/<pid>/status, the process's own) is read. Shapes: an MR of
many tiny private elements just under the header bound (`dicom.files.MAX_HEADER_ELEMENTS`), flat and nested in an
undefined-length sequence (which pydicom parses at once); a deflated MR just under the instance limit
(`max_instance_mib`, default 1024 MiB inflated; a few hundred kB on the wire) whose stream is followed by a pad byte;
and, refused, the issue's own 4,000,000-element MR (48 MB). Reported per shape: the file's size, the C-STORE status,
the seconds until it was answered, and the gateway's peak RSS in MB next to its idle peak.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the writers of the hostile shapes (tests/gateway_fuzz.py)
sys.path.insert(0, str(Path(__file__).parent))

from bench_gateway import _config, _free_port  # noqa: E402

MR_IMAGE_STORAGE = "1.2.840.10008.5.1.4.1.1.4"
INSTANCE_LIMIT_MIB = 1024  # the gateway's default max_instance_mib


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"no VmHWM for process {pid}")


def _store(path: Path, port: int) -> int | None:
    """One chunked C-STORE of the file's bytes as they are; its status (None: no answer)."""
    import pydicom
    from pynetdicom import AE, _config

    _config.STORE_SEND_CHUNKED_DATASET = True
    ae = AE(ae_title="BENCHSENDER")
    ae.acse_timeout = ae.dimse_timeout = ae.network_timeout = 600
    ae.add_requested_context(MR_IMAGE_STORAGE, [str(pydicom.filereader.read_file_meta_info(path).TransferSyntaxUID)])
    association = ae.associate("127.0.0.1", port, ae_title="GATEWAY")
    if not association.is_established:
        raise RuntimeError(f"the gateway did not accept an association on port {port}")
    status = association.send_c_store(path)
    if association.is_established:
        association.release()
    return getattr(status, "Status", None)


def _measure(shape: Path, tmp: Path) -> dict:
    """The shape sent to a fresh gateway: status, answer time, idle and final peak RSS (after routing, when
    accepted)."""
    port = _free_port()
    work = tmp / "work"
    (tmp / "gateway.toml").write_text(_config(tmp, port, _free_port()))  # no route takes an MR
    env = {**os.environ, "PYTHONPATH": str(ROOT / "shared")}
    log = tmp / "gateway.log"
    gateway = subprocess.Popen([sys.executable, "-m", "medchallenge.gateway", "--config", str(tmp / "gateway.toml")],
                               env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while "listening on" not in log.read_text():
            if time.monotonic() > deadline or gateway.poll() is not None:
                raise RuntimeError(f"the gateway did not start: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        idle = _peak_rss_mb(gateway.pid)
        started = time.perf_counter()
        status = _store(shape, port)
        answered = time.perf_counter() - started
        if status == 0:  # stored: wait until routing read its header (MR: no route, unroutable/)
            deadline = time.monotonic() + 600
            while not any((work / "unroutable").iterdir()) and time.monotonic() < deadline:
                time.sleep(0.2)
            if not any((work / "unroutable").iterdir()):
                raise RuntimeError(f"{shape.name} was not routed: {log.read_text()[-2000:]}")
        return {"file_mb": round(shape.stat().st_size / 1e6, 2), "status": hex(status) if status is not None else None,
                "answered_seconds": round(answered, 2), "idle_peak_rss_mb": idle,
                "peak_rss_mb": _peak_rss_mb(gateway.pid)}
    finally:
        gateway.terminate()
        gateway.wait(timeout=60)


def _shapes(tmp: Path) -> dict[str, Path]:
    """The instances: many tiny elements under the bound (flat, nested), the deflated one under the instance limit,
    the issue's 4,000,000-element MR."""
    import numpy as np
    from gateway_fuzz import add_tiny_elements, insert_tiny_elements, write_deflated_zeros
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    from medchallenge.dicom.files import MAX_HEADER_ELEMENTS
    from medchallenge.dicom.synthetic import SyntheticStudy, radiograph_dataset

    def mr(**changes):
        ds = radiograph_dataset(np.zeros((64, 64), np.uint16), SyntheticStudy(generate_uid(), "BENCH_MEMORY"))
        ds.Modality, ds.BodyPartExamined = "MR", "BRAIN"
        ds.SOPClassUID = ds.file_meta.MediaStorageSOPClassUID = MR_IMAGE_STORAGE
        ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
        for keyword, value in changes.items():
            setattr(ds, keyword, value)
        return ds

    shapes = {}
    under = MAX_HEADER_ELEMENTS - 1000
    for name, count in ((f"tiny_elements_{under}", under), ("tiny_elements_4000000_refused", 4_000_000)):
        shapes[name] = tmp / f"{name}.dcm"
        mr().save_as(shapes[name], enforce_file_format=True)
        insert_tiny_elements(shapes[name], count)
    nested = mr()
    add_tiny_elements(nested, under, nested=True)
    shapes[f"tiny_elements_{under}_nested"] = tmp / "nested.dcm"
    nested.save_as(shapes[f"tiny_elements_{under}_nested"], enforce_file_format=True)
    frames = INSTANCE_LIMIT_MIB // 8 - 1  # of 2048 x 2048 16-bit pixels, 8 MiB each
    shapes[f"deflated_{frames * 8}_mib_inflated"] = write_deflated_zeros(
        tmp / "deflated.dcm", mr(Rows=2048, Columns=2048, NumberOfFrames=frames), frames << 23)
    return shapes


def run() -> dict:
    result: dict = {"gateway_memory_instance_limit_mib": INSTANCE_LIMIT_MIB}
    with tempfile.TemporaryDirectory(prefix="bench_gateway_memory_") as tmp:
        tmp = Path(tmp)
        (tmp / "shapes").mkdir()
        for name, shape in _shapes(tmp / "shapes").items():
            run_dir = tmp / name
            run_dir.mkdir()
            for key, value in _measure(shape, run_dir).items():
                result[f"gateway_memory_{name}_{key}"] = value
    result["gateway_memory_load_average_1min"] = round(os.getloadavg()[0], 2)
    return result


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
