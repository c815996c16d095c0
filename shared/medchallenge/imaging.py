"""Reading medical images with SimpleITK, with the checks ITK does not make."""

from __future__ import annotations

import math
import struct
import zlib
from pathlib import Path

from .errors import InputError
from .limits import check_voxel_count

NIFTI1_HEADER_SIZE = 348
NIFTI2_HEADER_SIZE = 540
# NIfTI datatype code -> bits per voxel (nifti1.h); bitpix must agree, since readers trust one or the other
NIFTI_DATATYPE_BITS = {2: 8, 4: 16, 8: 32, 16: 32, 32: 64, 64: 64, 128: 24, 256: 8, 512: 16, 768: 32, 1024: 64,
                       1280: 64, 1536: 128, 1792: 128, 2048: 256, 2304: 32}
_INFLATE_CHUNK = 1 << 22


def nifti_data_end(header: bytes, path: Path) -> int:
    """vox_offset + voxel bytes of a NIfTI-1 header, after checking that the header agrees with itself (datatype vs
    bitpix, dimensions, offset) and the voxel-count limit (limits.MAX_VOXELS)."""
    for endian in "<>":
        sizeof_hdr = struct.unpack(f"{endian}i", header[:4])[0]
        if sizeof_hdr in (NIFTI1_HEADER_SIZE, NIFTI2_HEADER_SIZE):
            break
    else:
        raise InputError(f"{path}: not a NIfTI file (header size field {struct.unpack('<i', header[:4])[0]}, "
                         f"expected {NIFTI1_HEADER_SIZE})")
    if sizeof_hdr == NIFTI2_HEADER_SIZE:
        raise InputError(f"{path}: a NIfTI-2 file, which ITK does not read; save it as NIfTI-1 or MetaImage (.mha)")
    dims = struct.unpack(f"{endian}8h", header[40:56])
    datatype, bitpix = struct.unpack(f"{endian}2h", header[70:74])
    vox_offset = struct.unpack(f"{endian}f", header[108:112])[0]
    if not 1 <= dims[0] <= 7:
        raise InputError(f"{path}: invalid NIfTI header (dim[0]={dims[0]}, expected 1 to 7)")
    size = dims[1 : dims[0] + 1]
    if min(size) < 1:
        raise InputError(f"{path}: invalid NIfTI header (dimensions {list(size)}, expected positive sizes)")
    if datatype not in NIFTI_DATATYPE_BITS:
        raise InputError(f"{path}: invalid NIfTI header (unknown datatype code {datatype})")
    if bitpix != NIFTI_DATATYPE_BITS[datatype]:
        raise InputError(f"{path}: invalid NIfTI header (bitpix={bitpix} but datatype {datatype} has "
                         f"{NIFTI_DATATYPE_BITS[datatype]} bits per voxel)")
    if not math.isfinite(vox_offset) or vox_offset < sizeof_hdr:
        raise InputError(f"{path}: invalid NIfTI header (vox_offset={vox_offset}, expected at least {sizeof_hdr})")
    check_voxel_count(path, tuple(size))
    return int(vox_offset) + math.prod(size) * bitpix // 8


def nifti1_header(path: Path) -> bytes:
    """The first 348 bytes of a `.nii` or `.nii.gz` file (only they are decompressed), checked as `nifti_data_end`
    checks them; a short or unreadable file is one InputError line."""
    import gzip

    try:
        opener = gzip.open if path.name.lower().endswith(".gz") else open
        with opener(path, "rb") as handle:
            header = handle.read(NIFTI1_HEADER_SIZE)
    except (EOFError, OSError, zlib.error) as exc:
        raise InputError(f"{path}: cannot read the NIfTI header ({getattr(exc, 'strerror', None) or exc})") from None
    if len(header) < NIFTI1_HEADER_SIZE:
        raise InputError(f"{path}: truncated NIfTI file ({len(header)} bytes of header)")
    nifti_data_end(header, path)
    return header


def nifti1_dims_and_scaling(header: bytes) -> tuple[tuple[int, ...], float, float]:
    """dim[1..dim[0]], scl_slope and scl_inter (float32 in the file, as Python floats) of a checked NIfTI-1 header."""
    endian = "<" if struct.unpack("<i", header[:4])[0] == NIFTI1_HEADER_SIZE else ">"
    dims = struct.unpack(f"{endian}8h", header[40:56])
    slope, inter = struct.unpack(f"{endian}2f", header[112:120])
    return tuple(dims[1 : dims[0] + 1]), slope, inter


