"""A generic image route's `Multiple points` on a CT: grand-challenge's world coordinates (mm of the image panimg
converted from the series, the one the job was given) become SCOORD points on the series' slices in an SR. A point
placed at a known voxel of the converted image reads back from the SR on the slice and pixel holding that voxel's
data, for series with non-trivial origin, spacing (non-square pixels: panimg swaps PixelSpacing) and orientation,
their positions decreasing or rising (and on a DX radiograph with PixelSpacing); bad points are refused in one
line; `--check` takes points on a CT; a generic image route runs end to end on a CT."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pydicom
import pytest
from dicom_helpers import dciodvfy_errors

from medchallenge.dicom.series import find_series, select_study_series
from medchallenge.dicom.synthetic import SyntheticStudy, write_ct_series
from medchallenge.errors import InputError
from medchallenge.gateway.config import Route
from medchallenge.jobs.image_grid import read_image_grid
from medchallenge.gateway.output_dicom import GENERIC_FINDING, generic_results
from medchallenge.io import write_dicom_atomic
from medchallenge.jobs.uploads import convert

SHAPE = (16, 12, 6)  # x, y, z voxels
ROUTE = Route("lungs", ("CT",), (), "generic", 60, image="team/lungs:1", input_socket="ct-image",
              outputs=(("nodules", "Multiple points"), ("volume-ml", "Float")))
KIND = dataclasses.replace(GENERIC_FINDING, algorithm_name="lungs", algorithm_version="1")


def ras_affine(spacing: tuple[float, float, float], angle_degrees: float, origin_ras: tuple[float, float, float]):
    """A RAS voxel->world affine: columns and rows turned by `angle_degrees` about the slice normal, the slices
    stepping by spacing[2] mm along it (negative: positions decrease as the slices are written)."""
    a = math.radians(angle_degrees)
    rotation = np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])
    affine = np.eye(4)
    affine[:3, :3] = np.diag([-1.0, -1.0, 1.0]) @ rotation @ np.diag(spacing)
    affine[:3, 3] = origin_ras
    return affine


GEOMETRIES = {  # non-square pixels, positions falling; square pixels turned 30 degrees, positions rising
    "falling-z": ras_affine((0.7, 0.8, -2.5), 0.0, (10.0, -20.0, -300.0)),
    "oblique": ras_affine((0.75, 0.75, 1.25), 30.0, (-4.0, 7.5, 120.0)),
}


def converted_ct(folder, affine):
    """A random CT series written with `affine`, the study's series as the gateway chooses it, panimg's conversion
    of it (as image routes convert it) and that image's grid."""
    import SimpleITK as sitk

    volume = np.random.default_rng(5).integers(-1000, 1500, size=SHAPE).astype(np.int16)
    write_ct_series(folder / "ct", volume, affine, SyntheticStudy(f"points-{folder.name}", "PAT_POINTS"))
    ((series, _),) = select_study_series(find_series(folder / "ct"), ("CT",))
    (image,) = convert(folder / "ct", folder / "converted", None, "test")
    grid = read_image_grid(image.file, SHAPE)
    return series, sitk.ReadImage(str(image.file)), grid


def converted_dx(folder):
    """A 48 x 64 DX radiograph with PixelSpacing 0.5 (rows) x 0.25 (columns) mm, its series and panimg's conversion
    of it (the image and its grid)."""
    import SimpleITK as sitk

    from medchallenge.dicom.synthetic import radiograph_dataset

    ds = radiograph_dataset(np.zeros((64, 48), np.uint8), SyntheticStudy("points-dx", "PAT_DX"))
    ds.PixelSpacing = ["0.5", "0.25"]
    write_dicom_atomic(folder / "dx" / "dx.dcm", ds)
    (series,) = find_series(folder / "dx")
    (image,) = convert(folder / "dx", folder / "converted", None, "test")
    return series, sitk.ReadImage(str(image.file)), read_image_grid(image.file, (48, 64, 1))


