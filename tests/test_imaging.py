"""Truncated NIfTI files are refused (ITK would fill the missing voxels silently); intact ones are read."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import SimpleITK as sitk

from medchallenge.errors import InputError
from medchallenge.imaging import check_nifti_complete, read_image


@pytest.fixture
def volume(tmp_path):
    array = np.arange(6 * 7 * 8, dtype=np.int16).reshape(8, 7, 6)
    path = tmp_path / "v.nii"
    sitk.WriteImage(sitk.GetImageFromArray(array), str(path))
    return path, array


def test_intact_files_are_read_in_every_form(volume, tmp_path):
    path, array = volume
    raw = path.read_bytes()
    # NIfTI-1: 348-byte header + 4 extension bytes, then 6 * 7 * 8 int16 voxels: 352 + 672 = 1024 bytes
    assert len(raw) == 352 + array.nbytes == 1024
    single = tmp_path / "single.nii.gz"
    single.write_bytes(gzip.compress(raw))
    # two gzip members (pigz, concatenated files): the trailer then holds only the last member's size
    multi = tmp_path / "multi.nii.gz"
    multi.write_bytes(gzip.compress(raw[:500]) + gzip.compress(raw[500:]))
    for candidate in (path, single, multi):
        check_nifti_complete(candidate)
        assert np.array_equal(sitk.GetArrayFromImage(read_image(candidate)), array)


def test_truncated_files_are_errors(volume, tmp_path):
    path, _ = volume
    raw = path.read_bytes()
    short = tmp_path / "short.nii"
    short.write_bytes(raw[:-10])
    with pytest.raises(InputError, match=r"short.nii: truncated NIfTI file: 1014 bytes of header and voxels, "
                                         r"the header needs 1024"):
        read_image(short)
    cut = tmp_path / "cut.nii.gz"
    cut.write_bytes(gzip.compress(raw)[:-30])
    with pytest.raises(InputError, match=r"cut.nii.gz: truncated or corrupt gzip stream"):
        read_image(cut)
    header_only = tmp_path / "header.nii"
    header_only.write_bytes(raw[:100])
    with pytest.raises(InputError, match=r"header.nii: truncated NIfTI file \(100 bytes of header\)"):
        read_image(header_only)


def test_unreadable_image_is_one_line(tmp_path):
    path = tmp_path / "junk.mha"
    path.write_text("not an image")
    with pytest.raises(InputError) as error:
        read_image(path, "label volume")
    assert str(error.value).startswith(f"{path}: cannot read the label volume (") and "\n" not in str(error.value)
