"""End to end against a real PACS: Orthanc (Debian's package, on loopback, started here) receives synthetic CTs, its
auto-routing (a Lua OnStableStudy script) sends each stable study to the gateway, the gateway's results appear in
Orthanc (checked through its REST API), validate with dciodvfy and read back to the detector's boxes; a CR chest
radiograph goes the same way to the object-CXR algorithm and its SR reads back to the official CSVs of the
algorithm's batch run on it. With them: an
MR study no route takes, a series with a missing slice (its failure note, an SR, appears in Orthanc), and the same
study again (Orthanc forwards a study again once
the SR has made it change: the gateway drops its own SR and does not run the study twice)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pydicom
from dicom_helpers import dciodvfy_errors
from gateway_helpers import (INFERENCE, OBJECT_CXR_INFERENCE, REPO, GatewayProcess, config_text, free_port,
                             route_text, states, wait_for)

from medchallenge.dicom.series import find_series, select_study_series
from medchallenge.dicom.sr import read_box_report, read_failure_note, read_point_report
from medchallenge.registry import CHALLENGES

# docs/orthanc.md's worked example, as written there: Orthanc's settings for the gateway and its routing script
EXAMPLE = REPO / "gateway" / "orthanc"


class Orthanc:
    """An Orthanc of its own: loopback HTTP, DICOM stores accepted only from the gateway's AE title and host."""

    def __init__(self, root: Path, gateway_port: int):
        root.mkdir(parents=True)
        self.http, self.dicom = free_port(), free_port()
        example = json.loads((EXAMPLE / "orthanc.json").read_text())
        example["DicomModalities"]["medchallenge"].update(AET="GATEWAY", Host="127.0.0.1", Port=gateway_port)
        (root / "orthanc.json").write_text(json.dumps({
            **example, "Name": "medchallenge-test", "StorageDirectory": str(root / "db"),
            "IndexDirectory": str(root / "db"), "HttpPort": self.http, "DicomPort": self.dicom,
            "RemoteAccessAllowed": False, "AuthenticationEnabled": False, "HttpServerEnabled": True,
            "DicomServerEnabled": True, "StableAge": 2, "LuaScripts": [str(EXAMPLE / "medchallenge-route.lua")],
            "Plugins": [],
        }))
        self.log = open(root / "orthanc.log", "w")
        self.process = subprocess.Popen([shutil.which("Orthanc") or "Orthanc", str(root / "orthanc.json")],
                                        stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: self._alive(), 60, "Orthanc's REST API")

    def _alive(self) -> bool:
        try:
            return bool(self.get("/system"))
        except OSError:
            return False

    def request(self, method: str, path: str, body: bytes | None = None):
        request = urllib.request.Request(f"http://127.0.0.1:{self.http}{path}", data=body, method=method)
        with urllib.request.urlopen(request, timeout=30) as response:
            data = response.read()
        return json.loads(data) if response.headers.get_content_type() == "application/json" else data

    def get(self, path: str):
        return self.request("GET", path)

    def upload(self, files: list[Path]) -> None:
        for path in files:
            self.request("POST", "/instances", path.read_bytes())

    def study_series(self, study_uid: str) -> list[dict]:
        (match,) = self.request("POST", "/tools/lookup", study_uid.encode())
        return self.get(f"/studies/{match['ID']}/series?expand")

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)
        self.log.close()


def sr_series(orthanc: Orthanc, study_uid: str) -> list[dict]:
    return [s for s in orthanc.study_series(study_uid) if s["MainDicomTags"].get("Modality") == "SR"]


