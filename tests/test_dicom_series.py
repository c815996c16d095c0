"""DICOM CT series in: finding the series, choosing one per study, slice order, rescale, refused geometries."""

from __future__ import annotations

import numpy as np
import pydicom
import pytest
import SimpleITK as sitk
from dicom_helpers import dciodvfy_errors, write_tiny_series

from medchallenge.dicom.series import find_series, read_volume, select_study_series
from medchallenge.errors import InputError
from medchallenge.synth.tb_caverns import save_nifti


def read_only_series(folder):
    ((series, spacing),) = select_study_series(find_series(folder), ("CT",))
    return series, spacing


def test_series_reads_back_the_volume_with_the_nifti_geometry(tmp_path):
    volume, affine, paths = write_tiny_series(tmp_path / "dicom")
    series, spacing = read_only_series(tmp_path / "dicom")
    image = read_volume(series, spacing)
    assert np.array_equal(sitk.GetArrayFromImage(image), volume.T.astype(np.float32))  # (z, y, x) order
    save_nifti(tmp_path / "ct.nii.gz", volume, affine)
    nifti = sitk.ReadImage(str(tmp_path / "ct.nii.gz"))
    for index in [(0, 0, 0), (7, 5, 4), (3, 1, 2)]:
        assert np.allclose(image.TransformIndexToPhysicalPoint(index), nifti.TransformIndexToPhysicalPoint(index),
                           atol=1e-4)
    assert np.allclose(image.GetSpacing(), (0.7, 0.8, 2.5))
    assert dciodvfy_errors(paths[0]) == []


def test_slices_are_ordered_by_position_not_by_file_name(tmp_path):
    volume, _, paths = write_tiny_series(tmp_path / "dicom")
    for k, path in enumerate(paths):  # names now say the reverse of the true order
        path.rename(path.with_name(f"IM{len(paths) - k:04d}.dcm"))
    series, spacing = read_only_series(tmp_path / "dicom")
    assert [p.name for p in series.files] == [f"IM{len(paths) - k:04d}.dcm" for k in range(len(paths))]
    assert np.array_equal(sitk.GetArrayFromImage(read_volume(series, spacing)), volume.T.astype(np.float32))


def test_rescale_slope_and_intercept_are_applied(tmp_path):
    volume, _, paths = write_tiny_series(tmp_path / "dicom")
    for path in paths:
        ds = pydicom.dcmread(path)
        ds.RescaleSlope, ds.RescaleIntercept = "2", "-2048"  # stored = (HU + 1024): HU' = 2 * stored - 2048
        ds.save_as(path)
    image = read_volume(*read_only_series(tmp_path / "dicom"))
    assert np.array_equal(sitk.GetArrayFromImage(image), 2 * (volume.T.astype(np.float32) + 1024) - 2048)


def test_a_compressed_transfer_syntax_is_decoded(tmp_path):
    from pydicom.uid import RLELossless

    volume, _, paths = write_tiny_series(tmp_path / "dicom")
    for path in paths:
        ds = pydicom.dcmread(path)
        ds.compress(RLELossless)
        ds.save_as(path)
    assert pydicom.dcmread(paths[0]).file_meta.TransferSyntaxUID == RLELossless
    image = read_volume(*read_only_series(tmp_path / "dicom"))
    assert np.array_equal(sitk.GetArrayFromImage(image), volume.T.astype(np.float32))


def edit_slices(paths, edit):
    for k, path in enumerate(paths):
        ds = pydicom.dcmread(path)
        edit(k, ds)
        ds.save_as(path)


@pytest.mark.parametrize("edit, message", [
    (lambda k, ds: setattr(ds, "GantryDetectorTilt", "15"), "gantry tilt 15 degrees"),
    (lambda k, ds: setattr(ds, "ImagePositionPatient",
                           [float(ds.ImagePositionPatient[0]), float(ds.ImagePositionPatient[1]) + 0.5 * k,
                            float(ds.ImagePositionPatient[2])]), "do not lie along the slice normal"),
    (lambda k, ds: setattr(ds, "ImagePositionPatient",
                           [*ds.ImagePositionPatient[:2], float(ds.ImagePositionPatient[2]) + (1.5 if k == 4 else 0)]),
     "uneven slice spacing"),
    (lambda k, ds: setattr(ds, "ImagePositionPatient", [*ds.ImagePositionPatient[:2], 7.0] if k < 2
                           else ds.ImagePositionPatient), "two slices at the same position"),
])
def test_refused_geometries_are_one_line_naming_the_study(tmp_path, edit, message):
    _, _, paths = write_tiny_series(tmp_path / "dicom")
    edit_slices(paths, edit)
    with pytest.raises(InputError, match=message) as raised:
        read_only_series(tmp_path / "dicom")
    text = str(raised.value)
    assert "\n" not in text and text.startswith("study ") and "series " in text


def test_a_missing_slice_is_uneven_spacing(tmp_path):
    _, _, paths = write_tiny_series(tmp_path / "dicom")
    ordered, _ = read_only_series(tmp_path / "dicom")
    ordered.files[2].unlink()
    with pytest.raises(InputError, match=r"uneven slice spacing \(2.500 to 5.000 mm; missing slices\?\)"):
        read_only_series(tmp_path / "dicom")


def test_series_selection_by_modality_geometry_and_size(tmp_path):
    volume, _, _ = write_tiny_series(tmp_path / "study" / "thin")
    _, _, thick = write_tiny_series(tmp_path / "study" / "thick", key="thick", shape=(8, 6, 3))
    _, _, scout = write_tiny_series(tmp_path / "study" / "scout", key="scout", shape=(8, 6, 9))
    _, _, tilted = write_tiny_series(tmp_path / "study" / "tilted", key="tilted", shape=(8, 6, 12))
    _, _, mr = write_tiny_series(tmp_path / "study" / "mr", key="mr", shape=(8, 6, 20))
    study_uid = pydicom.dcmread(next((tmp_path / "study" / "thin").iterdir())).StudyInstanceUID

    def same_study(k, ds):
        ds.StudyInstanceUID = study_uid

    edit_slices(thick, same_study)
    edit_slices(scout, lambda k, ds: (same_study(k, ds), setattr(ds, "ImageType", ["ORIGINAL", "PRIMARY", "LOCALIZER"])))
    edit_slices(tilted, lambda k, ds: (same_study(k, ds), setattr(ds, "GantryDetectorTilt", "-12")))
    edit_slices(mr, lambda k, ds: (same_study(k, ds), setattr(ds, "Modality", "MR")))
    ((series, spacing),) = select_study_series(find_series(tmp_path / "study"), ("CT",))
    # MR (20 slices), the localizer (9) and the tilted CT (12) are passed over; the larger of the two good CTs wins
    assert len(series.files) == 5 and series.files[0].parent.name == "thin"
    assert np.array_equal(sitk.GetArrayFromImage(read_volume(series, spacing)), volume.T.astype(np.float32))
    with pytest.raises(InputError, match=rf"study {study_uid}: no MG image series \(found CT, MR\)"):
        select_study_series(find_series(tmp_path / "study"), ("MG",))


def test_non_dicom_files_are_ignored_and_a_folder_without_dicom_is_an_error(tmp_path):
    (tmp_path / "notes.txt").write_text("not DICOM")
    with pytest.raises(InputError, match="no DICOM files"):
        find_series(tmp_path)
    write_tiny_series(tmp_path / "dicom")
    assert len(find_series(tmp_path)) == 1
