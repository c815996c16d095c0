"""Benchmark: the hospital gateway per study (CTs of 512x512x300 by default), its own overhead next to the model's time.

`run()` writes three synthetic DICOM studies (a TB chest CT, a rib CT with BodyPartExamined RIB, a CR chest
radiograph of 2,048 px), starts `medchallenge gateway` (routes to RibFrac, object-CXR and TB caverns, each algorithm
run as a grand-challenge job by a `command` on the CPU) and a receiving PACS stand-in (pynetdicom), sends each study
with C-STORE and waits for its result (SR, SEG, SR) before the next. Reported per detector (`gateway_*` TB caverns,
`gateway_ribfrac_*`, `gateway_object_cxr_*`): receive (C-STORE of every slice, as the sender sees it), the quiet
period that marks a study complete (configured, pure waiting), the detector (panimg conversion of the series, process
start, model load, inference, the output sockets written as DICOM),
send (C-STORE of the SR), the rest of the gateway's own work (routing, queue moves), the end-to-end time, and studies
per hour when studies follow each other (the detector and the gateway's work; receiving overlaps with the previous
study). Within the detector, the DICOM series read (decode + rescale, in-process) is measured on its own.
Shape: $GATEWAY_BENCH_SHAPE ("512 512 300"), radiograph: $GATEWAY_BENCH_RADIOGRAPH (2048). The 1-minute load
average at the end is reported too: on a shared machine the times depend on it.
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
        received.append((time.perf_counter(), str(event.dataset.Modality), str(event.dataset.StudyInstanceUID)))
        return 0x0000

    return ae.start_server(("127.0.0.1", port), block=False, evt_handlers=[(evt.EVT_C_STORE, store)])


def _send(files: list[Path], port: int) -> float:
    import pydicom
    from pynetdicom import AE

    datasets = [pydicom.dcmread(f) for f in files]
    ae = AE(ae_title="BENCHSENDER")
    ae.acse_timeout = ae.dimse_timeout = ae.network_timeout = 600  # a loaded shared machine answers slowly
    ae.add_requested_context(str(datasets[0].SOPClassUID))
    deadline = time.monotonic() + 300
    while not (association := ae.associate("127.0.0.1", port, ae_title="GATEWAY")).is_established:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the gateway did not accept an association on port {port}")
        time.sleep(0.5)
    started = time.perf_counter()
    for ds in datasets:
        status = association.send_c_store(ds) if association.is_established else None
        if getattr(status, "Status", None) != 0x0000:
            raise RuntimeError(f"C-STORE of {ds.SOPInstanceUID} to the gateway failed ({status})")
    association.release()
    return started


def _config(tmp: Path, port: int, pacs_port: int) -> str:
    """One gateway, three routes: RibFrac (CT, body part RIB), object-CXR (CR), TB caverns (other CTs)."""
    def route(name: str, modalities: list[str], body_parts: list[str]) -> str:
        inference = ROOT / "algorithms" / name.replace("-", "_") / "inference.py"
        return f"""
[[route]]
name = "{name}"
modalities = {json.dumps(modalities)}
body_parts = {json.dumps(body_parts)}
interface = "{name}"
command = {json.dumps([sys.executable, str(inference), "--device", "cpu"])}
"""
    routes = route("ribfrac", ["CT"], ["RIB"]) + route("object-cxr", ["CR"], []) + route("tb-caverns", ["CT"], [])
    return gateway_sections(tmp, port, pacs_port) + routes


def gateway_sections(tmp: Path, port: int, pacs_port: int) -> str:
    """The configuration's gateway, caller and PACS: a gateway on loopback, work in `tmp`, the bench's sender and
    PACS stand-in."""
    return f"""
