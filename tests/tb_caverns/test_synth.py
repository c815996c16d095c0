"""The synthetic TB caverns cohort: determinism, file formats, boxes that match the masks, lung masks."""

from __future__ import annotations

import csv

import nibabel as nib
import numpy as np
import pytest

from medchallenge.synth.__main__ import main as synth_main
from medchallenge.synth.tb_caverns import GT_HEADER, case_rng, generate_case

SMALL = (160, 136, 44)


@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    out = tmp_path_factory.mktemp("tb")
    assert synth_main(["tb-caverns", "--out", str(out), "--cases", "4", "--seed", "3",
                       "--shape", *map(str, SMALL)]) == 0
    return out


def test_same_seed_same_case_and_cases_independent_of_cohort_size():
    a = generate_case(case_rng(5, 1), SMALL)
    b = generate_case(case_rng(5, 1), SMALL)
    c = generate_case(case_rng(5, 2), SMALL)
    assert np.array_equal(a.ct, b.ct) and np.array_equal(a.cavern_labels, b.cavern_labels)
    assert not np.array_equal(a.ct, c.ct)


def test_boxes_are_the_inclusive_extent_of_each_cavern_mask():
    case = generate_case(case_rng(0, 0), SMALL, n_caverns=2)
    assert len(case.boxes) >= 1
    for k, box in enumerate(case.boxes, start=1):
        idx = np.nonzero(case.cavern_labels == k)
        assert box.corners() == (idx[0].min(), idx[1].min(), idx[2].min(), idx[0].max(), idx[1].max(), idx[2].max())
        assert box.x1 < box.x2 and box.y1 < box.y2 and box.z1 < box.z2
        assert box.x2 < SMALL[0] and box.y2 < SMALL[1] and box.z2 < SMALL[2]


def test_caverns_are_air_inside_a_denser_wall_within_the_lungs():
    case = generate_case(case_rng(0, 0), SMALL, n_caverns=1)
    lesion = case.cavern_labels == 1
    hu = case.ct[lesion]
    assert np.mean(hu < -950) > 0.2  # an air cavity...
    assert np.mean(hu > -400) > 0.1  # ...with a soft-tissue wall
    # the rough v2 mask includes the whole cavern; the accurate v1 mask misses it
    assert np.all(case.lung_mask_v2[lesion] > 0)
    assert not np.any(case.lung_mask_v1[lesion])
    lung = case.lung_mask_v1 > 0
    assert -900 < case.ct[lung].mean() < -780  # lung parenchyma about -850 HU
    assert np.all(case.lung_mask_v2[lung] > 0)  # v2 is the more generous one
    assert set(np.unique(case.lung_mask_v1)) == {0, 1, 2}


def test_forced_empty_case_has_no_boxes():
    case = generate_case(case_rng(0, 0), SMALL, n_caverns=0)
    assert case.boxes == [] and not case.cavern_labels.any()


def test_cohort_files_and_ground_truth_formats(cohort):
    ids = [f"TST_{i:03d}" for i in range(1, 5)]
    for cid in ids:
        image = nib.load(cohort / "input" / f"{cid}.nii.gz")
        assert image.shape == SMALL and image.get_data_dtype() == np.int16
        assert np.allclose(np.abs(np.diag(image.affine)[:3]), (0.7, 0.7, 2.5))
        for version in ("v1", "v2"):
            mask = nib.load(cohort / "lung_masks" / version / f"{cid}.nii.gz")
            assert mask.shape == SMALL and np.allclose(mask.affine, image.affine)
    assert (cohort / "ground_truth" / "all_ids.csv").read_text() == "".join(f"{c}.nii.gz\n" for c in ids)
    lines = (cohort / "ground_truth" / "gt_boxes.csv").read_text().splitlines()
    assert lines[0] == GT_HEADER
    for row in csv.reader(lines[1:]):
        assert row[0] in ids  # id without extension
        x1, y1, z1, x2, y2, z2 = map(int, row[1:7])
        assert 0 <= x1 < x2 < SMALL[0] and 0 <= y1 < y2 < SMALL[1] and 0 <= z1 < z2 < SMALL[2]
        cx, cy, cz = map(int, row[7:10])
        assert x1 <= cx <= x2 and y1 <= cy <= y2 and z1 <= cz <= z2


def test_written_boxes_match_the_written_ct(cohort):
    """The cohort's boxes are those of generate_case with the same seed (files and API agree)."""
    lines = (cohort / "ground_truth" / "gt_boxes.csv").read_text().splitlines()[1:]
    expected = [b.corners() for i in range(4) for b in generate_case(case_rng(3, i), SMALL).boxes]
    assert [tuple(map(int, line.split(",")[1:7])) for line in lines] == expected
    ct = np.asarray(nib.load(cohort / "input" / "TST_001.nii.gz").dataobj)
    assert np.array_equal(ct, generate_case(case_rng(3, 0), SMALL).ct)
