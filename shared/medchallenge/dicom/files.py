"""One DICOM file, read as hostile input: its header without its pixel data, and its pixel data checked against the
header and the image-size limit before anything of its size is allocated.

A header is read within bounds that hold whatever the file claims: at most MAX_HEADER_ELEMENTS data elements and
items before the pixel data (nested ones included) and MAX_HEADER_BYTES bytes read (values longer than LARGE_VALUE
stay in the file until used). pydicom keeps some 300 bytes per element, so an unbounded header of millions of tiny
elements takes gigabytes (issue 29); the bounds are counted on the reads as pydicom makes them, so checking them
allocates nothing. A header over them is a HeaderTooLarge.

pydicom inflates a whole Deflated Explicit VR Little Endian dataset in memory, even for the header alone, so a 389 kB
deflated radiograph becomes 0.8 GB before one tag is read: here the header is parsed from a bounded inflated prefix
(`deflated.inflate`, the one inflater), and the full dataset is read only once its inflated length is known to fit
what the header declares. Numeric fields are read with `number`, which names the file and the field when a value is
no number. pydicom's own warnings about invalid values are silenced (its validation mode IGNORE): the fields used
are checked here, one line each.
"""

from __future__ import annotations

import io
import math
import zlib
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..limits import check_image_size
from .deflated import InflatedTooLarge, inflate, is_deflated

PIXEL_DATA_TAG = b"\xe0\x7f\x10\x00"  # (7FE0,0010), little endian
MAX_HEADER_ELEMENTS = 100_000  # element and item headers read before the pixel data (an 8-byte value counts too)
MAX_HEADER_BYTES = 16 << 20  # bytes read before the pixel data (inflated, for a deflated file)
LARGE_VALUE = 1 << 20  # header values longer than this are read from the file when used
TRAILING_BYTES = 1 << 20  # what a deflated dataset may hold after its pixel data (padding, signatures)


class HeaderTooLarge(InputError):
    """A header over MAX_HEADER_ELEMENTS elements or MAX_HEADER_BYTES bytes before its pixel data."""


class _Bounded:
    """Counts the reads a header costs: every data element and item starts with one read of 8 bytes (tag and
    length), so those reads bound the elements; HeaderTooLarge past a bound, before anything more is parsed."""

    where: Path
    elements = 0
    bytes_read = 0

    def read(self, size: int = -1) -> bytes:
        data = super().read(size)
        self.elements += len(data) == 8
        self.bytes_read += len(data)
        if self.elements > MAX_HEADER_ELEMENTS:
            raise HeaderTooLarge(f"{self.where}: more than {MAX_HEADER_ELEMENTS} data elements before the pixel data")
        if self.bytes_read > MAX_HEADER_BYTES:
            raise HeaderTooLarge(f"{self.where}: more than {MAX_HEADER_BYTES} bytes of DICOM header before the pixel "
                                 "data")
        return data


class _BoundedFile(_Bounded, io.BufferedReader):
    def __init__(self, path: Path):
        super().__init__(io.FileIO(str(path), "rb"))
        self.where = path


class _BoundedBytes(_Bounded, io.BytesIO):
    def __init__(self, data: bytes, where: Path):
        super().__init__(data)
        self.where = where


def _quiet_pydicom() -> None:
    from pydicom import config

    config.settings.reading_validation_mode = config.IGNORE


def _read_meta(handle: _BoundedFile):
    """The file meta information, read within the header bounds; the handle left at the data set."""
    from pydicom.filereader import _read_file_meta_info, read_preamble

    read_preamble(handle, False)
    return _read_file_meta_info(handle)


def _deflated_header(path: Path, meta, tags: list | None):
    """The header of a deflated file, parsed from the inflated bytes before its pixel data (at most
    MAX_HEADER_BYTES of them)."""
    from pydicom.filereader import read_dataset

    prefix = bytearray()
    try:
        for chunk in inflate(path, MAX_HEADER_BYTES):
            searched = max(0, len(prefix) - len(PIXEL_DATA_TAG))
            prefix += chunk
            found = prefix.find(PIXEL_DATA_TAG + b"O", searched)
            if found >= 0:
                del prefix[found:]
                break
    except InflatedTooLarge:
        raise HeaderTooLarge(f"{path}: more than {MAX_HEADER_BYTES} bytes of DICOM header before the pixel "
                             "data") from None
    header = read_dataset(_BoundedBytes(bytes(prefix), path), is_implicit_VR=False, is_little_endian=True,
                          specific_tags=tags)
    header.file_meta = meta
    return header


def read_header(path: Path, tags: tuple[str, ...] | None = None):
    """The header of a DICOM file without its pixel data (only the elements `tags` names, when given), within the
    header bounds (HeaderTooLarge); an InputError naming the file when unreadable."""
    import pydicom
    from pydicom.errors import InvalidDicomError
    from pydicom.tag import Tag

    _quiet_pydicom()
    wanted = [Tag(keyword) for keyword in tags] if tags else None
    try:
        with _BoundedFile(path) as handle:
            meta = _read_meta(handle)
            if is_deflated(meta):
                return _deflated_header(path, meta, wanted)
            handle.seek(0)
            return pydicom.dcmread(handle, stop_before_pixels=True, defer_size=LARGE_VALUE, specific_tags=wanted)
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
        if is_deflated(header.file_meta):
            bound = MAX_HEADER_BYTES + expected + TRAILING_BYTES
            try:
                for _ in inflate(path, bound):
                    pass
            except InflatedTooLarge:
                raise InputError(f"{path}: the deflated dataset inflates to more than {bound} bytes, more than its "
                                 f"header declares ({declared})") from None
        # values longer than the native pixel data are left in the file until used: a native file holding more
        # than its header says is refused from the element's length, before it is read
        dataset = pydicom.dcmread(path, defer_size=expected + 2)
        if "PixelData" not in dataset:
            raise InputError(f"{path}: no pixel data")
        syntax = dataset.file_meta.TransferSyntaxUID
        if not syntax.is_compressed or is_deflated(dataset.file_meta):  # native pixel data: its length is the check
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
