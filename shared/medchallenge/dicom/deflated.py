"""The one way a Deflated Explicit VR Little Endian data set is inflated: streamed from the file in bounded chunks,
never more than a given limit, in time bounded by the file's size and that limit.

The deflate stream ends the data set: whatever follows its end in the file is ignored, as zlib (and so pydicom)
ignores it. pydicom pads the stream to an even length with one byte, and zlib's decompressor, once the stream has
ended, keeps such a byte in its `unconsumed_tail` while returning nothing, so a loop waiting for that tail to empty
never ends (issue 29). Here every step either consumes input or produces output, and the end of the stream ends the
reading; a stream cut short or no deflate stream at all is an InputError naming the file.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path

from ..errors import InputError

DEFLATED = "1.2.840.10008.1.2.1.99"
PREAMBLE_AND_PREFIX = 132
GROUP_LENGTH_ELEMENT = 12  # (0002,0000) UL: tag, VR, length, value
INFLATED_CHUNK = 1 << 16  # inflated bytes per step
READ_CHUNK = 1 << 20  # deflated bytes read from the file at a time


class InflatedTooLarge(InputError):
    """The data set inflates to more than the limit it was read under."""


def is_deflated(meta) -> bool:
    """Whether file meta information `meta` names the deflated transfer syntax."""
    return str(meta.get("TransferSyntaxUID", "")) == DEFLATED


def dataset_offset(path: Path):
    """The file meta information of the Part-10 file `path` and where its data set starts."""
    from pydicom.filereader import read_file_meta_info

    meta = read_file_meta_info(path)
    return meta, PREAMBLE_AND_PREFIX + GROUP_LENGTH_ELEMENT + int(meta.get("FileMetaInformationGroupLength", 0))


def inflate(path: Path, limit: int) -> Iterator[bytes]:
    """The inflated data set of the deflated Part-10 file `path`, in chunks of at most INFLATED_CHUNK bytes (nothing
    kept). InflatedTooLarge as soon as more than `limit` bytes come out; InputError when the data set is no deflate
    stream or the file ends before its stream does."""
    _, offset = dataset_offset(path)
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    total = 0
    with open(path, "rb") as handle:
        handle.seek(offset)
        pending = b""
        while not inflater.eof:
            if not pending:
                pending = handle.read(READ_CHUNK)  # empty at the end of the file: what zlib still holds comes out
            try:
                chunk = inflater.decompress(pending, INFLATED_CHUNK)
            except zlib.error as exc:
                raise InputError(f"{path}: the deflated data set is no valid deflate stream ({exc})") from None
            if not chunk and not inflater.eof and len(inflater.unconsumed_tail) == len(pending):
                raise InputError(f"{path}: the deflated data set ends before its deflate stream does (truncated)"
                                 if not pending else f"{path}: the deflated data set is no valid deflate stream")
            pending = inflater.unconsumed_tail
            total += len(chunk)
            if total > limit:
                raise InflatedTooLarge(f"{path}: the deflated data set inflates to more than {limit} bytes")
            if chunk:
                yield chunk


def inflated_size(path: Path, limit: int) -> int:
    """The inflated size of the deflated data set of `path`, counted as a stream (errors as `inflate`)."""
    return sum(len(chunk) for chunk in inflate(path, limit))
