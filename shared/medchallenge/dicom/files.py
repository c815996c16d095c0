"""One DICOM file, read as hostile input: its header without its pixel data, and its pixel data checked against the
header and the image-size limit before anything of its size is allocated.

pydicom inflates a whole Deflated Explicit VR Little Endian dataset in memory, even for the header alone, so a 389 kB
deflated radiograph becomes 0.8 GB before one tag is read: here the header is parsed from a bounded inflated prefix,
and the full dataset is read only once its inflated length is known to fit what the header declares. Numeric fields
are read with `number`, which names the file and the field when a value is no number. pydicom's own warnings about
invalid values are silenced (its validation mode IGNORE): the fields used are checked here, one line each.
"""

from __future__ import annotations

import math
import zlib
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..limits import check_image_size

DEFLATED = "1.2.840.10008.1.2.1.99"
PIXEL_DATA_TAG = b"\xe0\x7f\x10\x00"  # (7FE0,0010), little endian
MAX_HEADER_BYTES = 16 << 20  # the elements before the pixel data of a deflated file
TRAILING_BYTES = 1 << 20  # what a deflated dataset may hold after its pixel data (padding, signatures)
_CHUNK = 1 << 16
PREAMBLE_AND_PREFIX = 132
GROUP_LENGTH_ELEMENT = 12  # (0002,0000) UL: tag, VR, length, value


def _quiet_pydicom() -> None:
    from pydicom import config

    config.settings.reading_validation_mode = config.IGNORE


def _dataset_offset(path: Path):
    """The file meta information and where the dataset starts after it."""
    import pydicom

    meta = pydicom.filereader.read_file_meta_info(path)
    return meta, PREAMBLE_AND_PREFIX + GROUP_LENGTH_ELEMENT + int(meta.get("FileMetaInformationGroupLength", 0))


def _inflated(path: Path, offset: int):
    """The inflated chunks of a deflated dataset, streamed (nothing kept)."""
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    with open(path, "rb") as handle:
        handle.seek(offset)
        while chunk := handle.read(1 << 20):
            while chunk:
                yield inflater.decompress(chunk, _CHUNK)
                chunk = inflater.unconsumed_tail
            if inflater.eof:
                return
    yield inflater.flush()


def _deflated_header(path: Path):
    """The header of a deflated file, parsed from the inflated bytes before its pixel data (at most
    MAX_HEADER_BYTES of them)."""
    import pydicom
    from pydicom.filebase import DicomBytesIO

    meta, offset = _dataset_offset(path)
    prefix = b""
    for chunk in _inflated(path, offset):
        prefix += chunk
        found = prefix.find(PIXEL_DATA_TAG + b"O")
        if found >= 0:
            prefix = prefix[:found]
            break
        if len(prefix) > MAX_HEADER_BYTES:
            raise InputError(f"{path}: more than {MAX_HEADER_BYTES} bytes of DICOM header before the pixel data")
    header = pydicom.filereader.read_dataset(DicomBytesIO(prefix), is_implicit_VR=False, is_little_endian=True)
    header.file_meta = meta
    return header


def read_header(path: Path):
    """The header of a DICOM file without its pixel data; an InputError naming the file when unreadable."""
    import pydicom
    from pydicom.errors import InvalidDicomError

    _quiet_pydicom()
    try:
        meta_syntax = str(pydicom.filereader.read_file_meta_info(path).get("TransferSyntaxUID", ""))
        if meta_syntax == DEFLATED:
            return _deflated_header(path)
        return pydicom.dcmread(path, stop_before_pixels=True)
    except (InvalidDicomError, OSError, ValueError, EOFError, KeyError, zlib.error, TypeError) as exc:
        raise InputError(f"{path}: cannot read the DICOM header ({type(exc).__name__}: {exc})") from None