[gateway]
ae_title = "GATEWAY"
host = "127.0.0.1"
port = {port}
work_dir = "{tmp / 'work'}"
study_quiet_seconds = {QUIET_SECONDS}
[[caller]]
ae_title = "BENCHSENDER"
addresses = ["127.0.0.1"]
[pacs]
ae_title = "BENCHPACS"
host = "127.0.0.1"
port = {pacs_port}
"""


def _studies(tmp: Path, shape: tuple[int, int, int], radiograph_size: int) -> dict[str, list[Path]]:
    """The benchmark's studies: a TB chest CT and a rib CT of `shape`, a CR chest radiograph."""
    from medchallenge.dicom.synthetic import SyntheticStudy, radiograph_dataset, ras_affine, write_ct_series
    from medchallenge.io import write_dicom_atomic
    from medchallenge.synth import ribfrac_ct, tb_caverns
    from medchallenge.synth.object_cxr_images import generate_image

    case = tb_caverns.generate_case(tb_caverns.case_rng(SEED, 0), shape, n_caverns=2)
    tb = write_ct_series(tmp / "tb", case.ct, case.affine, SyntheticStudy("bench-gateway", "BENCH"))
    del case
    rib = ribfrac_ct.generate_case(ribfrac_ct.case_rng(SEED, 0), shape, spacing=(0.75, 0.75, 1.25))
    ribs = write_ct_series(tmp / "ribfrac", rib.ct.T, ras_affine(rib.spacing, rib.origin),
                           SyntheticStudy("bench-gateway-ribfrac", "BENCH_RIB", body_part="RIB"))
    del rib
    radiograph = generate_image(SEED, 0, radiograph_size, positive_fraction=1.0)
    cxr = write_dicom_atomic(tmp / "cxr" / "cxr.dcm", radiograph_dataset(
        radiograph.pixels, SyntheticStudy("bench-gateway-cxr", "BENCH_CXR", study_description="XR CHEST")))
    return {"tb-caverns": tb, "ribfrac": ribs, "object-cxr": [cxr]}


def _timings(name: str, job: dict, receive: float, end_to_end: float) -> dict:
    """The gateway's own overhead next to the detector's time, for one study (keys prefixed by `name`)."""
    detector, send = job["detector_seconds"], job["send_seconds"]
    rest = end_to_end - receive - QUIET_SECONDS - detector - send
    return {
        f"{name}_receive_seconds": round(receive, 2),
        f"{name}_detector_seconds": round(detector, 2),
        f"{name}_send_seconds": round(send, 3),
        f"{name}_routing_and_queue_seconds": round(rest, 2),
        f"{name}_own_overhead_seconds": round(receive + send + rest, 2),
        f"{name}_end_to_end_seconds": round(end_to_end, 2),
        f"{name}_studies_per_hour": round(3600 / (detector + send + rest), 1),
    }


def run() -> dict:
    import pydicom

    from medchallenge.dicom.series import find_series, read_volume, select_study_series

    shape = tuple(int(v) for v in os.environ.get("GATEWAY_BENCH_SHAPE", "512 512 300").split())
    radiograph_size = int(os.environ.get("GATEWAY_BENCH_RADIOGRAPH", "2048"))
    keys = {"tb-caverns": "gateway", "ribfrac": "gateway_ribfrac", "object-cxr": "gateway_object_cxr"}
    result: dict = {"gateway_study_shape": list(shape), "gateway_quiet_period_seconds": QUIET_SECONDS,
                    "gateway_radiograph_longer_side": radiograph_size}
    with tempfile.TemporaryDirectory(prefix="bench_gateway_") as tmp:
        tmp = Path(tmp)
        studies = _studies(tmp, shape, radiograph_size)
        t0 = time.perf_counter()
        ((series, spacing),) = select_study_series(find_series(tmp / "tb"), ("CT",))
        read_volume(series, spacing)
        result["gateway_detector_dicom_read_seconds"] = round(time.perf_counter() - t0, 2)
        port, pacs_port = _free_port(), _free_port()
        (tmp / "gateway.toml").write_text(_config(tmp, port, pacs_port))
        received: list = []
        server = _pacs(pacs_port, received)
        env = {**os.environ, "PYTHONPATH": str(ROOT / "shared")}
        command = [sys.executable, "-m", "medchallenge.gateway", "--config", str(tmp / "gateway.toml")]
        gateway = subprocess.Popen(command, env=env, stdout=open(tmp / "gateway.log", "w"), stderr=subprocess.STDOUT)
        try:
            for name, files in studies.items():  # one after the other: each study's times are its own
                before = len(received)
                started = _send(files, port)
                receive = time.perf_counter() - started
                deadline = time.monotonic() + 3600
                while len(received) == before and time.monotonic() < deadline and gateway.poll() is None:
                    time.sleep(0.1)
                if len(received) == before:
                    raise RuntimeError(f"no result from the gateway: {(tmp / 'gateway.log').read_text()[-2000:]}")
                study_uid = str(pydicom.dcmread(files[0], stop_before_pixels=True).StudyInstanceUID)
                job_file = tmp / "work" / "sent" / study_uid / "job.json"
                while not job_file.exists() and time.monotonic() < deadline:
                    time.sleep(0.1)
                result.update(_timings(keys[name], json.loads(job_file.read_text()), receive,
                                       received[before][0] - started))
                result[f"{keys[name]}_result_modality"] = received[before][1]
        finally:
            gateway.terminate()
            gateway.wait(timeout=60)
            server.shutdown()
    result["gateway_results_received"] = len(received)
    result["gateway_load_average_1min"] = round(os.getloadavg()[0], 2)
    return result


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
