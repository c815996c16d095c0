"""Gateway test helpers: a PACS stand-in (pynetdicom Storage SCP keeping what it receives), a C-STORE sender, free
ports, the gateway in its own process with its configuration, and the test studies."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pydicom
from dicom_helpers import write_tiny_series
from pydicom.uid import generate_uid

from medchallenge.dicom.series import find_series, select_study_series
from medchallenge.dicom.synthetic import SyntheticStudy, radiograph_dataset, write_ct_series
from medchallenge.io import write_dicom_atomic
from medchallenge.synth.object_cxr_images import generate_image
from medchallenge.synth.tb_caverns import case_rng, generate_case


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FakePacs:
    """Receives C-STOREs on loopback and keeps the datasets (by SOP Instance UID, as a PACS stores them), each with
    the file meta of the transfer syntax it came in; accepts `transfer_syntaxes` (all that pynetdicom knows)."""

    def __init__(self, ae_title: str = "FAKEPACS", host: str = "127.0.0.1", port: int | None = None,
                 ssl_context=None, transfer_syntaxes: list[str] | None = None):
        from pynetdicom import AE, ALL_TRANSFER_SYNTAXES, AllStoragePresentationContexts, evt

        self.port = port or free_port()
        self.received: list[pydicom.Dataset] = []
        ae = AE(ae_title=ae_title)
        for context in AllStoragePresentationContexts:
            ae.add_supported_context(context.abstract_syntax, transfer_syntaxes or ALL_TRANSFER_SYNTAXES)

        def store(event):
            ds = event.dataset
            ds.file_meta = event.file_meta
            self.received.append(ds)
            return 0x0000

        self.server = ae.start_server((host, self.port), block=False, evt_handlers=[(evt.EVT_C_STORE, store)],
                                      ssl_context=ssl_context)

    def stored(self) -> dict[str, pydicom.Dataset]:
        return {str(ds.SOPInstanceUID): ds for ds in self.received}

    def close(self) -> None:
        self.server.shutdown()


def send_files(files: list[Path], port: int, ae_title: str = "GATEWAY", calling: str = "SENDER") -> list[int]:
    """C-STORE every file to 127.0.0.1:port as `calling`; the status of each."""
    from pynetdicom import AE

    datasets = [pydicom.dcmread(f) for f in files]
    ae = AE(ae_title=calling)
    for sop_class in sorted({str(ds.SOPClassUID) for ds in datasets}):
        ae.add_requested_context(sop_class)
    for _ in range(100):  # the gateway may still be starting
        association = ae.associate("127.0.0.1", port, ae_title=ae_title)
        if association.is_established:
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"no association with 127.0.0.1:{port}")
    try:
        return [association.send_c_store(ds).Status for ds in datasets]
    finally:
        association.release()


def wait_for(condition, timeout: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


REPO = Path(__file__).resolve().parents[1]
INFERENCE = REPO / "algorithms" / "tb_caverns" / "inference.py"
OBJECT_CXR_INFERENCE = REPO / "algorithms" / "object_cxr" / "inference.py"
MR_IMAGE_STORAGE = "1.2.840.10008.5.1.4.1.1.4"


def route_text(name: str, modalities: list[str], body_parts: list[str], command: list[str]) -> str:
    """One more [[route]] table: the algorithm of interface `name`, run as a local process job."""
    return f"""
[[route]]
name = "{name}"
modalities = {json.dumps(modalities)}
body_parts = {json.dumps(body_parts)}
interface = "{name}"
command = {json.dumps(command)}
timeout_seconds = 300
"""


def config_text(work: Path, port: int, pacs_port: int, command: list[str], quiet: float = 1.0,
                gateway_extra: str = "", pacs_extra: str = "") -> str:
    """A gateway on loopback taking studies from SENDER (send_files) and ORTHANC, both from 127.0.0.1, with a
    tb-caverns route for chest CTs whose algorithm is `command` (a local process job)."""
    return f"""
[gateway]
ae_title = "GATEWAY"
host = "127.0.0.1"
port = {port}
work_dir = "{work}"
study_quiet_seconds = {quiet}
max_attempts = 2
{gateway_extra}
[[caller]]
ae_title = "SENDER"
addresses = ["127.0.0.1"]

[[caller]]
ae_title = "ORTHANC"
addresses = ["127.0.0.1"]

