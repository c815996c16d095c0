"""The gateway's image routes on loopback: a CT study and a CR radiograph go to grand-challenge-forge's algorithm
images (tests/external_images) through the job runner, and their output sockets come back to the PACS as DICOM SRs;
a job that fails (the participant image without its model tarball) gets a failure note and failed/; an interface
without a DICOM mapping is refused by `--check` with one line; and the same end to end with Orthanc."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pydicom
import pytest
from conftest import REPO
from dicom_helpers import dciodvfy_errors, write_tiny_series
from external_images import generate_forge
from gateway_helpers import FakePacs, GatewayProcess, config_text, free_port, send_files, states, wait_for
from test_external_images import docker_images  # noqa: F401 (the fixture building the images)

from medchallenge.dicom.series import find_series, select_study_series
from medchallenge.dicom.sr import read_box_report, read_failure_note, read_point_report

def gateway_config(work: Path, port: int, pacs_port: int) -> str:
    """The loopback gateway of gateway_helpers without its routes."""
    return config_text(work, port, pacs_port, []).split("[[route]]")[0]


def image_route(name: str, modalities: list[str], body_parts: list[str], image: str, interface: str,
                model: Path | None) -> str:
    return f"""
[[route]]
name = "{name}"
modalities = {json.dumps(modalities)}
body_parts = {json.dumps(body_parts)}
image = "{image}"
interface = "{interface}"
{f'model = "{model}"' if model else ""}
memory_gb = 2
timeout_seconds = 300
"""


def forge_model(challenge: str, out: Path) -> Path:
    """The forge template's model/ folder packed as its do_save.sh packs it."""
    with tarfile.open(out, "w:gz") as tar:
        tar.add(generate_forge.OUT / challenge / "model", arcname=".")
    return out


def check(config: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "medchallenge.gateway", "--config", str(config), "--check"],
                          capture_output=True, text=True, env={"PYTHONPATH": str(REPO / "shared")})


def test_check_refuses_an_interface_without_dicom_mapping(tmp_path):
    config = tmp_path / "gateway.toml"
    config.write_text(gateway_config(tmp_path / "work", 11112, 104)
                      + image_route("captions", ["CR"], [], "team/captioner:1", "imageclef-caption-2022", None))
    done = check(config)
    assert done.returncode != 0
    (line,) = done.stderr.strip().splitlines()
    assert "interface = 'imageclef-caption-2022': no DICOM mapping" in line and "[[route]] 1" in line


