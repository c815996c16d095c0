"""Reading medical images with SimpleITK, with the checks ITK does not make."""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError
from .limits import check_image_size

NIFTI1_HEADER_SIZE = 348
NIFTI2_HEADER_SIZE = 540
# NIfTI datatype code -> bits per voxel (nifti1.h); bitpix must agree, since readers trust one or the other
NIFTI_DATATYPE_BITS = {2: 8, 4: 16, 8: 32, 16: 32, 32: 64, 64: 64, 128: 24, 256: 8, 512: 16, 768: 32, 1024: 64,
                       1280: 64, 1536: 128, 1792: 128, 2048: 256, 2304: 32}
_INFLATE_CHUNK = 1 << 22


# NIfTI datatype code -> numpy type of the floating-point ones (the only ones that hold NaN or infinities)
NIFTI_FLOAT_TYPES = {16: "f4", 32: "c8", 64: "f8", 1536: "f16", 1792: "c16", 2048: "c32"}
# a CT voxel edge between 10 micrometres and 10 centimetres; beyond, the header is wrong (ITK reads a pixdim of 0,
# NaN or infinity as 1.0 without a word)
CT_SPACING_MM = (0.01, 100.0)
MIN_CT_EDGE = 8  # voxels along each axis of a CT (a chest CT has hundreds)


@dataclass(frozen=True)
class NiftiHeader:
    """What the readers check of a NIfTI-1 header: byte order, size, datatype, where the voxels are, pixdim."""

    endian: str
    size: tuple[int, ...]
    datatype: int
    bitpix: int
    vox_offset: int
    pixdim: tuple[float, ...]  # pixdim[1..ndim], as stored (ITK replaces 0, NaN and infinity by 1.0)
    scl_slope: float  # float32 in the file, as Python floats
    scl_inter: float

    @property
    def data_end(self) -> int:
        return self.vox_offset + math.prod(self.size) * self.bitpix // 8

    def float_type(self):
        """The numpy type of a floating-point datatype, None for integer ones."""
        import numpy as np

        code = NIFTI_FLOAT_TYPES.get(self.datatype)
        return None if code is None else np.dtype(self.endian + code)


def parse_nifti_header(header: bytes, path: Path) -> NiftiHeader:
    """The NIfTI-1 header, after checking that it agrees with itself (datatype vs bitpix, dimensions, offset) and
    the image-size limit (limits.check_image_size)."""
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
    pixdim = struct.unpack(f"{endian}8f", header[76:108])
    vox_offset = struct.unpack(f"{endian}f", header[108:112])[0]
    scl_slope, scl_inter = struct.unpack(f"{endian}2f", header[112:120])
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
    check_image_size(path, tuple(size))
    return NiftiHeader(endian, tuple(size), datatype, bitpix, int(vox_offset), tuple(pixdim[1 : dims[0] + 1]),
                       scl_slope, scl_inter)


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


def _file_chunks(path: Path):
    with open(path, "rb") as handle:
        while chunk := handle.read(_INFLATE_CHUNK):
            yield chunk


class _NonFiniteCounter:
    """Counts the NaN and infinite voxels of a floating-point NIfTI's voxel bytes as they stream past."""

    def __init__(self, header: NiftiHeader):
        self.dtype, self.start, self.end = header.float_type(), header.vox_offset, header.data_end
        self.offset, self.pending, self.count = 0, b"", 0

    def feed(self, chunk: bytes) -> None:
        lo, hi = max(self.start - self.offset, 0), min(self.end - self.offset, len(chunk))
        self.offset += len(chunk)
        if hi <= lo:
            return
        view = memoryview(chunk)[lo:hi]  # no copies of the chunk: its voxels are looked at in place
        if self.pending:
            need = self.dtype.itemsize - len(self.pending)
            self._count(self.pending + bytes(view[:need]))
            view, self.pending = view[need:], b""
        whole = len(view) - len(view) % self.dtype.itemsize
        self._count(view[:whole])
        self.pending = bytes(view[whole:])

    def _count(self, data) -> None:
        import numpy as np

        values = np.frombuffer(data, dtype=self.dtype)
        # a finite sum means finite voxels (the fast path, 5 ms per 4 MB); else (NaN, infinity, or an overflow of
        # huge finite values) they are counted one by one
        if values.size and not np.isfinite(values.sum()):
            self.count += int(values.size - np.count_nonzero(np.isfinite(values)))