[pacs]
ae_title = "FAKEPACS"
host = "127.0.0.1"
port = {pacs_port}
{pacs_extra}""" + route_text("tb-caverns", ["CT"], ["CHEST"], command)


class GatewayProcess:
    """`python -m medchallenge.gateway` in its own process, its log in a file."""

    def __init__(self, config: Path, log: Path, cwd: Path | None = None, extra_env: dict | None = None):
        env = {**os.environ, "PYTHONPATH": str(REPO / "shared"), **(extra_env or {})}
        self.log = log
        self.starts_before = log.read_text().count("listening on") if log.exists() else 0
        self.process = subprocess.Popen([sys.executable, "-m", "medchallenge.gateway", "--config", str(config)],
                                        stdout=open(log, "a"), stderr=subprocess.STDOUT, env=env, cwd=cwd)

    def wait_ready(self) -> None:
        wait_for(lambda: self.log.read_text().count("listening on") > self.starts_before, 60, "the gateway to listen")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=60)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=60)


def states(work: Path) -> dict[str, int]:
    return {state: len(list((work / state).iterdir())) for state in
            ("incoming", "received", "running", "sent", "failed", "unroutable", "duplicate")}


def write_gateway_studies(root: Path) -> dict:
    """A chest CT with a planted cavern, an MR study, a CT series with a missing slice, and a CR chest radiograph
    with a foreign object (256 pixels), under `root`."""
    case = generate_case(case_rng(7, 0), (200, 180, 40), n_caverns=1, cavern_radius_mm=(12.0, 15.0))
    tb = write_ct_series(root / "tb", case.ct, case.affine, SyntheticStudy("gateway-tb", "GW_TB"))
    _, _, mr = write_tiny_series(root / "mr", key="gateway-mr")
    for path in mr:
        ds = pydicom.dcmread(path)
        ds.Modality, ds.BodyPartExamined = "MR", "BRAIN"
        ds.SOPClassUID = ds.file_meta.MediaStorageSOPClassUID = MR_IMAGE_STORAGE
        ds.save_as(path)
    _, _, broken = write_tiny_series(root / "broken", key="gateway-broken", shape=(40, 40, 8))
    ((ordered, _),) = select_study_series(find_series(root / "broken"), ("CT",))
    ordered.files[3].unlink()
    radiograph = generate_image(5, 0, 256, positive_fraction=1.0)
    cxr_study = SyntheticStudy("gateway-cxr", "GW_CXR")
    cxr = write_dicom_atomic(root / "cxr" / "cxr.dcm", radiograph_dataset(radiograph.pixels, cxr_study))
    return {"tb": tb, "mr": mr, "broken": [p for p in broken if p.exists()], "cxr": [cxr], "root": root}




def start_gateway(tmp_path: Path, pacs_port: int, command: list[str], quiet: float = 1.0,
                  gateway_extra: str = "", pacs_extra: str = "") -> tuple[GatewayProcess, int, Path]:
    """A gateway process on loopback (work queue tmp_path/work, log tmp_path/gateway.log), ready to receive."""
    port = free_port()
    config = tmp_path / "gateway.toml"
    config.write_text(config_text(tmp_path / "work", port, pacs_port, command, quiet, gateway_extra, pacs_extra))
    gateway = GatewayProcess(config, tmp_path / "gateway.log")
    gateway.wait_ready()
    return gateway, port, config


def associate(port: int, calling: str = "SENDER", called: str = "GATEWAY", source: str = "127.0.0.1",
              contexts: tuple[str, ...] = ("1.2.840.10008.1.1",), transfer_syntaxes: list[str] | None = None,
              tls_args=None):
    """One association attempt (no retries), from `source` on loopback; the association (maybe not established)."""
    from pynetdicom import AE, DEFAULT_TRANSFER_SYNTAXES

    ae = AE(ae_title=calling)
    ae.acse_timeout = ae.network_timeout = 10
    for context in contexts:
        ae.add_requested_context(context, transfer_syntaxes or DEFAULT_TRANSFER_SYNTAXES)
    return ae.associate("127.0.0.1", port, ae_title=called, bind_address=(source, 0), tls_args=tls_args)


def audit_lines(work: Path) -> list[dict]:
    return [json.loads(line) for line in (work / "audit.jsonl").read_text().splitlines()]


def copy_study(files: list[Path], folder: Path, **changes) -> list[Path]:
    """The files with new SOP Instance UIDs and the given attributes changed (e.g. another study, same series)."""
    folder.mkdir(parents=True)
    copies = []
    for path in files:
        ds = pydicom.dcmread(path)
        ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID = generate_uid()
        for keyword, value in changes.items():
            setattr(ds, keyword, value)
        copies.append(folder / f"{ds.SOPInstanceUID}.dcm")
        ds.save_as(copies[-1])
    return copies


def connect(port: int, source: str) -> socket.socket:
    """A TCP connection to the gateway from `source` (any 127.x.y.z address on loopback), nothing sent."""
    return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))


def closed_at(connection: socket.socket, limit: float) -> float:
    """When (time.monotonic()) the gateway closed `connection` (what it sent read and dropped); inf if it is still
    open `limit` seconds from now."""
    started = time.monotonic()
    connection.settimeout(0.2)
    while time.monotonic() - started < limit:
        try:
            if not connection.recv(4096):
                return time.monotonic()
        except TimeoutError:
            continue
        except OSError:  # reset
            return time.monotonic()
    return float("inf")


def closed_within(connection: socket.socket, limit: float) -> bool:
    return closed_at(connection, limit) < float("inf")


def connection_lines(work) -> list[dict]:
    return [r for r in audit_lines(work) if r["event"] == "connection"]


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run([shutil.which("openssl") or "openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(folder: Path, name: str) -> None:
    """`name`-ca.crt/.key, and certificates for `name`-server (127.0.0.1) and `name`-client signed by it."""
    folder.mkdir(exist_ok=True)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name} test CA",
            "-keyout", f"{name}-ca.key", "-out", f"{name}-ca.crt", cwd=folder)
    for role in ("server", "client"):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}-{role}", "-keyout", f"{name}-{role}.key",
                "-out", f"{name}-{role}.csr", cwd=folder)
        (folder / f"{name}-{role}.ext").write_text("subjectAltName = IP:127.0.0.1\n")
        openssl("x509", "-req", "-in", f"{name}-{role}.csr", "-CA", f"{name}-ca.crt", "-CAkey", f"{name}-ca.key",
                "-CAcreateserial", "-days", "2", "-extfile", f"{name}-{role}.ext", "-out", f"{name}-{role}.crt",
                cwd=folder)


def client_context(folder: Path, name: str, ca: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(folder / f"{ca}-ca.crt"))
    context.load_cert_chain(str(folder / f"{name}-client.crt"), str(folder / f"{name}-client.key"))
    return context