def test_forge_images_behind_the_gateway(docker_images, studies, tmp_path):  # noqa: F811
    work, pacs = tmp_path / "work", FakePacs()
    port = free_port()
    abdomen = write_tiny_series(tmp_path / "abdomen", key="gateway-abdomen", shape=(32, 32, 8))[2]
    for path in abdomen:
        ds = pydicom.dcmread(path)
        ds.BodyPartExamined = "ABDOMEN"
        ds.save_as(path)
    config = tmp_path / "gateway.toml"
    config.write_text(
        gateway_config(work, port, pacs.port)
        + image_route("forge-tb", ["CT"], ["CHEST"], docker_images["forge-tb-caverns"], "tb-caverns",
                      forge_model("tb-caverns", tmp_path / "tb-model.tar.gz"))
        + image_route("forge-cxr", ["CR", "DX"], [], docker_images["forge-object-cxr"], "object-cxr",
                      forge_model("object-cxr", tmp_path / "cxr-model.tar.gz"))
        # the participant's image without the model tarball it needs: the job fails
        + image_route("no-model", ["CT"], ["ABDOMEN"], docker_images["participant"], "tb-caverns", None))
    assert check(config).returncode == 0
    gateway = GatewayProcess(config, tmp_path / "gateway.log")
    try:
        gateway.wait_ready()
        for files in (studies["tb"], studies["cxr"], abdomen):
            assert set(send_files(files, port)) == {0}
        wait_for(lambda: states(work)["sent"] == 2 and states(work)["failed"] == 1, 240, "three studies done")
        wait_for(lambda: len(pacs.stored()) == 3, 60, "two SRs and a failure note in the PACS")
        received = pacs.stored()
    finally:
        gateway.stop()
        pacs.close()
    by_study = {}
    for ds in received.values():
        by_study.setdefault(str(ds.StudyInstanceUID), []).append(ds)
    tb_uid = str(pydicom.dcmread(studies["tb"][0]).StudyInstanceUID)
    cxr_uid = str(pydicom.dcmread(studies["cxr"][0]).StudyInstanceUID)
    abdomen_uid = str(pydicom.dcmread(abdomen[0]).StudyInstanceUID)
    ((tb_sr,), (cxr_sr,), (note,)) = by_study[tb_uid], by_study[cxr_uid], by_study[abdomen_uid]
    ((series, _),) = select_study_series(find_series(studies["tb"][0].parent), ("CT",))
    assert read_box_report(tb_sr, series) == []  # the forge template's example value: no boxes
    assert read_point_report(cxr_sr) == (0.5, [])  # its likelihood 0.5, no points
    for sr, route in ((tb_sr, "forge-tb"), (cxr_sr, "forge-cxr")):
        assert f'"{route}"' in sr.to_json()  # the algorithm's name in the SR: the route's
    assert read_failure_note(note).startswith("AI detector no-model could not process this study: the detector "
                                              "could not process the images of this study.")
    failed = next((work / "failed").iterdir())
    error = (failed / "error.txt").read_text()
    assert "no-model" in error and "exited with status 1" in error
    assert "unet3d.onnx" not in error  # the container's stderr stays out of the gateway's records ...
    result = json.loads((failed / "job" / "result.json").read_text())  # ... and in the job's result
    assert result["status"] == "failed" and "unet3d.onnx" in "\n".join(result["stderr_tail"])
    for study in (*(work / "sent").iterdir(), failed):  # the job's copies (images, model, outputs) are gone
        assert [p.name for p in (study / "job").iterdir()] == ["result.json"]


def test_forge_images_between_orthanc_and_the_gateway(docker_images, studies, tmp_path):  # noqa: F811
    """Orthanc forwards a chest CT and a radiograph to the gateway (its auto-routing), the forge images run on them
    and their SRs appear in Orthanc, valid for dciodvfy, reading back to the images' outputs."""
    from test_gateway_orthanc import Orthanc, sr_series

    port = free_port()
    orthanc = Orthanc(tmp_path / "orthanc", port)
    config = tmp_path / "gateway.toml"
    config.write_text(
        gateway_config(tmp_path / "work", port, orthanc.dicom).replace('ae_title = "FAKEPACS"', 'ae_title = "ORTHANC"')
        + image_route("forge-tb", ["CT"], ["CHEST"], docker_images["forge-tb-caverns"], "tb-caverns",
                      forge_model("tb-caverns", tmp_path / "tb-model.tar.gz"))
        + image_route("forge-cxr", ["CR", "DX"], [], docker_images["forge-object-cxr"], "object-cxr",
                      forge_model("object-cxr", tmp_path / "cxr-model.tar.gz")))
    gateway = GatewayProcess(config, tmp_path / "gateway.log")
    try:
        gateway.wait_ready()
        orthanc.upload(studies["tb"])
        orthanc.upload(studies["cxr"])
        results = {}
        for key in ("tb", "cxr"):
            uid = str(pydicom.dcmread(studies[key][0]).StudyInstanceUID)
            (entry,) = wait_for(lambda: sr_series(orthanc, uid), 240, f"the {key} SR in Orthanc")
            results[key] = tmp_path / f"{key}-sr.dcm"
            results[key].write_bytes(orthanc.get(f"/instances/{entry['Instances'][0]}/file"))
            assert dciodvfy_errors(results[key]) == []
    finally:
        assert gateway.stop() == 0
        orthanc.close()
    ((series, _),) = select_study_series(find_series(studies["root"] / "tb"), ("CT",))
    assert read_box_report(results["tb"], series) == []
    assert read_point_report(results["cxr"]) == (0.5, [])
    assert "Traceback" not in (tmp_path / "gateway.log").read_text()


