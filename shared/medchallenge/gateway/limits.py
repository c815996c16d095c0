"""Size checks of received instances, made on the file before any decoding allocates memory: the size on disk and,
for the deflated transfer syntax, the inflated size (streamed, never more than one chunk beyond the limit)."""

from __future__ import annotations

import zlib
from pathlib import Path

DEFLATED = "1.2.840.10008.1.2.1.99"
PREAMBLE_AND_MARKER = 132
GROUP_LENGTH_ELEMENT = 12  # (0002,0000) UL 4: tag, VR, 2-byte length, value
CHUNK = 1 << 20


def inflated_size_over(path: Path, limit: int) -> bool:
    """Whether the deflated data set of the Part-10 file `path` inflates to more than `limit` bytes (or is not a
    valid deflate stream); inflated in chunks, so that at most `limit` + one chunk is ever decoded."""
    from pydicom.filereader import read_file_meta_info

    meta = read_file_meta_info(path)
    group_length = meta.get("FileMetaInformationGroupLength")
    if group_length is None:
        return True
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    total = 0
    with open(path, "rb") as handle:
        handle.seek(PREAMBLE_AND_MARKER + GROUP_LENGTH_ELEMENT + int(group_length))
        try:
            while chunk := handle.read(CHUNK):
                data = inflater.decompress(chunk, CHUNK)
                while True:
                    total += len(data)
                    if total > limit:
                        return True
                    if not inflater.unconsumed_tail:
                        break
                    data = inflater.decompress(inflater.unconsumed_tail, CHUNK)
        except zlib.error:
            return True
    return False
