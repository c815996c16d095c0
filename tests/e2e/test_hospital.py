"""The hospital deployment for real: compose.hospital.yaml's profile `hospital` built and started (the gateway on its
own network, the job runner with network_mode none and the Docker socket running the project's algorithm images,
tagged $MEDCHALLENGE_VERSION, as grand-challenge jobs), a chest CT, a rib CT and a chest radiograph sent to the
published port, the SR, SEG and SR received by a PACS stand-in listening on that network's gateway address, and a
broken CT's failure note."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pydicom

from dicom_helpers import write_tiny_series
from gateway_helpers import FakePacs, free_port, send_files, wait_for

from medchallenge import __version__
from medchallenge.dicom.series import find_series, select_study_series
from medchallenge.dicom.seg import read_label_segmentation
from medchallenge.dicom.sr import read_box_report, read_failure_note, read_point_report
from medchallenge.dicom.synthetic import SyntheticStudy, radiograph_dataset, ras_affine, write_ct_series
from medchallenge.io import write_dicom_atomic
from medchallenge.synth import ribfrac_ct
from medchallenge.synth.object_cxr_images import generate_image
from medchallenge.synth.tb_caverns import case_rng, generate_case

REPO = Path(__file__).resolve().parents[2]
VERSION = os.environ.get("MEDCHALLENGE_VERSION") or __version__  # the images' tag (compose files)
ALGORITHMS = ("tb-caverns-algorithm", "ribfrac-algorithm", "object-cxr-algorithm")


def test_hospital_profile_pacs_to_algorithm_images_and_back(docker_compose, tmp_path):
    docker_compose("build", *ALGORITHMS)  # the built-in routes' images (make images; cached)
    data = tmp_path / "hospital"
    for folder in (data / "work", data / "inbox"):
        folder.mkdir(parents=True)
        folder.chmod(0o777)
    data.chmod(0o777)
    gateway_port, pacs_port = free_port(), free_port()
    config = tmp_path / "gateway.toml"
    example = (REPO / "gateway" / "gateway.example.toml").read_text()
    env = {**os.environ, "HOSPITAL_DATA": str(data), "GATEWAY_CONFIG": str(config), "GATEWAY_PORT": str(gateway_port),
           "DOCKER_GID": str(os.stat("/var/run/docker.sock").st_gid),
           "COMPOSE_PROJECT_NAME": os.environ.get("COMPOSE_PROJECT_NAME", "medchallenge") + "-hospital"}

    def compose(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", "compose", "-f", str(REPO / "compose.hospital.yaml"), "--profile", "hospital",
                               *args], env=env, check=True, capture_output=True, text=True)

    routes = [line for line in example.splitlines() if line.startswith("image = ")]  # not the commented Slurm route
    assert len(routes) == 3 and all(line.endswith(f"-algorithm:{__version__}\"") for line in routes)
    config.write_text(example.replace("study_quiet_seconds = 30", "study_quiet_seconds = 2")
                      .replace(f"-algorithm:{__version__}\"", f"-algorithm:{VERSION}\""))
    compose("build")
    assert "configuration valid" in compose("run", "--rm", "gateway", "--check").stdout
    compose("up", "-d")
    try:
        bridge, subnet = subprocess.run(
            ["docker", "network", "inspect", f"{env['COMPOSE_PROJECT_NAME']}_pacs", "--format",
             "{{(index .IPAM.Config 0).Gateway}} {{(index .IPAM.Config 0).Subnet}}"], check=True, capture_output=True,
            text=True).stdout.split()
        pacs = FakePacs("ORTHANC", host=bridge, port=pacs_port)
        # the sender (this test, calling AE title SENDER) comes in through the published port, from the network's
        # side: the allow-list names it and that network instead of the example's PACS
        caller = 'ae_title = "ORTHANC"\naddresses = ["10.0.0.20"]'
        assert caller in config.read_text()
        config.write_text(config.read_text().replace("pacs.hospital.example", bridge)
                          .replace("port = 4242", f"port = {pacs_port}")
                          .replace(caller, f'ae_title = "SENDER"\naddresses = ["{subnet}"]'))
        compose("restart", "gateway", "job-runner")
        case = generate_case(case_rng(7, 0), (200, 180, 40), n_caverns=1, cavern_radius_mm=(12.0, 15.0))
        files = write_ct_series(tmp_path / "study", case.ct, case.affine, SyntheticStudy("e2e-hospital", "E2E"))
        rib = ribfrac_ct.generate_case(ribfrac_ct.case_rng(4, 0), (112, 104, 40), spacing=(0.75, 0.75, 1.25))
        ribs = write_ct_series(tmp_path / "ribs", rib.ct.T, ras_affine(rib.spacing, rib.origin),
                               SyntheticStudy("e2e-hospital-ribs", "E2E_RIB", body_part="RIB"))
        radiograph = write_dicom_atomic(tmp_path / "cxr" / "cxr.dcm", radiograph_dataset(
            generate_image(5, 0, 256, positive_fraction=1.0).pixels, SyntheticStudy("e2e-hospital-cxr", "E2E_CXR")))
        started = time.monotonic()
        assert set(send_files(files, gateway_port, "MEDCHALLENGE")) == {0}
        wait_for(lambda: pacs.received, 300, "the SR from the hospital profile")
        print(f"\nhospital profile: SR in the PACS {time.monotonic() - started:.1f} s after the study was sent")
        (sr,) = pacs.received
        sr.save_as(tmp_path / "sr.dcm", enforce_file_format=True)
        ((series, _),) = select_study_series(find_series(tmp_path / "study"), ("CT",))
        assert sr.StudyInstanceUID == pydicom.dcmread(files[0]).StudyInstanceUID
        assert len(read_box_report(tmp_path / "sr.dcm", series)) == 1
        # the rib CT (BodyPartExamined RIB) to the RibFrac image, the radiograph to the object-CXR image
        assert set(send_files(ribs, gateway_port, "MEDCHALLENGE")) == {0}
        assert set(send_files([radiograph], gateway_port, "MEDCHALLENGE")) == {0}
        wait_for(lambda: len(pacs.received) == 3, 300, "the SEG and the radiograph's SR")
        by_study = {ds.StudyInstanceUID: ds for ds in pacs.received}
        seg = by_study[pydicom.dcmread(ribs[0]).StudyInstanceUID]
        cxr_sr = by_study[pydicom.dcmread(radiograph).StudyInstanceUID]
        ((rib_series, _),) = select_study_series(find_series(tmp_path / "ribs"), ("CT",))
        if seg.Modality == "SEG":  # fractures found (two with the committed model)
            labels, segments = read_label_segmentation(seg, rib_series)
            assert segments and set(np.unique(labels)) == {0, *(s.label for s in segments)}
        else:  # none: an SR saying so
            assert seg.Modality == "SR" and read_box_report(seg, rib_series) == []
        assert cxr_sr.Modality == "SR"
        probability, _ = read_point_report(cxr_sr)
        assert 0.0 <= probability <= 1.0
        # a chest CT with a missing slice: its failure note in the PACS
        _, _, broken = write_tiny_series(tmp_path / "broken", key="e2e-hospital-broken", shape=(40, 40, 8))
        ((ordered, _),) = select_study_series(find_series(tmp_path / "broken"), ("CT",))
        ordered.files[3].unlink()
        assert set(send_files([p for p in broken if p.exists()], gateway_port, "MEDCHALLENGE")) == {0}
        wait_for(lambda: len(pacs.received) == 4, 300, "the broken study's failure note")
        note = pacs.received[3]
        assert note.StudyInstanceUID == ordered.study_uid and note.CompletionFlag == "PARTIAL"
        assert read_failure_note(note).startswith("AI detector tb-caverns could not process this study")
        pacs.close()
    finally:
        logs = compose("logs", "--no-color").stdout
        compose("down")
    assert logs.count("1 result object(s) sent") == 3 and "Traceback" not in logs
    assert "job runner: watching" in logs and "uneven slice spacing" in logs
    assert not list((data / "inbox").glob("*/*/*"))  # every job taken back by the gateway
