"""A route's operating points: each output carrying probabilities is reported at a threshold (by default the
project's algorithm's model card's, registry.Algorithm.operating_points, which each algorithm's README names), so that
findings under it are not findings (kept, with keep_below_threshold, marked below threshold) and the study's result
says present or absent at it with its probability and the threshold applied. Tested on the real radiograph the
object-CXR model card reports on (RG1_UNCI.dcm of pydicom-data: no foreign object), through the gateway's job path,
and on results with findings (SR points, TB boxes, RibFrac SEG segments)."""

from __future__ import annotations

import dataclasses
import logging
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pydicom
import pytest
from dicom_helpers import dciodvfy_errors, write_tiny_series
from gateway_helpers import OBJECT_CXR_INFERENCE, REPO, config_text, route_text
from test_gateway_points import converted_dx, read_points

from medchallenge.dicom.detectors import RIB_FRACTURE, rib_fracture_results
from medchallenge.dicom.seg import read_label_segmentation
from medchallenge.dicom.series import find_series, select_study_series
from medchallenge.dicom.sr import OperatingPoint, StudyCall, read_point_report, read_study_call
from medchallenge.errors import InputError
from medchallenge.gateway import load_config
from medchallenge.gateway.image_routes import run_image_route
from medchallenge.gateway.output_dicom import CHALLENGE_INTERFACES, generic_results, route_points
from medchallenge.io import write_dicom_atomic
from medchallenge.registry import CHALLENGES

CXR_COMMAND = [sys.executable, str(OBJECT_CXR_INFERENCE), "--device", "cpu"]


def cxr_config(tmp_path: Path, extra: str = "", image: str | None = None) -> Path:
    """A gateway configuration whose second route is object-cxr (its command, or `image`) with `extra` keys."""
    route = route_text("object-cxr", ["CR", "DX"], [], CXR_COMMAND)
    if image is not None:
        route = route.replace(f"command = {route.split('command = ')[1].splitlines()[0]}", f'image = "{image}"')
    path = tmp_path / "gateway.toml"
    path.write_text(config_text(tmp_path / "work", 11112, 4242, ["true"]) + route + extra)
    return path


def test_the_model_cards_name_the_operating_points_the_routes_default_to():
    """Each algorithm's README model card states the operating point of each of its outputs with probabilities, the
    same number as the registry's, from which the routes take their defaults."""
    for name in ("object-cxr", "tb-caverns", "ribfrac"):
        challenge = CHALLENGES[name]
        card = " ".join((REPO / "algorithms" / challenge.module / "README.md").read_text().split())
        (entry,) = re.findall(r"\*\*Operating point per output\*\*.*?(?= - \*\*)", card)
        assert challenge.algorithm.operating_points
        for slug, threshold in challenge.algorithm.operating_points:
            assert f"`{slug}` **{threshold}**" in entry, (name, slug)