def read_points(sr) -> list[tuple[str, float, float, float]]:
    """(referenced SOP instance UID, x, y, probability) of each SCOORD point of the SR, read with highdicom."""
    import highdicom as hd
    from pydicom.sr.codedict import codes

    points = []
    for group in hd.sr.ComprehensiveSR.from_dataset(sr).content.get_planar_roi_measurement_groups():
        assert group.roi.graphic_type == hd.sr.GraphicTypeValues.POINT
        (x, y), = group.roi.value
        uid = group.roi.ContentSequence[0].ReferencedSOPSequence[0].ReferencedSOPInstanceUID
        (probability,) = group.get_measurements(name=codes.DCM.Probability)
        points.append((str(uid), float(x), float(y), float(probability.value)))
    return points


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_world_points_land_on_the_voxel_they_name(geometry, tmp_path):
    """Points at known (continuous) voxels of the converted image -> SCOORD points on the slice nearest to them, at
    the pixel whose stored value is that voxel's; on square pixels the slice's own geometry (ImagePositionPatient,
    ImageOrientationPatient, PixelSpacing) puts the point back at its world position, up to its distance from the
    slice's plane. The SR is valid for dciodvfy and the points' names are not in it."""
    import SimpleITK as sitk

    series, image, grid = converted_ct(tmp_path, GEOMETRIES[geometry])
    # voxel centres, corners of the volume, and off-centre points (within half a voxel of the bounds)
    voxels = [(3, 4, 2), (0, 0, 0), (15, 11, 5), (7.3, 5.8, 3.4), (-0.49, 11.45, 5.49), (9.6, 2.2, 0.51)]
    world = [image.TransformContinuousIndexToPhysicalPoint(v) for v in voxels]
    value = {"type": "Multiple points", "version": {"major": 1, "minor": 0}, "name": "evil\x1b[2J name",
             "points": [{"name": "\u202enodule", "point": list(w), "probability": p}
                        for w, p in zip(world, (0.9, 0.1, 1.0, 0.5, 0.25, 0.75))]}
    (sr,) = generic_results(ROUTE, {"nodules": value, "volume-ml": 3.5}, series, grid, KIND)
    path = write_dicom_atomic(tmp_path / "points.dcm", sr)
    assert dciodvfy_errors(path) == []
    text = pydicom.dcmread(path).to_json()
    assert "evil" not in text and "nodule\"" not in text and "\u202e" not in text
    slices = {uid: header for uid, header in zip(series.sop_instance_uids, series.headers)}
    files = dict(zip(series.sop_instance_uids, series.files))
    stored = sitk.GetArrayFromImage(image)  # (z, y, x): the data the job was given
    read = read_points(sr)
    assert [p for *_, p in read] == [0.9, 0.1, 1.0, 0.5, 0.25, 0.75]
    for (i, j, k), point, (uid, x, y, _) in zip(voxels, world, read):
        assert (x, y) == pytest.approx((min(max(i, -0.5), 15.5) + 0.5, min(max(j, -0.5), 11.5) + 0.5), abs=1e-4)
        header = slices[uid]
        assert uid == series.sop_instance_uids[min(int(math.floor(k + 0.5)), 5)]
        pixels = pydicom.dcmread(files[uid]).pixel_array.astype(np.int32) + int(header.RescaleIntercept)
        column, row = min(max(round(i), 0), 15), min(max(round(j), 0), 11)
        assert pixels[row, column] == stored[min(int(math.floor(k + 0.5)), 5), row, column]
        position = np.asarray(header.ImagePositionPatient, dtype=float)
        orientation = np.asarray(header.ImageOrientationPatient, dtype=float)
        normal = np.cross(orientation[:3], orientation[3:])
        off_plane = float((np.asarray(point) - position) @ normal)
        assert abs(off_plane) <= 0.5 * grid.spacing[2] + 1e-6  # the nearest slice
        if geometry == "oblique":  # square pixels: the slice's own geometry gives the point back in its plane
            row_spacing, column_spacing = (float(v) for v in header.PixelSpacing)
            back = position + (x - 0.5) * column_spacing * orientation[:3] + (y - 0.5) * row_spacing * orientation[3:]
            assert np.allclose(back + off_plane * normal, point, atol=1e-3)
    if geometry == "falling-z":  # positions fall as the series was written: slice 0 of the image is the last file
        assert float(slices[read[1][0]].ImagePositionPatient[2]) == pytest.approx(-312.5)


