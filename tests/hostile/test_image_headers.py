"""Image headers that lie, and decompression bombs, are refused before any voxel is allocated (issue 10).

Truncated files are tests/test_imaging.py's; here: a header that disagrees with itself, a gzip trailer that matches
modulo 2**32, a header over the voxel-count limit (NIfTI and MetaImage), and NaN/Inf voxels.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import nibabel as nib
import numpy as np
import pytest
import SimpleITK as sitk

from medchallenge.errors import InputError
from medchallenge.imaging import read_image
from medchallenge.limits import MAX_VOXELS

HEADER = 352  # NIfTI-1 header (348 bytes) and its 4 extension bytes


def nifti1(tmp_path, array: np.ndarray, name: str = "v.nii") -> bytes:
    path = tmp_path / name
    sitk.WriteImage(sitk.GetImageFromArray(array), str(path))
    return path.read_bytes()


def patched(raw: bytes, offset: int, fmt: str, *values) -> bytes:
    return raw[:offset] + struct.pack(fmt, *values) + raw[offset + struct.calcsize(fmt):]


def test_bitpix_that_disagrees_with_the_datatype_is_refused(tmp_path):
    # int16 voxels, but bitpix says 8: a length check trusting bitpix would accept half the voxels
    array = np.arange(8 * 7 * 6, dtype=np.int16).reshape(8, 7, 6)
    raw = patched(nifti1(tmp_path, array), 72, "<h", 8)
    lying = tmp_path / "lying.nii.gz"
    lying.write_bytes(gzip.compress(raw[: HEADER + array.size]))  # half of the voxel bytes
    with pytest.raises(InputError, match=r"lying.nii.gz: invalid NIfTI header \(bitpix=8 but datatype 4 has 16 "
                                         r"bits per voxel\)"):
        read_image(lying)


@pytest.mark.parametrize("field, offset, fmt, value, message", [
    ("dim[0]", 40, "<h", 9, r"dim\[0\]=9, expected 1 to 7"),
    ("a zero dimension", 42, "<h", 0, r"dimensions \[0, 7, 8\], expected positive sizes"),
    ("a negative dimension", 44, "<h", -7, r"dimensions \[6, -7, 8\], expected positive sizes"),
    ("an unknown datatype", 70, "<h", 3, r"unknown datatype code 3"),
    ("vox_offset inside the header", 108, "<f", 100.0, r"vox_offset=100.0, expected at least 348"),
    ("vox_offset NaN", 108, "<f", float("nan"), r"vox_offset=nan"),
])
def test_headers_that_contradict_themselves_are_refused(tmp_path, field, offset, fmt, value, message):
    raw = patched(nifti1(tmp_path, np.zeros((8, 7, 6), np.uint8)), offset, fmt, value)
    path = tmp_path / "bad.nii"
    path.write_bytes(raw)
    with pytest.raises(InputError, match=rf"bad.nii: invalid NIfTI header \({message}"):
        read_image(path)


def test_a_gzip_trailer_matching_modulo_2_to_the_32_is_not_taken_for_the_data(tmp_path, monkeypatch):
    # 16384 x 16384 x 16 uint8 voxels = 2**32 bytes after the header, none of them present: the trailer's ISIZE
    # (352) equals the needed length modulo 2**32. With the voxel limit raised out of the way, the streamed length
    # refuses it.
    raw = patched(nifti1(tmp_path, np.zeros((1, 2, 2), np.uint8)), 40, "<5h", 4, 16384, 16384, 16, 1)
    forged = tmp_path / "forged.nii.gz"
    forged.write_bytes(gzip.compress(raw[:HEADER]))
    needed = HEADER + 2**32
    assert struct.unpack("<I", forged.read_bytes()[-4:])[0] == needed % 2**32
    monkeypatch.setenv(MAX_VOXELS.variable, str(2**33))
    with pytest.raises(InputError, match=rf"forged.nii.gz: truncated NIfTI file: 352 bytes of header and voxels, "
                                         rf"the header needs {needed}"):
        read_image(forged)


def test_a_gzip_trailer_forged_to_the_needed_length_is_not_trusted(tmp_path):
    # the trailer's ISIZE rewritten to the length the header needs, the voxels cut to half: the trailer lies
    array = np.arange(8 * 7 * 6, dtype=np.uint8).reshape(8, 7, 6)
    raw = nifti1(tmp_path, array)
    compressed = bytearray(gzip.compress(raw[: HEADER + array.size // 2]))
    compressed[-4:] = struct.pack("<I", len(raw))
    forged = tmp_path / "forged.nii.gz"
    forged.write_bytes(bytes(compressed))
    with pytest.raises(InputError, match=r"forged.nii.gz: truncated or corrupt gzip stream"):
        read_image(forged)


def gzip_bomb(header: bytes, total: int, member: int = 1 << 24) -> bytes:
    """A multi-member gzip file whose members decompress to `header` then zeros, `total` bytes in all."""
    first = gzip.compress(header + bytes(member - len(header)), 9)
    rest = gzip.compress(bytes(member), 9)
    return first + rest * (total // member - 1)


def test_a_decompression_bomb_is_refused_from_its_header(tmp_path):
    # 2048**3 uint8 voxels declared (8 GiB once decompressed), 8 MB on disk: refused before decompressing
    raw = patched(nifti1(tmp_path, np.zeros((1, 2, 2), np.uint8)), 40, "<4h", 3, 2048, 2048, 2048)
    bomb = tmp_path / "bomb.nii.gz"
    bomb.write_bytes(gzip_bomb(raw[:HEADER], 1 << 28))  # (the first 256 MiB of it are enough here)
    with pytest.raises(InputError, match=rf"bomb.nii.gz: the header declares 8589934592 voxels \(2048 x 2048 x "
                                         rf"2048\), more than the limit of {MAX_VOXELS.default} voxels "
                                         rf"\(\${MAX_VOXELS.variable} sets it\)"):
        read_image(bomb)


def test_the_voxel_limit_holds_for_metaimage_and_is_configurable(tmp_path, monkeypatch):
    header = ("ObjectType = Image\nNDims = 3\nBinaryData = True\nBinaryDataByteOrderMSB = False\n"
              "CompressedData = True\nCompressedDataSize = {size}\nDimSize = 4096 4096 4096\n"
              "ElementType = MET_FLOAT\nElementDataFile = LOCAL\n")
    data = zlib.compress(bytes(1 << 20))
    bomb = tmp_path / "bomb.mha"
    bomb.write_bytes(header.format(size=len(data)).encode() + data)
    with pytest.raises(InputError, match=r"bomb.mha: the header declares 68719476736 voxels \(4096 x 4096 x 4096\)"):
        read_image(bomb)
    small = tmp_path / "small.mha"
    sitk.WriteImage(sitk.GetImageFromArray(np.zeros((4, 5, 6), np.uint8)), str(small))
    assert read_image(small).GetSize() == (6, 5, 4)
    monkeypatch.setenv(MAX_VOXELS.variable, "100")
    with pytest.raises(InputError, match=r"small.mha: the header declares 120 voxels \(6 x 5 x 4\), more than the "
                                         r"limit of 100 voxels"):
        read_image(small)
    monkeypatch.setenv(MAX_VOXELS.variable, "many")
    with pytest.raises(InputError, match=rf"\${MAX_VOXELS.variable}=.many.: expected a positive whole number"):
        read_image(small)


def test_nifti2_is_one_clear_line(tmp_path):
    path = tmp_path / "v2.nii"
    nib.Nifti2Image(np.zeros((4, 5, 6), np.int16), np.eye(4)).to_filename(path)
    with pytest.raises(InputError, match=r"v2.nii: a NIfTI-2 file, which ITK does not read"):
        read_image(path)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_nan_or_infinite_voxels_are_refused_in_masks_and_cts(tmp_path, value):
    from medchallenge.formats.ribfrac import read_label_volume
    from medchallenge.imaging import read_ct

    array = np.zeros((4, 5, 6), dtype=np.float32)
    array[1, 2, 3] = 1.0
    array[2, 2, 2] = value
    path = tmp_path / "volume.mha"  # (ITK's NIfTI writer does not keep NaN; MetaImage, GC's format, does)
    sitk.WriteImage(sitk.GetImageFromArray(array), str(path))
    with pytest.raises(InputError, match=r"volume.mha: 1 NaN or infinite voxel\(s\) in the label volume"):
        read_label_volume(path)
    with pytest.raises(InputError, match=r"volume.mha: 1 NaN or infinite voxel\(s\) in the CT image"):
        read_ct(path)