def test_the_job_runner_service_runs_image_routes_for_a_gateway_without_docker(docker_images, studies,  # noqa: F811
                                                                                tmp_path):
    """An image route with an inbox: the gateway (here without any `docker` on its PATH) hands the study over, the
    job-runner service (`--job-runner`, the one holding the Docker socket) runs the image, the SR reaches the PACS."""
    work, pacs, port = tmp_path / "work", FakePacs(), free_port()
    config = tmp_path / "gateway.toml"
    config.write_text(gateway_config(work, port, pacs.port)
                      + image_route("forge-cxr", ["CR", "DX"], [], docker_images["forge-object-cxr"], "object-cxr",
                                    forge_model("object-cxr", tmp_path / "cxr-model.tar.gz"))
                      + f'inbox = "{tmp_path / "inbox" / "forge-cxr"}"\n')
    assert check(config).returncode == 0
    gateway = GatewayProcess(config, tmp_path / "gateway.log", extra_env={"PATH": str(tmp_path / "no-docker")})
    runner_log = open(tmp_path / "job-runner.log", "w")
    runner = subprocess.Popen([sys.executable, "-m", "medchallenge.gateway", "--config", str(config), "--job-runner"],
                              stdout=runner_log, stderr=subprocess.STDOUT,
                              env={**os.environ, "PYTHONPATH": str(REPO / "shared")})
    try:
        gateway.wait_ready()
        assert set(send_files(studies["cxr"], port)) == {0}
        (sr,) = wait_for(lambda: list(pacs.stored().values()), 240, "the SR from the job runner")
    finally:
        gateway.stop()
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(timeout=60) == 0
        pacs.close()
    assert read_point_report(sr) == (0.5, [])
    assert "job runner: watching" in (tmp_path / "job-runner.log").read_text()
    assert states(work)["sent"] == 1 and not any((tmp_path / "inbox" / "forge-cxr" / "pending").iterdir())


def test_check_refuses_a_generic_output_kind_without_mapping(tmp_path):
    config = tmp_path / "gateway.toml"
    config.write_text(gateway_config(tmp_path / "work", 11112, 104)
                      + image_route("lungs", ["CT"], [], "team/lungs:1", "generic", None)
                      + 'input = "ct-image"\noutputs = [{slug = "volume", kind = "Float"}, '
                        '{slug = "heatmap", kind = "Heat Map"}]\n')
    done = check(config)
    (line,) = done.stderr.strip().splitlines()
    assert done.returncode != 0 and "output 'heatmap' of kind 'Heat Map': no DICOM mapping" in line


def labelled_ct(folder: Path):
    """A 16 x 12 x 6 CT series, a label map on its grid with labels 1 and 2, and that map as an .mha file."""
    import numpy as np
    import SimpleITK as sitk

    write_tiny_series(folder / "ct", key=f"labelled-{folder.name}", shape=(16, 12, 6))
    ((series, _),) = select_study_series(find_series(folder / "ct"), ("CT",))
    labels = np.zeros((6, 12, 16), np.uint8)
    labels[1:3, 2:5, 3:9], labels[4, 6:9, 10:14] = 1, 2
    label_file = folder / "labels.mha"
    sitk.WriteImage(sitk.GetImageFromArray(labels), str(label_file))
    return series, labels, label_file


