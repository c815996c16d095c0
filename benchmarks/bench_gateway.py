"""Benchmark: the hospital gateway per CT study (512x512x300 by default), its own overhead next to the model's time.

`run()` writes a synthetic chest CT as a DICOM study, starts `medchallenge gateway` (TB caverns route, the detector
run as a command on the CPU) and a receiving PACS stand-in (pynetdicom), sends the study with C-STORE and waits for
the SR. Reported: receive (C-STORE of every slice, as the sender sees it), the quiet period that marks a study
complete (configured, pure waiting), the detector (process start, model load, DICOM read, inference, SR written),
send (C-STORE of the SR), the rest of the gateway's own work (routing, queue moves), the end-to-end time, and studies
per hour when studies follow each other (the detector and the gateway's work; receiving overlaps with the previous
study). Within the detector, the DICOM series read (decode + rescale, in-process) is measured on its own.
Shape: $GATEWAY_BENCH_SHAPE ("512 512 300").
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INFERENCE = ROOT / "algorithms" / "tb_caverns" / "inference.py"
QUIET_SECONDS = 2.0
SEED = 4343


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _pacs(port: int, received: list):
    from pynetdicom import AE, ALL_TRANSFER_SYNTAXES, AllStoragePresentationContexts, evt

    ae = AE(ae_title="BENCHPACS")
    for context in AllStoragePresentationContexts:
        ae.add_supported_context(context.abstract_syntax, ALL_TRANSFER_SYNTAXES)

    def store(event):
        received.append((time.perf_counter(), str(event.dataset.Modality)))
        return 0x0000

    return ae.start_server(("127.0.0.1", port), block=False, evt_handlers=[(evt.EVT_C_STORE, store)])


def _send(files: list[Path], port: int) -> float:
    import pydicom
    from pynetdicom import AE

    datasets = [pydicom.dcmread(f) for f in files]
    ae = AE(ae_title="BENCHSENDER")
    ae.add_requested_context(str(datasets[0].SOPClassUID))
    deadline = time.monotonic() + 300
    while not (association := ae.associate("127.0.0.1", port, ae_title="GATEWAY")).is_established:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the gateway did not accept an association on port {port}")
        time.sleep(0.5)
    started = time.perf_counter()
    for ds in datasets:
        association.send_c_store(ds)
    association.release()
    return started


def run() -> dict:
    from medchallenge.dicom.series import find_series, read_volume, select_study_series
    from medchallenge.dicom.synthetic import SyntheticStudy, write_ct_series
    from medchallenge.synth.tb_caverns import case_rng, generate_case

    shape = tuple(int(v) for v in os.environ.get("GATEWAY_BENCH_SHAPE", "512 512 300").split())
    with tempfile.TemporaryDirectory(prefix="bench_gateway_") as tmp:
        tmp = Path(tmp)
        case = generate_case(case_rng(SEED, 0), shape, n_caverns=2)
        files = write_ct_series(tmp / "study", case.ct, case.affine, SyntheticStudy("bench-gateway", "BENCH"))
        del case
        t0 = time.perf_counter()
        ((series, spacing),) = select_study_series(find_series(tmp / "study"), ("CT",))
        read_volume(series, spacing)
        dicom_read = time.perf_counter() - t0
        port, pacs_port = _free_port(), _free_port()
        (tmp / "gateway.toml").write_text(f"""
[gateway]
ae_title = "GATEWAY"
host = "127.0.0.1"
port = {port}
work_dir = "{tmp / 'work'}"
study_quiet_seconds = {QUIET_SECONDS}
[pacs]
ae_title = "BENCHPACS"
host = "127.0.0.1"
port = {pacs_port}
[[route]]
name = "tb-caverns"
modalities = ["CT"]
command = {json.dumps([sys.executable, str(INFERENCE), "--device", "cpu"])}
""")
        received: list = []
        server = _pacs(pacs_port, received)
        env = {**os.environ, "PYTHONPATH": str(ROOT / "shared")}
        gateway = subprocess.Popen([sys.executable, "-m", "medchallenge.gateway", "--config", str(tmp / "gateway.toml")],
                                   env=env, stdout=open(tmp / "gateway.log", "w"), stderr=subprocess.STDOUT)
        try:
            started = _send(files, port)
            receive = time.perf_counter() - started
            deadline = time.monotonic() + 3600
            while not received and time.monotonic() < deadline and gateway.poll() is None:
                time.sleep(0.1)
            if not received:
                raise RuntimeError(f"no result from the gateway: {(tmp / 'gateway.log').read_text()[-2000:]}")
            end_to_end = received[0][0] - started
        finally:
            gateway.terminate()
            gateway.wait(timeout=60)
            server.shutdown()
        (job,) = [json.loads(p.read_text()) for p in (tmp / "work" / "sent").glob("*/job.json")]
    detector, send = job["detector_seconds"], job["send_seconds"]
    rest = end_to_end - receive - QUIET_SECONDS - detector - send
    return {
        "gateway_study_shape": list(shape),
        "gateway_receive_seconds": round(receive, 2),
        "gateway_quiet_period_seconds": QUIET_SECONDS,
        "gateway_detector_seconds": round(detector, 2),
        "gateway_detector_dicom_read_seconds": round(dicom_read, 2),
        "gateway_send_seconds": round(send, 3),
        "gateway_routing_and_queue_seconds": round(rest, 2),
        "gateway_own_overhead_seconds": round(receive + send + rest, 2),
        "gateway_end_to_end_seconds": round(end_to_end, 2),
        "gateway_studies_per_hour": round(3600 / (detector + send + rest), 1),
        "gateway_results_received": len(received),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