@pytest.mark.parametrize(("point", "message"), [
    ({"point": [math.nan, 0.0, 0.0]}, r"nodules: points\[0\]: x: expected a number"),
    ({"point": [0.0, math.inf, 0.0]}, r"nodules: points\[0\]: y: expected a number"),
    ({"point": [1.0, 2.0]}, r"nodules: points\[0\]: point must be \[x, y, z\] in mm"),
    ({"point": "1 2 3"}, r"nodules: points\[0\]: point must be \[x, y, z\] in mm"),
    ({"point": ["1", 2.0, 3.0]}, r"nodules: points\[0\]: x: expected a number"),
    ({"voxel": (3, 4, -0.6)}, r"nodules: points\[0\]: outside the 16x12x6 image \(more than half a voxel"),
    ({"voxel": (16.1, 4, 2)}, r"nodules: points\[0\]: outside the 16x12x6 image"),
    ({"voxel": (3, 4, 2), "probability": 1.5}, r"nodules: points\[0\]: probability: expected a number from 0 to 1"),
    ({"voxel": (3, 4, 2), "probability": True}, r"nodules: points\[0\]: probability: expected a number from 0 to 1"),
])
def test_bad_points_are_refused_in_one_line(point, message, tmp_path):
    series, image, grid = converted_ct(tmp_path, GEOMETRIES["falling-z"])
    if "voxel" in point:
        point = {"point": list(image.TransformContinuousIndexToPhysicalPoint(point.pop("voxel"))), **point}
    with pytest.raises(InputError, match=message) as refused:
        generic_results(ROUTE, {"nodules": {"points": [point]}, "volume-ml": 1.0}, series, grid, KIND)
    assert "\n" not in str(refused.value)


def test_too_many_points_or_slices_that_do_not_match_are_refused(tmp_path):
    """More points than a result may hold; an image with another slice count than the series; a series whose
    InstanceNumbers do not follow its positions (panimg stacks by InstanceNumber: its slice k would not be the
    series' slice k)."""
    series, image, grid = converted_ct(tmp_path, GEOMETRIES["falling-z"])
    centre = list(image.TransformContinuousIndexToPhysicalPoint((3, 4, 2)))
    with pytest.raises(InputError, match=r"nodules: points: 101 entries, more than the 100 a result may hold"):
        generic_results(ROUTE, {"nodules": {"points": [{"point": centre}] * 101}, "volume-ml": 1.0}, series, grid,
                        KIND)
    (sr,) = generic_results(ROUTE, {"nodules": {"points": [{"point": centre}] * 100}, "volume-ml": 1.0}, series,
                            grid, KIND)
    assert len(read_points(sr)) == 100
    with pytest.raises(InputError, match="nodules: the image the job was given has 5 slices, the series 6"):
        generic_results(ROUTE, {"nodules": {"points": [{"point": centre}]}, "volume-ml": 1.0}, series,
                        dataclasses.replace(grid, shape=(16, 12, 5)), KIND)
    series.headers[2].InstanceNumber, series.headers[3].InstanceNumber = \
        series.headers[3].InstanceNumber, series.headers[2].InstanceNumber
    with pytest.raises(InputError, match="nodules: the series' InstanceNumbers do not follow its slice positions"):
        generic_results(ROUTE, {"nodules": {"points": [{"point": centre}]}, "volume-ml": 1.0}, series, grid, KIND)
    # no points: nothing to place, the SR holds the other values
    (sr,) = generic_results(ROUTE, {"nodules": {"points": []}, "volume-ml": 1.0}, series, grid, KIND)
    assert read_points(sr) == []