def test_a_route_takes_the_model_cards_points_and_may_state_its_own(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        route = load_config(cxr_config(tmp_path, image="medchallenge/object-cxr-algorithm:0.1.0")).routes[1]
    assert route.operating_points == (("foreign-object-likelihood", 0.665), ("foreign-objects", 0.665))
    assert not route.keep_below_threshold and "[[route]] 2" not in caplog.text
    with caplog.at_level(logging.WARNING):  # another algorithm on the project's card: said in one line
        load_config(cxr_config(tmp_path, image="team-x/cxr:2"))
    assert "foreign-objects = 0.665 from the model card of the project's object-cxr algorithm" in caplog.text
    stated = load_config(cxr_config(tmp_path, "keep_below_threshold = true\n"
                                              "operating_points = {foreign-objects = 0.4}\n")).routes[1]
    assert stated.operating_points == (("foreign-object-likelihood", 0.665), ("foreign-objects", 0.4))
    assert route_points(stated)["foreign-objects"] == OperatingPoint(0.4, keep_below=True)
    tb = load_config(cxr_config(tmp_path)).routes[0]
    assert tb.operating_points == (("tb-cavern-boxes", 0.9),)


@pytest.mark.parametrize(("extra", "message"), [
    ("operating_points = {foreign-objects = 1.5}\n", "operating_points: foreign-objects = 1.5: expected a probability"),
    ("operating_points = {foreign-objects = true}\n", "operating_points: foreign-objects = True: expected a"),
    ("operating_points = {caption = 0.5}\n", "operating_points: 'caption' is no output with probabilities of this "
                                             "route (those: foreign-object-likelihood, foreign-objects)"),
    ("operating_points = 0.5\n", "operating_points = 0.5: expected dict"),
    ("keep_below_threshold = 1\n", "keep_below_threshold = 1: expected true or false"),
])
def test_bad_operating_points_are_refused_in_one_line(tmp_path, extra, message):
    with pytest.raises(InputError, match=re.escape(message)) as error:
        load_config(cxr_config(tmp_path, extra))
    assert "[[route]] 2" in str(error.value) and "\n" not in str(error.value)


def test_the_real_radiograph_without_foreign_object_is_reported_absent_with_no_finding(tmp_path):
    """RG1_UNCI.dcm (no foreign object; the model card: probability 0.499, strongest point 0.499) through the route's
    job as the gateway runs it: the SR calls it absent at the model card's 0.665 with its probability, and lists no
    Foreign body finding (before operating points: 20 points, each a finding); with keep_below_threshold its points
    are there, each marked below threshold. Its header's PixelSpacing of 0 is left out (panimg refuses a zero
spacing; the pixels are the real ones)."""
    from pydicom.data import get_testdata_file

    for keep in (False, True):
        route = load_config(cxr_config(tmp_path, f"keep_below_threshold = {str(keep).lower()}\n")).routes[1]
        study = tmp_path / f"study-{keep}"
        (study / "input").mkdir(parents=True)
        real = pydicom.dcmread(get_testdata_file("RG1_UNCI.dcm"))
        del real.PixelSpacing  # its 0 \\ 0 (no usable spacing) panimg refuses: left out, as most CR exports do
        write_dicom_atomic(study / "input" / "RG1_UNCI.dcm", real)
        run_image_route(route, study)
        (path,) = (study / "output" / "dicom").glob("*.dcm")
        call = read_study_call(path)
        assert call.present is False and call.threshold == 0.665 and 0.3 < call.probability < 0.665
        probability, points = read_point_report(path)
        assert probability == call.probability
        if keep:
            assert points and all(p.below_threshold and p.probability < 0.665 for p in points)
        else:
            assert points == []
        assert dciodvfy_errors(path) == []


def test_a_radiograph_with_findings_is_called_present_with_only_the_points_at_the_threshold(tmp_path):
    series, image, grid = converted_dx(tmp_path)
    found = [list(image.TransformContinuousIndexToPhysicalPoint(p)) for p in ((30.0, 40.0, 0.0), (5.0, 6.0, 0.0))]
    values = {"foreign-object-likelihood": 0.8,
              "foreign-objects": {"points": [{"point": found[0], "probability": 0.7},
                                             {"point": found[1], "probability": 0.3}]}}
    route_interface, kind = CHALLENGE_INTERFACES["object-cxr"]
    for keep, expected in ((False, [(30.5, 40.5, 0.7)]), (True, [(30.5, 40.5, 0.7), (5.5, 6.5, 0.3)])):
        points = {slug: OperatingPoint(0.665, keep) for slug in ("foreign-object-likelihood", "foreign-objects")}
        (sr,) = route_interface.write(values, series, grid, kind, points)
        assert read_study_call(sr) == StudyCall(True, 0.8, 0.665)
        assert [point[1:] for point in read_points(sr)] == expected
        assert [p.below_threshold for p in read_point_report(sr)[1]] == [False, True][:len(expected)]
        path = write_dicom_atomic(tmp_path / f"cxr-{keep}.dcm", sr)
        assert dciodvfy_errors(path) == []
        text = pydicom.dcmread(path).to_json()
        assert ("Below operating threshold" in text) == keep and "Threshold Value" in text


def test_tb_boxes_below_the_threshold_are_no_findings(tmp_path):
    from medchallenge.dicom.sr import read_box_report

    write_tiny_series(tmp_path / "ct", key="operating-tb", shape=(8, 6, 5))
    ((series, _),) = select_study_series(find_series(tmp_path / "ct"), ("CT",))
    route_interface, kind = CHALLENGE_INTERFACES["tb-caverns"]
    kind = dataclasses.replace(kind, algorithm_name="tb-caverns", algorithm_version="1")  # as job_datasets names it
    grid = SimpleNamespace(shape=(8, 6, 5))
    boxes = [{"voxel_bbox": [1, 1, 0, 4, 3, 2], "probability": 0.95},
             {"voxel_bbox": [2, 0, 1, 6, 5, 4], "probability": 0.5}]
    (sr,) = route_interface.write({"tb-cavern-boxes": {"boxes": boxes}}, series, grid, kind, {"tb-cavern-boxes":
                                                                                    OperatingPoint(0.9)})
    assert read_study_call(sr) == StudyCall(True, 0.95, 0.9)
    assert [b.probability for b in read_box_report(sr, series)] == [0.95]
    (sr,) = route_interface.write({"tb-cavern-boxes": {"boxes": boxes[1:]}}, series, grid, kind,
                                  {"tb-cavern-boxes": OperatingPoint(0.9)})
    assert read_study_call(sr) == StudyCall(False, 0.5, 0.9) and read_box_report(sr, series) == []
    assert dciodvfy_errors(write_dicom_atomic(tmp_path / "tb.dcm", sr)) == []


def test_ribfrac_segments_below_the_threshold_are_left_out_or_marked(tmp_path):
    import SimpleITK as sitk

    write_tiny_series(tmp_path / "ct", key="operating-rib", shape=(8, 6, 5))
    ((series, _),) = select_study_series(find_series(tmp_path / "ct"), ("CT",))
    labels = np.zeros((5, 6, 8), dtype=np.int32)
    labels[1:3, 1:3, 1:3], labels[3:5, 3:5, 4:7] = 1, 2
    detections = [SimpleNamespace(label_id=1, label_code=1, confidence=0.9),
                  SimpleNamespace(label_id=2, label_code=2, confidence=0.2)]
    prediction = SimpleNamespace(instances=sitk.GetImageFromArray(labels), detections=detections)
    (seg,) = rib_fracture_results(series, prediction, RIB_FRACTURE, OperatingPoint(0.5))
    assert seg.ContentDescription == "Fracture present: 0.9000 at threshold 0.5000"
    read, segments = read_label_segmentation(seg, series)
    assert [(s.label, s.below_threshold) for s in segments] == [(1, False)] and set(np.unique(read)) == {0, 1}
    (seg,) = rib_fracture_results(series, prediction, RIB_FRACTURE, OperatingPoint(0.5, keep_below=True))
    read, segments = read_label_segmentation(seg, series)
    assert [(s.label, s.below_threshold) for s in segments] == [(1, False), (2, True)]
    assert dciodvfy_errors(write_dicom_atomic(tmp_path / "seg.dcm", seg)) == []
    (sr,) = rib_fracture_results(series, prediction, RIB_FRACTURE, OperatingPoint(0.95))  # none at 0.95: an SR
    assert sr.Modality == "SR" and read_study_call(sr) == StudyCall(False, 0.9, 0.95)


def test_a_generic_routes_points_are_reported_at_its_operating_point(tmp_path):
    from test_gateway_points import GEOMETRIES, KIND, ROUTE, converted_ct

    series, image, grid = converted_ct(tmp_path, GEOMETRIES["oblique"])
    world = [list(image.TransformContinuousIndexToPhysicalPoint(v)) for v in ((3, 4, 2), (7, 5, 3))]
    value = {"points": [{"point": world[0], "probability": 0.9}, {"point": world[1], "probability": 0.2}]}
    route = dataclasses.replace(ROUTE, operating_points=(("nodules", 0.5),))
    (sr,) = generic_results(route, {"nodules": value, "volume-ml": 1.0}, series, grid, KIND, route_points(route))
    assert [p for *_, p in read_points(sr)] == [0.9]
    kept = dataclasses.replace(route, keep_below_threshold=True)
    (sr,) = generic_results(kept, {"nodules": value, "volume-ml": 1.0}, series, grid, KIND, route_points(kept))
    assert [p for *_, p in read_points(sr)] == [0.9, 0.2]
    assert dciodvfy_errors(write_dicom_atomic(tmp_path / "generic.dcm", sr)) == []
    assert "Below operating threshold" in pydicom.dcmread(tmp_path / "generic.dcm").to_json()