def test_generic_outputs_become_seg_and_sr(tmp_path):
    """A generic interface's outputs as DICOM: a label image on the CT's grid -> a SEG (its labels read back), a
    Float -> an SR measurement, a String -> an SR text item (control characters replaced); points on a radiograph ->
    SR SCOORD points (on a CT: test_gateway_points.py); every object valid for dciodvfy. A label image off the grid is refused in one line."""
    import numpy as np
    import SimpleITK as sitk

    from medchallenge.dicom.seg import read_label_segmentation
    from medchallenge.dicom.synthetic import SyntheticStudy, radiograph_dataset
    from medchallenge.errors import InputError
    from medchallenge.gateway.config import Route
    from medchallenge.jobs.image_grid import ImageGrid
    from medchallenge.gateway.output_dicom import GENERIC_FINDING, generic_results
    from medchallenge.io import write_dicom_atomic

    series, labels, label_file = labelled_ct(tmp_path)
    route = Route("lungs", ("CT",), (), "generic", 60, image="team/lungs:1", input_socket="ct-image",
                  outputs=(("lesions", "Segmentation"), ("volume-ml", "Float"), ("impression", "String")))
    kind = dataclasses.replace(GENERIC_FINDING, algorithm_name="lungs", algorithm_version="1")
    seg, sr = generic_results(route, {"lesions": label_file, "volume-ml": 12.5, "impression": "two\x1bnodules"},
                              series, ImageGrid((16, 12, 6)), kind)
    read_labels, segments = read_label_segmentation(seg, series)
    assert np.array_equal(read_labels, labels) and [s.label for s in segments] == [1, 2]
    text = pydicom.dcmread(write_dicom_atomic(tmp_path / "values.dcm", sr)).to_json()
    assert "[12.5]" in text and "two?nodules" in text and "\x1b" not in text
    write_dicom_atomic(tmp_path / "cr" / "cr.dcm", radiograph_dataset(
        np.zeros((64, 48), np.uint16), SyntheticStudy("generic-cr", "GEN_CR")))
    (cr_series,) = find_series(tmp_path / "cr")
    points_route = dataclasses.replace(route, input_socket="chest-x-ray", outputs=(("nodules", "Multiple points"),))
    (points_sr,) = generic_results(points_route, {"nodules": {"points": [{"point": [10.0, 20.0, 0.5],
                                                                          "probability": 0.8}]}},
                                   cr_series, ImageGrid((48, 64, 1)), kind)  # panimg's: no PixelSpacing, 1 mm
    import highdicom as hd
    from pydicom.sr.codedict import codes

    (group,) = hd.sr.ComprehensiveSR.from_dataset(points_sr).content.get_planar_roi_measurement_groups()
    assert group.roi.value.tolist() == [[10.5, 20.5]]  # DICOM pixel coordinates: the pixel centre + 0.5
    assert [float(m.value) for m in group.get_measurements(name=codes.DCM.Probability)] == [0.8]
    for number, dataset in enumerate((seg, sr, points_sr)):
        path = write_dicom_atomic(tmp_path / f"out{number}.dcm", dataset)
        assert dciodvfy_errors(path) == [], number
    sitk.WriteImage(sitk.GetImageFromArray(labels[:, :6]), str(label_file))
    with pytest.raises(InputError, match="lesions: expected non-negative integer labels on the input's 16x12x6 grid"):
        generic_results(route, {"lesions": label_file, "volume-ml": 1.0, "impression": ""}, series,
                        ImageGrid((16, 12, 6)), kind)


def test_ribfrac_outputs_become_the_detectors_seg(tmp_path):
    """RibFrac's output sockets (instance image, detections) -> the SEG the RibFrac detector writes: each fracture's
    label, type and confidence read back; a detection naming a label the image lacks is refused in one line."""
    import numpy as np

    from medchallenge.dicom.detectors import RIB_FRACTURE, rib_fracture_type
    from medchallenge.dicom.seg import read_label_segmentation
    from medchallenge.errors import InputError
    from medchallenge.jobs.image_grid import ImageGrid
    from medchallenge.gateway.output_dicom import rib_fracture_route_results
    from medchallenge.io import write_dicom_atomic

    series, labels, image = labelled_ct(tmp_path)
    detections = {"detections": [{"label_id": 1, "confidence": 0.9, "label_code": 2},
                                 {"label_id": 2, "confidence": 0.6, "label_code": -1}]}
    (seg,) = rib_fracture_route_results({"rib-fracture-instances": image, "rib-fracture-detections": detections},
                                        series, ImageGrid((16, 12, 6)), RIB_FRACTURE)
    assert dciodvfy_errors(write_dicom_atomic(tmp_path / "seg.dcm", seg)) == []
    read_labels, segments = read_label_segmentation(seg, series)
    assert np.array_equal(read_labels, labels)
    assert [(s.label, s.segment_type, s.confidence) for s in segments] == [
        (1, rib_fracture_type(2), 0.9), (2, rib_fracture_type(-1), 0.6)]
    detections["detections"][1]["label_id"] = 3
    with pytest.raises(InputError, match=r"detections\[1\]: label_id must be a label of the instance image"):
        rib_fracture_route_results({"rib-fracture-instances": image, "rib-fracture-detections": detections},
                                   series, ImageGrid((16, 12, 6)), RIB_FRACTURE)