def test_points_on_a_radiograph_with_pixel_spacing_are_millimetres_too(tmp_path):
    """A DX radiograph with PixelSpacing: its points are world mm of panimg's conversion (its spacing (x, y) =
    PixelSpacing as stored), the SCOORD is at the pixel they name; z (the plane's, 0 or 0.5 on grand-challenge) is not
    checked on a 2-D image."""
    series, _, grid = converted_dx(tmp_path)
    assert grid.spacing[:2] == (0.5, 0.25)
    route = dataclasses.replace(ROUTE, input_socket="chest-x-ray")
    points = {"points": [{"point": [5.0, 2.5, 0.5], "probability": 0.6}, {"point": [23.7, 15.8, 0.0]}]}
    (sr,) = generic_results(route, {"nodules": points, "volume-ml": 0.0}, series, grid, KIND)
    uid = series.sop_instance_uids[0]
    assert read_points(sr) == [(uid, 10.5, 10.5, 0.6), (uid, pytest.approx(47.9), pytest.approx(63.7), 1.0)]
    assert dciodvfy_errors(write_dicom_atomic(tmp_path / "dx-points.dcm", sr)) == []
    with pytest.raises(InputError, match=r"nodules: points\[0\]: outside the 48x64x1 image"):
        generic_results(route, {"nodules": {"points": [{"point": [24.0, 1.0, 0.0]}]}, "volume-ml": 0.0}, series,
                        grid, KIND)


def test_the_object_cxr_interface_reads_its_points_as_millimetres_on_a_dx_with_pixel_spacing(tmp_path):
    """The object-cxr interface's foreign-objects are Multiple points too: world mm of the radiograph the job was
    given (the project's own algorithm writes TransformContinuousIndexToPhysicalPoint of its pixels), so on a DX with
    PixelSpacing they land on the pixels the algorithm found, not at mm read as pixels."""
    from medchallenge.dicom.detectors import FOREIGN_OBJECT
    from medchallenge.gateway.output_dicom import CHALLENGE_INTERFACES

    series, image, grid = converted_dx(tmp_path)
    found = list(image.TransformContinuousIndexToPhysicalPoint((30.0, 40.0, 0.0)))
    route_interface, kind = CHALLENGE_INTERFACES["object-cxr"]
    (sr,) = route_interface.write({"foreign-object-likelihood": 0.8,
                                   "foreign-objects": {"points": [{"point": found, "probability": 0.7},
                                                                  {"point": [1.0, 1.0, 0.0]}]}},
                                  series, grid, kind)
    uid = series.sop_instance_uids[0]
    assert kind == FOREIGN_OBJECT
    assert [point[1:] for point in read_points(sr)] == [(30.5, 40.5, 0.7), (2.5, 4.5, 0.8)]
    assert all(point[0] == uid for point in read_points(sr))
    assert dciodvfy_errors(write_dicom_atomic(tmp_path / "cxr-points.dcm", sr)) == []


def test_check_takes_points_on_a_ct_and_refuses_unmapped_kinds(tmp_path):
    from test_gateway_images import check, gateway_config, image_route

    config = tmp_path / "gateway.toml"
    route = image_route("lungs", ["CT"], [], "team/lungs:1", "generic", None) + 'input = "ct-image"\n'
    config.write_text(gateway_config(tmp_path / "work", 11112, 104)
                      + route + 'outputs = [{slug = "nodules", kind = "Multiple points"}]\n')
    done = check(config)
    assert done.returncode == 0, done.stderr
    config.write_text(gateway_config(tmp_path / "work", 11112, 104)
                      + route + 'outputs = [{slug = "nodules", kind = "Multiple points"}, '
                                '{slug = "outline", kind = "Multiple polygons"}]\n')
    done = check(config)
    (line,) = done.stderr.strip().splitlines()
    assert done.returncode != 0 and "output 'outline' of kind 'Multiple polygons': no DICOM mapping" in line