def check_nifti_complete(path: Path) -> tuple[NiftiHeader, int]:
    """Refuse a NIfTI file whose header lies or whose voxels are missing (ITK fills them silently, nibabel raises),
    before anything is allocated: the header is checked against itself and the image-size limit, and the data
    length is measured (`.nii.gz`: decompressed as a stream and counted, up to the length the header needs).
    Returns the header and the number of NaN or infinite voxels (floating-point datatypes; ITK reads them as 0)."""
    header, nifti, counter, actual = b"", None, None, 0
    try:
        chunks = _inflated_chunks(path) if path.name.lower().endswith(".nii.gz") else _file_chunks(path)
        for chunk in chunks:
            if nifti is None and len(header) < NIFTI1_HEADER_SIZE:
                header += chunk[: NIFTI1_HEADER_SIZE - len(header)]
                if len(header) == NIFTI1_HEADER_SIZE:
                    nifti = parse_nifti_header(header, path)
                    if nifti.float_type() is None and not path.name.lower().endswith(".nii.gz"):
                        actual = path.stat().st_size  # integer voxels of a plain file: its size is enough
                        break
                    counter = _NonFiniteCounter(nifti) if nifti.float_type() is not None else None
            actual += len(chunk)
            if counter is not None:
                counter.feed(chunk)
            if nifti is not None and actual >= nifti.data_end:
                break
    except (EOFError, zlib.error) as exc:
        raise InputError(f"{path}: truncated or corrupt gzip stream ({exc})") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if nifti is None:
        raise InputError(f"{path}: truncated NIfTI file ({len(header)} bytes of header)")
    if actual < nifti.data_end:
        raise InputError(f"{path}: truncated NIfTI file: {actual} bytes of header and voxels, the header needs "
                         f"{nifti.data_end}")
    return nifti, counter.count if counter is not None else 0


def read_image(path: Path, what: str = "image", allow_non_finite: bool = False):
    """`sitk.ReadImage` after the header checks (NIfTI self-consistency and length, the image-size limit for every
    format), with one clear InputError line on failure. NaN or infinite voxels are refused unless
    `allow_non_finite` (ITK's NIfTI reader turns them into 0 without a word: they are counted in the file)."""
    import SimpleITK as sitk

    sitk.ProcessObject.SetGlobalWarningDisplay(False)  # ITK's multi-line warnings would bury the one error line
    try:
        if path.name.lower().endswith((".nii", ".nii.gz")):
            _, non_finite = check_nifti_complete(path)
            if non_finite and not allow_non_finite:
                raise InputError(f"{path}: {non_finite} NaN or infinite voxel(s) in the {what}; expected finite "
                                 "values")
        else:  # other formats: the header's size against the limit before ITK allocates the voxels
            reader = sitk.ImageFileReader()
            reader.SetFileName(str(path))
            reader.ReadImageInformation()
            check_image_size(path, reader.GetSize(), reader.GetNumberOfComponents())
        image = sitk.ReadImage(str(path))
    except RuntimeError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        itk = next((line.split(": ", 2)[-1] for line in lines if "ITK ERROR" in line), None)
        raise InputError(f"{path}: cannot read the {what} ({itk or 'not a readable image'})") from None
    if not allow_non_finite and not path.name.lower().endswith((".nii", ".nii.gz")):
        require_finite(sitk.GetArrayViewFromImage(image), path, what)  # other formats keep NaN: counted here
    return image