def number(header, keyword: str, where: object, default: float | None = None, kind=float) -> float:
    """A numeric field as `kind` (float or int); a value that is no finite number (or absent, without a default) is
    one InputError naming `where` and the field."""
    value = header.get(keyword)
    if value is None or value == "":
        if default is None:
            raise InputError(f"{where}: no {keyword}")
        return default
    try:
        result = kind(float(value)) if kind is int else kind(value)
        if not math.isfinite(float(result)) or (kind is int and float(value) != result):
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{where}: {keyword} {str(value)[:40]!r} is not a {'whole ' if kind is int else ''}"
                         "number") from None
    return result


def pixel_layout(header, path: Path) -> tuple[int, int, int, int, int]:
    """(rows, columns, frames, samples per pixel, bits allocated) from the header, checked, and the image-size limit
    applied to rows x columns x frames x samples."""
    rows = number(header, "Rows", path, kind=int)
    columns = number(header, "Columns", path, kind=int)
    frames = number(header, "NumberOfFrames", path, default=1, kind=int)
    samples = number(header, "SamplesPerPixel", path, default=1, kind=int)
    bits = number(header, "BitsAllocated", path, kind=int)
    for keyword, value in (("Rows", rows), ("Columns", columns), ("NumberOfFrames", frames),
                           ("SamplesPerPixel", samples)):
        if value < 1:
            raise InputError(f"{path}: {keyword} {value}: expected a positive number")
    if bits not in (1, 8, 16, 32, 64):
        raise InputError(f"{path}: BitsAllocated {bits}: expected 1, 8, 16, 32 or 64")
    check_image_size(path, (columns, rows, frames), samples)
    return rows, columns, frames, samples, bits


def read_pixels(path: Path):
    """The dataset and its pixel array (pydicom's shape), after the header's checks and the image-size limit; pixel
    data whose length or decoded shape differs from what Rows, Columns, NumberOfFrames and SamplesPerPixel say is
    one InputError naming the file."""
    import pydicom
    from pydicom.dataelem import RawDataElement

    header = read_header(path)
    rows, columns, frames, samples, bits = pixel_layout(header, path)
    expected = -(-rows * columns * frames * samples * bits // 8)
    declared = f"Rows x Columns {rows} x {columns}, {frames} frame(s) of {samples} sample(s), {bits} bits"
    try:
        if str(header.file_meta.get("TransferSyntaxUID", "")) == DEFLATED:
            _, offset = _dataset_offset(path)
            total, bound = 0, MAX_HEADER_BYTES + expected + TRAILING_BYTES
            for chunk in _inflated(path, offset):
                total += len(chunk)
                if total > bound:
                    raise InputError(f"{path}: the deflated dataset inflates to more than {bound} bytes, more than "
                                     f"its header declares ({declared})")
        # values longer than the native pixel data are left in the file until used: a native file holding more
        # than its header says is refused from the element's length, before it is read
        dataset = pydicom.dcmread(path, defer_size=expected + 2)
        if "PixelData" not in dataset:
            raise InputError(f"{path}: no pixel data")
        syntax = dataset.file_meta.TransferSyntaxUID
        if not syntax.is_compressed or str(syntax) == DEFLATED:  # native pixel data: its length is the check
            item = dataset.get_item("PixelData", keep_deferred=True)
            stored = item.length if isinstance(item, RawDataElement) else len(item.value)
            if stored not in (expected, expected + 1):
                raise InputError(f"{path}: {stored} bytes of pixel data, but the header declares {declared}: "
                                 f"{expected} bytes")
        pixels = dataset.pixel_array
    except InputError:
        raise
    except Exception as exc:  # pydicom raises many kinds for corrupt or undecodable pixel data
        raise InputError(f"{path}: cannot decode the pixel data ({type(exc).__name__}: {exc})") from None
    shape = (frames,) * (frames > 1) + (rows, columns) + (samples,) * (samples > 1)
    if pixels.shape != shape:
        raise InputError(f"{path}: pixel data of shape {pixels.shape}, but the header declares {declared}")
    return dataset, np.asarray(pixels)