def test_an_image_route_puts_its_points_on_the_ct_slice_they_name(docker_compose, repo, tmp_path):
    """End to end on loopback: a CT (non-square pixels, positions falling as written) with one bright voxel goes to
    a generic route whose image (tests/job_images/points) returns that voxel's centre in world mm; the SR in the
    PACS holds one SCOORD point on the slice written with the bright voxel, at its pixel."""
    import os
    import subprocess

    from gateway_helpers import FakePacs, GatewayProcess, free_port, send_files, states, wait_for
    from test_gateway_images import check, gateway_config, image_route

    image = f"medchallenge-test/points-algorithm:{os.environ.get('MEDCHALLENGE_VERSION') or '0.1.0'}"
    subprocess.run(["docker", "build", "--quiet", "--tag", image, str(repo / "tests" / "job_images" / "points")],
                   check=True, capture_output=True)
    volume = np.random.default_rng(6).integers(-1000, 1500, size=SHAPE).astype(np.int16)
    volume[5, 7, 4] = 2500  # column 5, row 7 of the fifth slice written
    files = write_ct_series(tmp_path / "ct", volume, GEOMETRIES["falling-z"], SyntheticStudy("points-e2e", "PAT_P"))
    work, pacs, port = tmp_path / "work", FakePacs(), free_port()
    config = tmp_path / "gateway.toml"
    config.write_text(gateway_config(work, port, pacs.port) + image_route("nodules", ["CT"], [], image, "generic", None)
                      + 'input = "ct-image"\noutputs = [{slug = "nodules", kind = "Multiple points"}]\n')
    assert check(config).returncode == 0
    gateway = GatewayProcess(config, tmp_path / "gateway.log")
    try:
        gateway.wait_ready()
        assert set(send_files(files, port)) == {0}
        (sr,) = wait_for(lambda: list(pacs.stored().values()), 240, "the SR of the points")
    finally:
        gateway.stop()
        pacs.close()
    assert states(work)["sent"] == 1
    assert read_points(sr) == [(str(pydicom.dcmread(files[4]).SOPInstanceUID), 5.5, 7.5, 0.75)]


def test_a_ct_whose_instance_numbers_do_not_follow_its_positions_is_refused_before_the_job_runs(tmp_path):
    """Every CT route (tb-caverns boxes, RibFrac labels, generic outputs) maps the converted image's slice k back to
    the series' slice k in position order; panimg stacks by InstanceNumber, so a series whose InstanceNumbers do not
    follow its positions is refused in one line before the job starts (the job would run on a reordered volume)."""
    import sys

    from medchallenge.gateway.image_routes import run_image_route

    study = tmp_path / "study"
    volume = np.random.default_rng(5).integers(-1000, 1500, size=SHAPE).astype(np.int16)
    paths = write_ct_series(study / "input", volume, GEOMETRIES["oblique"], SyntheticStudy("order", "PAT_ORDER"))
    swapped = [pydicom.dcmread(path) for path in paths[2:4]]
    swapped[0].InstanceNumber, swapped[1].InstanceNumber = swapped[1].InstanceNumber, swapped[0].InstanceNumber
    for path, dataset in zip(paths[2:4], swapped):
        dataset.save_as(path)
    marker = tmp_path / "the-job-ran"
    route = dataclasses.replace(ROUTE, image=None, command=(sys.executable, "-c", f"open({str(marker)!r}, 'w')"))
    with pytest.raises(InputError) as refused:
        run_image_route(route, study)
    assert str(refused.value) == ("detector lungs: study study: the series' InstanceNumbers do not follow its slice "
                                  "positions, so the image the job was given (slices stacked by InstanceNumber) "
                                  "cannot be mapped back onto its slices")
    assert not marker.exists() and not (study / "job" / "result.json").exists()