def open_picture(path: Path):
    """A PNG, JPEG, TIFF or BMP opened with Pillow, its pixels not yet decoded, refused by the image-size limit from
    its header (Pillow's own DecompressionBombWarning, at a higher count, is not printed). Pillow's exceptions pass."""
    import warnings

    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        image = Image.open(path)
    try:
        check_image_size(path, image.size)
    except InputError:
        image.close()
        raise
    return image


def check_spacing(where: object, spacing: Sequence[float], field: str, first: int = 0) -> None:
    """Refuse a CT voxel spacing that is not a finite number within CT_SPACING_MM: one line naming the field
    (`field` formatted with the axis number, counted from `first`)."""
    lo, hi = CT_SPACING_MM
    for axis, value in enumerate(spacing, start=first):
        if not (math.isfinite(value) and lo <= value <= hi):
            raise InputError(f"{where}: {field.format(axis)} = {value:g}: expected a voxel spacing between {lo:g} "
                             f"and {hi:g} mm")


def resampled_size(image, spacing_xyz_mm: Sequence[float], where: object) -> list[int]:
    """The grid size covering `image`'s extent at `spacing_xyz_mm`, refused by the image-size limit before the
    resampled image is allocated."""
    size = [max(1, int(round(n * s / t))) for n, s, t in zip(image.GetSize(), image.GetSpacing(), spacing_xyz_mm)]
    check_image_size(where, size, found=f"resampling to {' x '.join(f'{t:g}' for t in spacing_xyz_mm)} mm needs")
    return size


def require_finite(array, path: Path, what: str) -> None:
    """Refuse NaN or infinite voxels of a floating-point volume: cast to integers they silently become numbers."""
    import numpy as np

    if np.issubdtype(array.dtype, np.floating) and array.size and not np.isfinite(array).all():
        bad = int(array.size - np.count_nonzero(np.isfinite(array)))
        raise InputError(f"{path}: {bad} NaN or infinite voxel(s) in the {what}; expected finite values")


def nifti_header(path: Path) -> NiftiHeader:
    """The checked header of a NIfTI file (reading only its first bytes)."""
    header = b""
    try:
        for chunk in _inflated_chunks(path) if path.name.lower().endswith(".nii.gz") else _file_chunks(path):
            header += chunk[: NIFTI1_HEADER_SIZE - len(header)]
            if len(header) == NIFTI1_HEADER_SIZE:
                return parse_nifti_header(header, path)
    except (EOFError, zlib.error, OSError) as exc:
        raise InputError(f"{path}: cannot read the NIfTI header ({exc})") from None
    raise InputError(f"{path}: truncated NIfTI file ({len(header)} bytes of header)")


def read_ct(path: Path, image=None):
    """The SimpleITK image (read from `path` unless given, e.g. a DICOM series) and its (z, y, x) int16 array, a 3-D
    single-channel volume of finite values, at least MIN_CT_EDGE voxels along each axis, with a voxel spacing within
    CT_SPACING_MM (a NIfTI's pixdim as stored); an unreadable or implausible file is an InputError naming it."""
    import numpy as np
    import SimpleITK as sitk

    if image is None:
        image = read_image(path, "CT image")
    if image.GetDimension() != 3 or image.GetNumberOfComponentsPerPixel() != 1:
        raise InputError(f"{path}: expected a 3-D single-channel CT, got {image.GetDimension()}-D with "
                         f"{image.GetNumberOfComponentsPerPixel()} component(s)")
    if min(image.GetSize()) < MIN_CT_EDGE:
        raise InputError(f"{path}: a CT of {' x '.join(map(str, image.GetSize()))} voxels; a CT needs at least "
                         f"{MIN_CT_EDGE} voxels along each axis")
    if path.is_file() and path.name.lower().endswith((".nii", ".nii.gz")):
        check_spacing(path, nifti_header(path).pixdim, "pixdim[{}]", first=1)
    else:
        check_spacing(path, image.GetSpacing(), "spacing[{}]")
    array = sitk.GetArrayViewFromImage(image)
    require_finite(array, path, "CT image")
    if array.dtype != np.int16:
        array = np.clip(array, -32768, 32767).astype(np.int16)
    return image, array
