"""The hospital deployment for real: compose.hospital.yaml's profile `hospital` built and started (the gateway on its
own network, the TB detector with network_mode none watching its inbox), a CT study sent to the published port, the
SR received by a PACS stand-in listening on that network's gateway address."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pydicom

from gateway_helpers import FakePacs, free_port, send_files, wait_for
from medchallenge.dicom.series import find_series, select_study_series
from medchallenge.dicom.sr import read_box_report
from medchallenge.dicom.synthetic import SyntheticStudy, write_ct_series
from medchallenge.synth.tb_caverns import case_rng, generate_case

REPO = Path(__file__).resolve().parents[2]


def test_hospital_profile_pacs_to_detector_and_back(docker_compose, tmp_path):
    data = tmp_path / "hospital"
    for folder in (data / "work", *(data / "inbox" / name for name in ("tb-caverns", "ribfrac", "object-cxr"))):
        folder.mkdir(parents=True)
    for path in [data, *data.rglob("*")]:
        path.chmod(0o777)
    gateway_port, pacs_port = free_port(), free_port()
    config = tmp_path / "gateway.toml"
    example = (REPO / "gateway" / "gateway.example.toml").read_text()
    env = {**os.environ, "HOSPITAL_DATA": str(data), "GATEWAY_CONFIG": str(config), "GATEWAY_PORT": str(gateway_port),
           "COMPOSE_PROJECT_NAME": os.environ.get("COMPOSE_PROJECT_NAME", "medchallenge") + "-hospital"}

    def compose(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", "compose", "-f", str(REPO / "compose.hospital.yaml"), "--profile", "hospital",
                               *args], env=env, check=True, capture_output=True, text=True)

    config.write_text(example.replace("study_quiet_seconds = 30", "study_quiet_seconds = 2"))
    compose("build")
    assert "configuration valid" in compose("run", "--rm", "gateway", "--check").stdout
    compose("up", "-d")
    try:
        bridge = subprocess.run(["docker", "network", "inspect", f"{env['COMPOSE_PROJECT_NAME']}_pacs", "--format",
                                 "{{(index .IPAM.Config 0).Gateway}}"], check=True, capture_output=True,
                                text=True).stdout.strip()
        pacs = FakePacs("ORTHANC", host=bridge, port=pacs_port)
        config.write_text(config.read_text().replace("pacs.hospital.example", bridge).replace("port = 4242",
                                                                                              f"port = {pacs_port}"))
        compose("restart", "gateway")
        case = generate_case(case_rng(7, 0), (200, 180, 40), n_caverns=1, cavern_radius_mm=(12.0, 15.0))
        files = write_ct_series(tmp_path / "study", case.ct, case.affine, SyntheticStudy("e2e-hospital", "E2E"))
        started = time.monotonic()
        assert set(send_files(files, gateway_port, "MEDCHALLENGE")) == {0}
        wait_for(lambda: pacs.received, 300, "the SR from the hospital profile")
        print(f"\nhospital profile: SR in the PACS {time.monotonic() - started:.1f} s after the study was sent")
        (sr,) = pacs.received
        sr.save_as(tmp_path / "sr.dcm", enforce_file_format=True)
        ((series, _),) = select_study_series(find_series(tmp_path / "study"), ("CT",))
        assert sr.StudyInstanceUID == pydicom.dcmread(files[0]).StudyInstanceUID
        assert len(read_box_report(tmp_path / "sr.dcm", series)) == 1
        pacs.close()
    finally:
        logs = compose("logs", "--no-color").stdout
        compose("down")
    assert "1 result object(s) sent" in logs and "Traceback" not in logs