def _inflated_chunks(path: Path):
    """The decompressed bytes of a (multi-member) gzip file as a stream of chunks, nothing kept: the trailer's ISIZE
    (modulo 2**32, and only the last member's) is never taken as the length."""
    inside_member, pending = False, b""
    inflater = zlib.decompressobj(wbits=31)
    with open(path, "rb") as raw:
        if raw.read(2) != b"\x1f\x8b":
            raise InputError(f"{path}: cannot read (not gzip-compressed, although named .nii.gz)")
        raw.seek(0)
        while True:
            if not pending and not (pending := raw.read(1 << 20)):
                if inside_member:
                    raise EOFError("compressed file ended before the end-of-stream marker was reached")
                return
            inside_member = True
            yield inflater.decompress(pending, _INFLATE_CHUNK)
            pending = inflater.unconsumed_tail
            if inflater.eof:  # a next gzip member, if any, starts in unused_data
                pending, inflater, inside_member = inflater.unused_data, zlib.decompressobj(wbits=31), False


def check_nifti_complete(path: Path) -> None:
    """Refuse a NIfTI file whose header lies or whose voxels are missing (ITK fills them silently, nibabel raises),
    before anything is allocated: the header is checked against itself and the voxel-count limit, and the data
    length is measured (`.nii.gz`: decompressed as a stream and counted, up to the length the header needs)."""
    try:
        if not path.name.lower().endswith(".nii.gz"):
            with open(path, "rb") as handle:
                header = handle.read(NIFTI1_HEADER_SIZE)
            actual = path.stat().st_size
            expected = nifti_data_end(header, path) if len(header) == NIFTI1_HEADER_SIZE else None
        else:
            header, actual, expected = b"", 0, None
            for chunk in _inflated_chunks(path):
                actual += len(chunk)
                if expected is None and len(header) < NIFTI1_HEADER_SIZE:
                    header += chunk[: NIFTI1_HEADER_SIZE - len(header)]
                    if len(header) == NIFTI1_HEADER_SIZE:
                        expected = nifti_data_end(header, path)
                if expected is not None and actual >= expected:
                    break
    except (EOFError, zlib.error) as exc:
        raise InputError(f"{path}: truncated or corrupt gzip stream ({exc})") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if expected is None:
        raise InputError(f"{path}: truncated NIfTI file ({len(header)} bytes of header)")
    if actual < expected:
        raise InputError(f"{path}: truncated NIfTI file: {actual} bytes of header and voxels, the header needs "
                         f"{expected}")


def read_image(path: Path, what: str = "image"):
    """`sitk.ReadImage` after the header checks (NIfTI self-consistency and length, the voxel-count limit for every
    format), with one clear InputError line on failure."""
    import SimpleITK as sitk

    sitk.ProcessObject.SetGlobalWarningDisplay(False)  # ITK's multi-line warnings would bury the one error line
    try:
        if path.name.lower().endswith((".nii", ".nii.gz")):
            check_nifti_complete(path)
        else:  # other formats: the header's size against the limit before ITK allocates the voxels
            reader = sitk.ImageFileReader()
            reader.SetFileName(str(path))
            reader.ReadImageInformation()
            check_voxel_count(path, reader.GetSize(), reader.GetNumberOfComponents())
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


def read_ct(path: Path, image=None):
    """The SimpleITK image (read from `path` unless given, e.g. a DICOM series) and its (z, y, x) int16 array, a 3-D
    single-channel volume of finite values; an unreadable file is an InputError naming it."""
    import numpy as np
    import SimpleITK as sitk

    if image is None:
        image = read_image(path, "CT image")
    if image.GetDimension() != 3 or image.GetNumberOfComponentsPerPixel() != 1:
        raise InputError(f"{path}: expected a 3-D single-channel CT, got {image.GetDimension()}-D with "
                         f"{image.GetNumberOfComponentsPerPixel()} component(s)")
    array = sitk.GetArrayViewFromImage(image)
    require_finite(array, path, "CT image")
    if array.dtype != np.int16:
        array = np.clip(array, -32768, 32767).astype(np.int16)
    return image, array
