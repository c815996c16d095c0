"""The synthetic radiographs: files and names, the official annotation format read back by the evaluator, objects
inside the image and over the lungs, support devices drawn but not annotated, determinism."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from medchallenge.formats.object_cxr import read_ground_truth
from medchallenge.synth.__main__ import main as synth_main
from medchallenge.synth.object_cxr_images import ANNOTATION_TYPE, DEVICE_KINDS, GT_HEADER, generate_image, render_radiograph

SIZE = 256


@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    out = tmp_path_factory.mktemp("cxr")
    assert synth_main(["object-cxr-images", "--out", str(out), "--images", "6", "--seed", "4", "--size",
                       str(SIZE)]) == 0
    return out


def test_files_names_and_official_format(cohort):
    names = sorted(p.name for p in (cohort / "input").iterdir())
    assert names == [f"{8001 + i:05d}.jpg" for i in range(6)]
    lines = (cohort / "ground_truth" / "annotations.csv").read_text().splitlines()
    assert lines[0] == GT_HEADER and [line.split(",")[0] for line in lines[1:]] == names
    for name in names:
        image = Image.open(cohort / "input" / name)
        assert image.format == "JPEG" and image.mode == "L" and max(image.size) == SIZE
    truth = read_ground_truth(cohort / "ground_truth" / "annotations.csv", strict=True)  # the evaluator's reader
    assert truth.image_paths == names and not truth.malformed and not truth.notes
    assert truth.num_object == sum(len(line.split(",")[1].split(";")) for line in lines[1:] if line.split(",")[1])


@pytest.mark.parametrize("index", range(6))
def test_objects_are_annotated_inside_the_image_and_over_the_lungs(index):
    radiograph = render_radiograph(np.random.default_rng([7, index]), 384, positive=True)
    rows, columns = radiograph.pixels.shape
    assert radiograph.objects
    for obj in radiograph.objects:
        kind, *values = obj.annotation.split(" ")
        assert int(kind) == ANNOTATION_TYPE[obj.kind]
        xs, ys = np.array(values[::2], int), np.array(values[1::2], int)
        assert xs.min() >= 0 and ys.min() >= 0 and xs.max() < columns and ys.max() < rows
        if kind in "01":
            assert len(values) == 4 and xs[0] < xs[1] and ys[0] < ys[1]
        else:
            assert len(values) >= 6 and len(values) % 2 == 0
        # metal is brighter than its surroundings: the object's box holds pixels well above the image median
        box = radiograph.pixels[ys.min():ys.max() + 1, xs.min():xs.max() + 1]
        assert box.max() > np.median(radiograph.pixels)


def test_negative_images_have_support_devices_but_no_annotation():
    seen = set()
    for index in range(40):
        radiograph = render_radiograph(np.random.default_rng([3, index]), 128, positive=False)
        assert radiograph.objects == [] and radiograph.annotation == ""
        seen.update(radiograph.devices)
        if len(seen) == len(DEVICE_KINDS):
            break
    assert seen == set(DEVICE_KINDS)


def test_ecg_snaps_are_drawn_where_reported():
    for index in range(40):
        radiograph = render_radiograph(np.random.default_rng([3, index]), 512, positive=False)
        if "ecg" in radiograph.devices:
            break
    pixels = radiograph.pixels.astype(float)
    for x, y in radiograph.device_points_px:
        r, c = int(round(y)), int(round(x))
        if 3 <= r < pixels.shape[0] - 3 and 3 <= c < pixels.shape[1] - 3:
            around = pixels[max(r - 12, 0):r + 13, max(c - 12, 0):c + 13]
            assert pixels[r - 1:r + 2, c - 1:c + 2].max() >= np.percentile(around, 90)


def test_same_seed_same_image_independent_of_cohort_position():
    a = generate_image(9, 3, 128, 0.5)
    b = generate_image(9, 3, 128, 0.5)
    c = generate_image(9, 4, 128, 0.5)
    assert np.array_equal(a.pixels, b.pixels) and a.annotation == b.annotation
    assert a.pixels.shape != c.pixels.shape or not np.array_equal(a.pixels, c.pixels)