def test_orthanc_to_gateway_to_orthanc(tmp_path, studies):
    gateway_port = free_port()
    orthanc = Orthanc(tmp_path / "orthanc", gateway_port)
    config = tmp_path / "gateway.toml"
    config.write_text(config_text(tmp_path / "work", gateway_port, orthanc.dicom,
                                  [sys.executable, str(INFERENCE), "--device", "cpu"], quiet=1.0)
                      .replace('ae_title = "FAKEPACS"', 'ae_title = "ORTHANC"')
                      + route_text("object-cxr", ["CR", "DX"], ["CHEST"],
                                   [sys.executable, str(OBJECT_CXR_INFERENCE), "--device", "cpu"]))
    gateway = GatewayProcess(config, tmp_path / "gateway.log")
    work = tmp_path / "work"
    try:
        gateway.wait_ready()
        started = time.monotonic()
        orthanc.upload(studies["tb"])
        orthanc.upload(studies["cxr"])
        tb_uid = pydicom.dcmread(studies["tb"][0]).StudyInstanceUID
        cxr = pydicom.dcmread(studies["cxr"][0])
        (sr_entry,) = wait_for(lambda: sr_series(orthanc, tb_uid), 180, "the SR in Orthanc")
        seconds = time.monotonic() - started
        (instance,) = sr_entry["Instances"]
        sr_path = tmp_path / "sr.dcm"
        sr_path.write_bytes(orthanc.get(f"/instances/{instance}/file"))
        assert dciodvfy_errors(sr_path) == []
        ((series, _),) = select_study_series(find_series(studies["root"] / "tb"), ("CT",))
        findings = read_box_report(sr_path, series)
        assert len(findings) == 1 and findings[0].probability >= 0.5
        # the radiograph: its SR in Orthanc reads back to the official CSVs the detector wrote for it
        (cxr_entry,) = wait_for(lambda: sr_series(orthanc, cxr.StudyInstanceUID), 120, "the radiograph's SR")
        cxr_sr = tmp_path / "cxr-sr.dcm"
        cxr_sr.write_bytes(orthanc.get(f"/instances/{cxr_entry['Instances'][0]}/file"))
        assert dciodvfy_errors(cxr_sr) == []
        wait_for(lambda: (work / "sent" / cxr.StudyInstanceUID / "job.json").exists(), 60, "the study in sent/")
        # the official CSVs of the algorithm run on the radiograph in its batch mode, the SR's values
        output = tmp_path / "cxr-batch"
        subprocess.run([sys.executable, str(OBJECT_CXR_INFERENCE), "--device", "cpu", "--input",
                        str(studies["cxr"][0].parent), "--output", str(output)], check=True, capture_output=True,
                       env={**os.environ, "PYTHONPATH": str(REPO / "shared")})
        (classification,) = (output / "classification.csv").read_text().splitlines()[1:]
        (localization,) = (output / "localization.csv").read_text().splitlines()[1:]
        probability, points = read_point_report(cxr_sr)
        name, value = classification.split(",")
        assert name == studies["cxr"][0].name and float(value) == round(probability, 6)
        # the points at or above the route's operating point (the model card's, by default) are the findings
        threshold = dict(CHALLENGES["object-cxr"].algorithm.operating_points)["foreign-objects"]
        expected = [point for t in localization.split(",")[1].split(";") if t
                    for point in [tuple(map(float, t.split(" ")))] if point[0] >= threshold]
        assert expected and [(round(p.probability, 6), round(p.x, 1), round(p.y, 1)) for p in points] == expected
        # Orthanc forwards the study again once the SR made it change: the gateway drops its own SR and the CT
        # instances it processed already, so the study is a duplicate and nothing is sent twice
        wait_for(lambda: states(work)["duplicate"] == 2, 60, "the studies forwarded again")
        orthanc.upload(studies["mr"])
        orthanc.upload(studies["broken"])
        wait_for(lambda: states(work)["unroutable"] == 1 and states(work)["failed"] == 1, 120,
                 "the MR study and the broken series")
        # the broken study's failure note in Orthanc; Orthanc forwards that study again: a duplicate, not run again
        broken_uid = pydicom.dcmread(studies["broken"][0]).StudyInstanceUID
        (note_entry,) = wait_for(lambda: sr_series(orthanc, broken_uid), 60, "the failure note in Orthanc")
        note = pydicom.dcmread(io.BytesIO(orthanc.get(f"/instances/{note_entry['Instances'][0]}/file")))
        assert read_failure_note(note).endswith("could not process the images of this study. Study "
                                                f"{broken_uid}; the details are in the gateway's log.")
        wait_for(lambda: states(work)["duplicate"] == 3, 60, "the failed study forwarded again")
        assert len(sr_series(orthanc, tb_uid)) == 1 and len(sr_series(orthanc, cxr.StudyInstanceUID)) == 1
        assert len(orthanc.get("/instances")) == len(studies["tb"]) + 1 + 1 + 1 + len(studies["mr"]) + \
            len(studies["broken"]) + 1
        counts = states(work)
        assert counts == {"incoming": 0, "received": 0, "running": 0, "sent": 2, "failed": 1, "unroutable": 1,
                          "duplicate": 3}
        print(f"\nOrthanc -> gateway -> Orthanc: SR in Orthanc {seconds:.1f} s after the upload; queue {counts}")
    finally:
        assert gateway.stop() == 0
        orthanc.close()
    assert "Traceback" not in (tmp_path / "gateway.log").read_text()
