"""The synthetic rib-fracture CTs: files and names, label codes, masks, fracture types visible in the volume."""

from __future__ import annotations

import csv
import json
import shutil

import numpy as np
import pytest
import SimpleITK as sitk

from medchallenge.evaluators.ribfrac import main as evaluate_main
from medchallenge.synth.__main__ import main as synth_main
from medchallenge.synth.ribfrac_ct import CODES, IGNORE_CODE, case_rng, generate_case

SMALL = (128, 112, 56)


@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    out = tmp_path_factory.mktemp("ribct")
    assert synth_main(["ribfrac-ct", "--out", str(out), "--cases", "5", "--seed", "2",
                       "--shape", *map(str, SMALL)]) == 0
    return out


def test_files_names_types_and_geometry(cohort):
    ids = [f"RibFrac{501 + i}" for i in range(5)]
    assert sorted(p.name for p in (cohort / "input").iterdir()) == [f"{i}-image.nii.gz" for i in ids]
    assert sorted(p.name for p in (cohort / "ground_truth").iterdir()) == sorted(
        [f"{i}-label.nii.gz" for i in ids] + ["ribfrac-info.csv"])
    for pid in ids:
        ct = sitk.ReadImage(str(cohort / "input" / f"{pid}-image.nii.gz"))
        label = sitk.ReadImage(str(cohort / "ground_truth" / f"{pid}-label.nii.gz"))
        assert ct.GetPixelID() == sitk.sitkInt16 and label.GetPixelID() == sitk.sitkUInt8
        assert ct.GetSize() == SMALL == label.GetSize()
        assert ct.GetSpacing() == pytest.approx(label.GetSpacing())
        sx, sy, sz = ct.GetSpacing()
        assert 0.6 <= sx == sy <= 0.9 and 0.625 <= sz <= 2.5
        array = sitk.GetArrayViewFromImage(ct)
        assert array.min() < -900 and array.max() > 500  # air and bone


def test_info_csv_rows_match_the_masks(cohort):
    with open(cohort / "ground_truth" / "ribfrac-info.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["public_id", "label_id", "label_code"]
    by_case: dict[str, list[tuple[int, int]]] = {}
    for row in rows:
        by_case.setdefault(row["public_id"], []).append((int(row["label_id"]), int(row["label_code"])))
    assert len(by_case) == 5
    for pid, case_rows in by_case.items():
        assert case_rows[0] == (0, 0)  # the background row
        labels = [label for label, _ in case_rows[1:]]
        assert labels == list(range(1, len(labels) + 1))
        assert all(code in (*CODES.values(), IGNORE_CODE) for _, code in case_rows[1:])
        mask = sitk.GetArrayFromImage(sitk.ReadImage(str(cohort / "ground_truth" / f"{pid}-label.nii.gz")))
        assert set(np.unique(mask)) == set(range(len(labels) + 1))  # every instance drawn, nothing else


def test_ground_truth_scores_itself_perfectly_through_the_evaluator(cohort, tmp_path):
    """The ground-truth folder is read as is; the masks as a submission find every fracture."""
    predictions = tmp_path / "predictions"
    predictions.mkdir()
    rows = ["public_id,label_id,confidence,label_code"]
    with open(cohort / "ground_truth" / "ribfrac-info.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            code = 1 if int(row["label_code"]) == IGNORE_CODE else row["label_code"]
            rows.append(f"{row['public_id']},{row['label_id']},1.0,{code}")
    (predictions / "pred.csv").write_text("\n".join(rows) + "\n")
    for path in (cohort / "ground_truth").glob("*-label.nii.gz"):
        shutil.copy(path, predictions / path.name.replace("-label", ""))
    assert evaluate_main(["--input", str(predictions), "--ground-truth", str(cohort / "ground_truth"),
                          "--output", str(tmp_path / "metrics"), "--no-progress", "--no-plots"]) == 0
    aggregates = json.loads((tmp_path / "metrics" / "metrics.json").read_text())["aggregates"]
    assert aggregates["max_recall"] == pytest.approx(1.0)
    assert aggregates["dice"] == pytest.approx(1.0)


def test_same_seed_same_case_and_cases_independent_of_cohort_size():
    a, b, c = (generate_case(case_rng(seed, index), SMALL) for seed, index in ((4, 1), (4, 1), (4, 2)))
    assert np.array_equal(a.ct, b.ct) and np.array_equal(a.labels, b.labels)
    assert not np.array_equal(a.ct, c.ct)


def test_default_shape_is_512_square_with_250_to_350_slices_and_scanner_variety():
    cases = [generate_case(case_rng(1, i), (8, 8, 8)) for i in range(12)]
    assert len({c.spacing for c in cases}) == 12
    rng = case_rng(1, 0)
    # the default shape is drawn after the chest and the spacing: check its draw on the same stream
    from medchallenge.synth.ribfrac_ct import Chest, SLICE_THICKNESSES_MM
    Chest(rng), rng.uniform(0.6, 0.9), rng.choice(SLICE_THICKNESSES_MM)
    assert 250 <= int(rng.integers(250, 351)) <= 350


def fracture_changes(seed: int, index: int):
    """The same case with none and with one of its fractures: per fracture, bone voxels removed and added in its
    mask."""
    intact = generate_case(case_rng(seed, index), (160, 160, 80), drawn=())
    assert not intact.labels.any()
    changes = []
    for f in intact.fractures:
        case = generate_case(case_rng(seed, index), (160, 160, 80), drawn=(f.label,))
        mask = case.labels == f.label
        assert not np.any(case.labels[~mask])
        bone, bone_intact = (case.ct > 150) & mask, (intact.ct > 150) & mask  # marrow and cortex
        changes.append((f, int((bone_intact & ~bone).sum()), int((bone & ~bone_intact).sum()), int(mask.sum())))
    return changes


def test_fracture_types_are_visible_and_different():
    """Buckle adds bone (a bulge) and removes none; nondisplaced removes a thin line; displaced removes a gap and
    moves the end (bone appears where there was none); all inside the fracture's own mask."""
    seen = set()
    for index in range(5):
        for f, removed, added, size in fracture_changes(7, index):
            seen.add(f.appearance)
            assert size > 50, f
            if f.appearance == "buckle":
                assert added > 10 and removed < added / 4, (f, removed, added)
            elif f.appearance == "nondisplaced":
                assert removed > 3 and added < removed / 2 + 3, (f, removed, added)
            else:
                assert removed > 8 and added > 3, (f, removed, added)
    assert seen == {"buckle", "nondisplaced", "displaced"}


def test_segmental_fractures_are_two_sites_on_one_rib_and_some_cases_have_none():
    segmental, empty = 0, 0
    for index in range(25):  # coarse whole-chest volumes
        case = generate_case(case_rng(11, index), (120, 120, 90), spacing=(3.2, 3.2, 4.0))
        empty += not case.fractures
        assert len(case.fractures) <= 8
        pairs = [f for f in case.fractures if f.code == CODES["segmental"]]
        segmental += len(pairs)
        assert len(pairs) % 2 == 0
        for first, second in zip(pairs[::2], pairs[1::2]):
            assert (first.side, first.rib) == (second.side, second.rib) and first.theta < second.theta
    assert segmental > 0 and 1 <= empty <= 12
