"""Headers and paths (issue 22, part 5): implausible NIfTI spacings, broken DICOM series fields, a CT too small to be one,
NaN/Inf voxels that ITK reads as 0, inputs.json paths that leave the input folder, and team names that are formulas
or reorder the page. Each is one line naming the file (or series) and the field, or neutralised."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import SimpleITK as sitk

from medchallenge.errors import InputError
from medchallenge.imaging import read_ct

from dicom_helpers import write_tiny_series

MODELS = Path(__file__).parents[2] / "algorithms"


def nifti_ct(path: Path, pixdim3: float | None = None, shape=(16, 12, 10), affine=None) -> Path:
    """An int16 CT written by nibabel (a participant's tool), optionally with pixdim[3] forced."""
    image = nib.Nifti1Image(np.full(shape, -1000, np.int16), np.diag([0.7, 0.7, 2.5, 1]) if affine is None else affine)
    if pixdim3 is not None:
        image.header["pixdim"][3] = pixdim3
    nib.save(image, path)
    return path


@pytest.mark.parametrize("value", [1e30, 1e4, 0.0, float("nan"), float("inf"), -2.5, 1e-30])
def test_an_implausible_nifti_spacing_is_one_line_naming_the_field(tmp_path, value):
    # ITK reads 0, NaN and infinity as 1.0 and a negative one as its absolute value: the stored pixdim is checked
    path = nifti_ct(tmp_path / "ct.nii.gz", value)
    stored = re.escape(f"{value:g}")
    with pytest.raises(InputError, match=rf"ct.nii.gz: pixdim\[3\] = {stored}: expected a voxel spacing between "
                                         r"0.01 and 100 mm"):
        read_ct(path)


def test_a_plausible_spacing_passes(tmp_path):
    image, array = read_ct(nifti_ct(tmp_path / "ct.nii.gz"))
    assert image.GetSpacing() == pytest.approx((0.7, 0.7, 2.5)) and array.shape == (10, 12, 16)


@pytest.mark.parametrize("name", ["tb_caverns", "ribfrac"])
def test_the_algorithms_give_one_error_line_for_a_spacing_of_1e30(tmp_path, capsys, name):
    from importlib import import_module

    from medchallenge.algorithms.runner import main

    (tmp_path / "in").mkdir()
    nifti_ct(tmp_path / "in" / "case.nii.gz", 1e30, shape=(32, 32, 16))
    algorithm = import_module(f"medchallenge.algorithms.{name}").ALGORITHM
    assert main(algorithm, ["--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--device", "cpu"],
                baked_model_dir=MODELS / name / "model") == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith("case.nii.gz: pixdim[3] = 1e+30: expected a voxel spacing between "
                                                 "0.01 and 100 mm")


def test_a_1_x_1_x_3000_ct_is_refused_not_reported_without_caverns(tmp_path):
    with pytest.raises(InputError, match=r"thin.nii.gz: a CT of 1 x 1 x 3000 voxels; a CT needs at least 8 voxels "
                                         r"along each axis"):
        read_ct(nifti_ct(tmp_path / "thin.nii.gz", shape=(1, 1, 3000)))


def test_a_1_x_1_x_3000_dicom_ct_is_refused(tmp_path):
    from medchallenge.dicom.series import find_series, read_volume, select_study_series

    write_tiny_series(tmp_path / "dicom", shape=(1, 1, 40))
    ((series, spacing),) = select_study_series(find_series(tmp_path / "dicom"), ("CT",))
    with pytest.raises(InputError, match=r"a CT of 1 x 1 x 40 voxels; a CT needs at least 8 voxels"):
        read_ct(series.files[0].parent, read_volume(series, spacing))


def nan_volume(path: Path, value: float) -> Path:
    """A float mask as nibabel writes a participant's float array (scl_slope NaN, float32 voxels)."""
    array = np.zeros((6, 5, 4), np.float32)
    array[1:3, 1:3, 1:3] = 1
    array[4, 4, 3] = value
    nib.save(nib.Nifti1Image(array, np.eye(4)), path)
    return path


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_nan_or_infinite_nifti_voxels_that_itk_reads_as_0_are_refused_for_the_algorithms(tmp_path, value):
    path = nan_volume(tmp_path / "ct.nii.gz", value)
    assert np.isfinite(sitk.GetArrayFromImage(sitk.ReadImage(str(path)))).all()  # ITK: 0, without a word
    with pytest.raises(InputError, match=r"ct.nii.gz: 1 NaN or infinite voxel\(s\) in the CT image; expected finite"):
        read_ct(path)


def test_nan_voxels_in_an_uncompressed_nifti_mask_are_counted_too(tmp_path):
    from medchallenge.formats.ribfrac import nifti_non_finite_labels

    assert nifti_non_finite_labels(nan_volume(tmp_path / "mask.nii", float("nan"))) == 1
    assert nifti_non_finite_labels(nifti_ct(tmp_path / "int.nii")) == 0


@pytest.fixture
def ribfrac_cohort(tmp_path) -> tuple[Path, Path]:
    from medchallenge.synth.__main__ import main as synth_main

    assert synth_main(["ribfrac", "--out", str(tmp_path / "rf"), "--cases", "2", "--shape", "24", "20", "16",
                       "--seed", "3"]) == 0
    return tmp_path / "rf" / "predictions", tmp_path / "rf" / "ground_truth"


def test_the_ribfrac_evaluator_notes_nan_mask_voxels_and_strict_refuses_them(ribfrac_cohort, tmp_path):
    from medchallenge.evaluators.ribfrac import main

    predictions, ground_truth = ribfrac_cohort
    volume = sorted(predictions.glob("*.nii.gz"))[0]
    labels = np.asanyarray(nib.load(volume).dataobj).astype(np.float32)
    labels[0, 0, 0] = np.nan  # a background voxel: the official code's uint8 cast reads it as 0
    nib.save(nib.Nifti1Image(labels, nib.load(volume).affine), volume)
    assert main(["--input", str(predictions), "--ground-truth", str(ground_truth), "--output", str(tmp_path / "m"),
                 "--no-plots", "--workers", "1"]) == 0
    notes = json.loads((tmp_path / "m" / "metrics.json").read_text())["meta"]["notes"]
    assert any(note.startswith(f"1 NaN or infinite voxel(s) in 1 mask(s) ({volume.name}): read as label 0") for note in
               notes)
    assert main(["--input", str(predictions), "--ground-truth", str(ground_truth), "--output", str(tmp_path / "s"),
                 "--no-plots", "--workers", "1", "--strict"]) == 1


def dicom_series_with(tmp_path: Path, keyword: str, value, vr: str) -> Path:
    """A tiny CT series whose slice 2 has `keyword` set to `value`, written as raw bytes (as a sender may: pydicom
    refuses to write such values)."""
    import struct

    import pydicom

    _, _, paths = write_tiny_series(tmp_path / "dicom", shape=(8, 8, 10))
    raw_value = value if isinstance(value, str) else "\\".join(value)
    placeholder = "9" * len(raw_value)
    ds = pydicom.dcmread(paths[2])
    ds.add_new(pydicom.datadict.tag_for_keyword(keyword), vr, placeholder)
    ds.save_as(paths[2])
    tag = pydicom.datadict.tag_for_keyword(keyword)
    element = struct.pack("<HH", tag >> 16, tag & 0xFFFF) + vr.encode()
    padded = lambda text: text.encode() + b" " * (len(text) % 2)  # noqa: E731
    raw = paths[2].read_bytes()
    at = raw.index(element)
    paths[2].write_bytes(raw[:at] + raw[at:].replace(padded(placeholder), padded(raw_value), 1))
    return tmp_path / "dicom"


@pytest.mark.parametrize("keyword, value, vr, message", [
    ("NumberOfFrames", "abc", "IS", r"series [\d.]+: NumberOfFrames 'abc' is not a whole number"),
    ("GantryDetectorTilt", "tilted", "DS", r"series [\d.]+: GantryDetectorTilt 'tilted' is not a number"),
    ("ImagePositionPatient", "12.5", "DS", r"series [\d.]+: a slice without a valid ImagePositionPatient \(expected 3 "
                                           r"numbers\)"),
    ("PixelSpacing", ["-0.7", "-0.7"], "DS", r"series [\d.]+: PixelSpacing\[0\] = -0.7: expected a voxel spacing"),
    ("RescaleSlope", "steep", "DS", r"\.dcm: RescaleSlope 'steep' is not a number"),
    ("RescaleSlope", "0", "DS", r"\.dcm: RescaleSlope 0: expected a non-zero number"),
])
def test_broken_ct_series_fields_are_one_line_naming_the_field(tmp_path, keyword, value, vr, message):
    from medchallenge.dicom.series import find_series, read_volume, select_study_series

    if keyword == "PixelSpacing":  # every slice, else the first slice's differs
        import pydicom

        _, _, paths = write_tiny_series(tmp_path / "dicom", shape=(8, 8, 10))
        for path in paths:
            ds = pydicom.dcmread(path)
            ds.PixelSpacing = value
            ds.save_as(path)
        folder = tmp_path / "dicom"
    else:
        folder = dicom_series_with(tmp_path, keyword, value, vr)
    with pytest.raises(InputError, match=message):
        for series, spacing in select_study_series(find_series(folder), ("CT",)):
            read_volume(series, spacing)


def job(tmp_path: Path, relative_path: str, name: str = "TST_001.nii.gz") -> Path:
    """A grand-challenge job folder whose inputs.json names `relative_path` and upload name `name`."""
    folder = tmp_path / "input"
    (folder / "images" / "ct-image").mkdir(parents=True)
    nifti_ct(folder / "images" / "ct-image" / "1.nii.gz", shape=(16, 16, 8))
    entry = {"interface": {"slug": "ct-image", "relative_path": relative_path, "super_kind": "Image"},
             "image": {"pk": "1", "name": name}}
    (folder / "inputs.json").write_text(json.dumps([entry]))
    return folder


@pytest.mark.parametrize("relative_path", ["/etc", "../outside", "images/../../outside", "images/..\\..\\x"])
def test_inputs_json_paths_that_leave_the_input_folder_are_refused(tmp_path, relative_path):
    from medchallenge.contract import read_inputs_json

    (tmp_path / "outside").mkdir()
    with pytest.raises(InputError, match=r"inputs.json\[0\]: interface.relative_path of socket 'ct-image' leaves "):
        read_inputs_json(job(tmp_path, relative_path))


def test_a_symbolic_link_out_of_the_input_folder_is_refused(tmp_path):
    from medchallenge.contract import read_inputs_json

    folder = job(tmp_path, "images/ct-image")
    (folder / "images" / "ct-image" / "1.nii.gz").unlink()
    (folder / "images" / "ct-image" / "1.nii.gz").symlink_to("/etc/hostname")
    with pytest.raises(InputError, match=r"the image file of socket 'ct-image' is a symbolic link"):
        read_inputs_json(folder)["ct-image"].image_file()
    (folder / "images" / "ct-image").rename(folder / "elsewhere")
    (folder / "images" / "ct-image").symlink_to(tmp_path)
    with pytest.raises(InputError, match=r"leaves"):
        read_inputs_json(folder)


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", "..", "a\\b.nii.gz", "ct\n.nii.gz"])
def test_an_image_name_that_is_a_path_is_refused_and_not_echoed(tmp_path, capsys, name):
    from medchallenge.algorithms.runner import main
    from medchallenge.algorithms.tb_caverns import ALGORITHM

    folder = job(tmp_path, "images/ct-image", name)
    assert main(ALGORITHM, ["--input", str(folder), "--output", str(tmp_path / "out"), "--device", "cpu"],
                baked_model_dir=MODELS / "tb_caverns" / "model") == 1
    err = capsys.readouterr().err
    assert "image.name of socket 'ct-image' is not a plain file name" in err
    assert name not in err and "passwd" not in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("name, cell", [
    ("=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0"), ("@SUM(1+1)*cmd|' /C calc'!A0", "'@SUM(1+1)*cmd|' /C calc'!A0"),
    ("+1", "'+1"), ("-2+3", "'-2+3"), ("\tx", "<U+0009>x"), ("\rx", "<U+000D>x"), ("a\nb", "a<U+000A>b"),
    ("team\u202eA", "team<U+202E>A"),
    ("team-B", "team-B"), ("צוות", "צוות"),
])
def test_team_names_are_neutralised_in_the_csv(name, cell):
    import csv
    import io

    from medchallenge.leaderboard import CSV_COLUMNS, leaderboard_csv

    row = dict.fromkeys(CSV_COLUMNS, 1)
    row["team"] = name
    rows = list(csv.reader(io.StringIO(leaderboard_csv({"metric": "value", "teams": [row]}), newline="")))
    assert rows[1][1] == cell


def test_bidi_controls_in_team_names_cannot_reorder_the_page(tmp_path):
    from leaderboard_helpers import caption_teams

    from medchallenge.leaderboard import main

    ground_truth, submissions = caption_teams(tmp_path, teams=2, images=12)
    (submissions / "team-A").rename(submissions / "evil\u202eA=1")
    assert main(["--challenge", "imageclef-caption", "--ground-truth", str(ground_truth), "--submissions",
                 str(submissions), "--output", str(tmp_path / "board"), "--bootstrap", "20", "--no-progress"]) == 0
    page = (tmp_path / "board" / "leaderboard.html").read_text()
    assert "\u202e" not in page and "evil&lt;U+202E&gt;A=1" in page
    assert "\u202e" not in (tmp_path / "board" / "leaderboard.csv").read_text()
