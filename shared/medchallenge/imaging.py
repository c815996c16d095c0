"""Reading medical images with SimpleITK, with the checks ITK does not make."""

from __future__ import annotations

import gzip
import math
import struct
import zlib
from pathlib import Path

from .errors import InputError

NIFTI1_HEADER_SIZE = 348


def _expected_nifti_bytes(header: bytes, path: Path) -> int | None:
    """vox_offset + voxel data bytes of a NIfTI-1 header (None for NIfTI-2 and other formats)."""
    for endian in "<>":
        if struct.unpack(f"{endian}i", header[:4])[0] == NIFTI1_HEADER_SIZE:
            break
    else:
        return None
    dims = struct.unpack(f"{endian}8h", header[40:56])
    bitpix = struct.unpack(f"{endian}h", header[72:74])[0]
    vox_offset = struct.unpack(f"{endian}f", header[108:112])[0]
    if not 1 <= dims[0] <= 7 or bitpix <= 0:
        raise InputError(f"{path}: invalid NIfTI header (dim[0]={dims[0]}, bitpix={bitpix})")
    return int(vox_offset) + math.prod(max(d, 1) for d in dims[1 : dims[0] + 1]) * bitpix // 8


def check_nifti_complete(path: Path) -> None:
    """Refuse a truncated `.nii`/`.nii.gz`: ITK fills the missing voxels silently, nibabel raises.

    `.nii.gz`: the gzip trailer's size (ISIZE) is compared first; only when it differs (a truncated file, or a
    multi-member gzip) is the file decompressed to count its bytes.
    """
    compressed = path.name.lower().endswith(".nii.gz")
    try:
        with (gzip.open(path, "rb") if compressed else open(path, "rb")) as handle:
            header = handle.read(NIFTI1_HEADER_SIZE)
        if len(header) < NIFTI1_HEADER_SIZE:
            raise InputError(f"{path}: truncated NIfTI file ({len(header)} bytes of header)")
        expected = _expected_nifti_bytes(header, path)
        if expected is None:
            return
        if not compressed:
            actual = path.stat().st_size
        else:
            with open(path, "rb") as raw:
                raw.seek(-4, 2)
                if struct.unpack("<I", raw.read(4))[0] == expected % 2**32:
                    return
            actual = 0
            with gzip.open(path, "rb") as handle:
                while chunk := handle.read(1 << 24):
                    actual += len(chunk)
    except gzip.BadGzipFile:
        raise InputError(f"{path}: cannot read (not gzip-compressed, although named .nii.gz)") from None
    except (EOFError, zlib.error) as exc:
        raise InputError(f"{path}: truncated or corrupt gzip stream ({exc})") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if actual < expected:
        raise InputError(f"{path}: truncated NIfTI file: {actual} bytes of header and voxels, the header needs "
                         f"{expected}")


def read_image(path: Path, what: str = "image"):
    """`sitk.ReadImage` with a truncation check for NIfTI and one clear InputError line on failure."""
    import SimpleITK as sitk

    if path.name.lower().endswith((".nii", ".nii.gz")):
        check_nifti_complete(path)
    sitk.ProcessObject.SetGlobalWarningDisplay(False)  # ITK's multi-line warnings would bury the one error line
    try:
        return sitk.ReadImage(str(path))
    except RuntimeError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        itk = next((line.split(": ", 2)[-1] for line in lines if "ITK ERROR" in line), None)
        raise InputError(f"{path}: cannot read the {what} ({itk or 'not a readable image'})") from None


def require_finite(array, path: Path, what: str) -> None:
    """Refuse NaN or infinite voxels of a floating-point volume: cast to integers they silently become numbers."""
    import numpy as np

    if np.issubdtype(array.dtype, np.floating) and array.size and not np.isfinite(array).all():
        bad = int(array.size - np.count_nonzero(np.isfinite(array)))
        raise InputError(f"{path}: {bad} NaN or infinite voxel(s) in the {what}; expected finite values")


def read_ct(path: Path):
    """The SimpleITK image and its (z, y, x) int16 array; an unreadable file is an InputError naming it."""
    import numpy as np
    import SimpleITK as sitk

    image = read_image(path, "CT image")
    if image.GetDimension() != 3 or image.GetNumberOfComponentsPerPixel() != 1:
        raise InputError(f"{path}: expected a 3-D single-channel CT, got {image.GetDimension()}-D with "
                         f"{image.GetNumberOfComponentsPerPixel()} component(s)")
    array = sitk.GetArrayViewFromImage(image)
    require_finite(array, path, "CT image")
    if array.dtype != np.int16:
        array = np.clip(array, -32768, 32767).astype(np.int16)
    return image, array
