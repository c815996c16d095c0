"""One pixel/voxel limit on every decoded and every resampled image, before the memory is allocated, and pixel data
that does not match its header refused (issue 22, part 4).

The bombs are written as streams (zlib, RLE runs), so that the tests themselves stay small: a 20,000 x 20,000
radiograph deflated or RLE-coded, a 13,000 x 13,000 16-bit PNG of some 330 kB, a JPEG whose header says 13,000 x
13,000, and a CT grid of 64 x 64 x 16 voxels of 20 mm resampled to the models' spacing (428 M voxels). Each refusal
is measured with tracemalloc: it allocates next to nothing.
"""

from __future__ import annotations

import io
import struct
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from medchallenge.dicom.files import read_header, read_pixels
from medchallenge.dicom.synthetic import SyntheticStudy, radiograph_dataset
from medchallenge.errors import InputError
from medchallenge.limits import MAX_PIXELS, MAX_VOXELS

DEFLATED = "1.2.840.10008.1.2.1.99"
RLE = "1.2.840.10008.1.2.5"
BOMB_EDGE = 20_000


def refused_with_little_memory(call, match: str, budget: int = 64 << 20) -> None:
    """`call()` raises an InputError matching `match`, having allocated (Python's view) less than `budget` bytes."""
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match=match):
            call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < budget, f"{peak} bytes allocated before the refusal"


def radiograph(rows: int, columns: int):
    """A CR header of rows x columns 8-bit pixels, without its pixel data."""
    ds = radiograph_dataset(np.zeros((2, 2), np.uint8), SyntheticStudy("bomb", "PAT_BOMB"))
    ds.Rows, ds.Columns = rows, columns
    del ds.PixelData
    return ds


def part10(ds, syntax: str) -> tuple[bytes, bytes]:
    """(preamble and file meta, the dataset as explicit VR little endian bytes) of `ds`."""
    from pydicom.filebase import DicomBytesIO
    from pydicom.filewriter import write_dataset, write_file_meta_info

    ds.file_meta.TransferSyntaxUID = syntax
    meta = DicomBytesIO()
    meta.write(b"\0" * 128 + b"DICM")
    write_file_meta_info(meta, ds.file_meta, enforce_standard=True)
    body = DicomBytesIO()
    body.is_little_endian, body.is_implicit_VR = True, False
    write_dataset(body, ds)
    return meta.getvalue(), body.getvalue()


def write_deflated(path: Path, rows: int, columns: int, stored_bytes: int) -> Path:
    """A deflated CR declaring rows x columns whose pixel data holds `stored_bytes` zeros, compressed as a stream."""
    meta, body = part10(radiograph(rows, columns), DEFLATED)
    deflater = zlib.compressobj(1, zlib.DEFLATED, -zlib.MAX_WBITS)
    parts = [deflater.compress(body + b"\xe0\x7f\x10\x00OB\0\0" + struct.pack("<I", stored_bytes))]
    zeros = bytes(1 << 22)
    for start in range(0, stored_bytes, len(zeros)):
        parts.append(deflater.compress(zeros[: min(len(zeros), stored_bytes - start)]))
    path.write_bytes(meta + b"".join(parts) + deflater.flush())
    return path


def test_a_deflated_20000_square_radiograph_is_refused_from_its_header(tmp_path):
    path = write_deflated(tmp_path / "bomb.dcm", BOMB_EDGE, BOMB_EDGE, BOMB_EDGE * BOMB_EDGE)
    assert path.stat().st_size < 2 << 20
    refused_with_little_memory(lambda: read_pixels(path), rf"bomb.dcm: the header declares 400000000 pixels "
                                                          rf"\(20000 x 20000 x 1\), more than the limit of "
                                                          rf"{MAX_PIXELS.default} pixels")


def test_the_header_of_a_deflated_file_is_read_without_inflating_its_pixel_data(tmp_path):
    path = write_deflated(tmp_path / "bomb.dcm", BOMB_EDGE, BOMB_EDGE, BOMB_EDGE * BOMB_EDGE)
    tracemalloc.start()
    header = read_header(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert (header.Rows, header.Columns, header.Modality) == (BOMB_EDGE, BOMB_EDGE, "CR")
    assert peak < 8 << 20


def test_a_deflated_file_holding_more_than_its_header_says_is_refused_before_it_is_inflated(tmp_path):
    # 64 x 64 declared, 64 MiB of pixel data inside: counted as a stream, never held
    path = write_deflated(tmp_path / "liar.dcm", 64, 64, 64 << 20)
    refused_with_little_memory(lambda: read_pixels(path), r"liar.dcm: the deflated dataset inflates to more than "
                                                          r"\d+ bytes, more than its header declares \(Rows x "
                                                          r"Columns 64 x 64")


def test_an_intact_deflated_radiograph_reads_back(tmp_path):
    pixels = np.random.default_rng(1).integers(0, 255, (48, 40), dtype=np.uint8)
    meta, body = part10(radiograph_dataset(pixels, SyntheticStudy("ok", "PAT_OK")), DEFLATED)
    deflater = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    (tmp_path / "ok.dcm").write_bytes(meta + deflater.compress(body) + deflater.flush())
    _, decoded = read_pixels(tmp_path / "ok.dcm")
    assert np.array_equal(decoded, pixels)


def test_an_rle_20000_square_radiograph_is_refused_before_decoding(tmp_path):
    from pydicom.encaps import encapsulate

    ds = radiograph(BOMB_EDGE, BOMB_EDGE)
    # one RLE segment: runs of 128 zeros (header 0x81 = -127, value 0)
    segment = b"\x81\x00" * (BOMB_EDGE * BOMB_EDGE // 128)
    frame = struct.pack("<16I", 1, 64, *([0] * 14)) + segment
    ds.PixelData = encapsulate([frame])
    ds["PixelData"].VR = "OB"
    ds.file_meta.TransferSyntaxUID = RLE
    path = tmp_path / "rle.dcm"
    ds.save_as(path, enforce_file_format=True)
    refused_with_little_memory(lambda: read_pixels(path), r"rle.dcm: the header declares 400000000 pixels",
                               budget=3 * len(frame) + (8 << 20))


def test_the_object_cxr_reader_applies_the_limit_to_dicom(tmp_path):
    from medchallenge.algorithms.object_cxr import read_radiograph

    path = write_deflated(tmp_path / "bomb.dcm", BOMB_EDGE, BOMB_EDGE, BOMB_EDGE * BOMB_EDGE)
    refused_with_little_memory(lambda: read_radiograph(path, (512, 512)), r"bomb.dcm: the header declares")


def test_pixel_data_of_another_size_than_the_header_is_an_error(tmp_path):
    # Rows/Columns 64 x 64, pixel data of 512 x 512: pydicom would read it as 64 frames, scored as a colour image
    from medchallenge.algorithms.object_cxr import read_radiograph

    ds = radiograph_dataset(np.zeros((64, 64), np.uint8), SyntheticStudy("liar", "PAT_LIAR"))
    ds.PixelData = np.random.default_rng(0).integers(0, 255, (512, 512), dtype=np.uint8).tobytes()
    path = tmp_path / "liar.dcm"
    ds.save_as(path, enforce_file_format=True)
    with pytest.raises(InputError, match=r"liar.dcm: 262144 bytes of pixel data, but the header declares Rows x "
                                         r"Columns 64 x 64, 1 frame\(s\) of 1 sample\(s\), 8 bits: 4096 bytes"):
        read_radiograph(path, (512, 512))


def test_native_pixel_data_longer_than_the_header_says_is_refused_before_it_is_read(tmp_path):
    meta, body = part10(radiograph(64, 64), "1.2.840.10008.1.2.1")
    stored = 64 << 20
    path = tmp_path / "long.dcm"
    with open(path, "wb") as handle:
        handle.write(meta + body + b"\xe0\x7f\x10\x00OB\0\0" + struct.pack("<I", stored))
        handle.truncate(handle.tell() + stored)  # 64 MiB of zeros, sparse
    refused_with_little_memory(lambda: read_pixels(path), r"long.dcm: 67108864 bytes of pixel data, but the header "
                                                          r"declares Rows x Columns 64 x 64", budget=8 << 20)


def png_of_zeros(path: Path, width: int, height: int, bit_depth: int = 16) -> Path:
    """A grey PNG of zeros, its IDAT compressed as a stream (13,000 x 13,000 x 16 bits: about 330 kB)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    deflater = zlib.compressobj(9)
    row = bytes(1 + width * bit_depth // 8)  # filter byte 0, then the samples
    idat = b"".join(deflater.compress(row) for _ in range(height)) + deflater.flush()
    header = struct.pack(">IIBBBBB", width, height, bit_depth, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b""))
    return path


@pytest.fixture(scope="module")
def big_png(tmp_path_factory) -> Path:
    return png_of_zeros(tmp_path_factory.mktemp("png") / "big.png", 13_000, 13_000)


def test_a_13000_square_16_bit_png_is_refused_by_the_caption_algorithm(big_png):
    from medchallenge.algorithms.imageclef_caption import read_figure

    assert big_png.stat().st_size < 400_000
    refused_with_little_memory(lambda: read_figure(big_png), rf"big.png: the header declares 169000000 pixels "
                                                             rf"\(13000 x 13000\), more than the limit of "
                                                             rf"{MAX_PIXELS.default} pixels \(\$MEDCHALLENGE_MAX_"
                                                             r"PIXELS")


def test_a_13000_square_16_bit_png_is_refused_by_the_object_cxr_algorithm(big_png):
    from medchallenge.algorithms.object_cxr import read_radiograph

    refused_with_little_memory(lambda: read_radiograph(big_png, (512, 512)), r"big.png: the header declares "
                                                                              r"169000000 pixels")


def test_a_jpeg_whose_header_says_13000_square_is_refused_before_decoding(tmp_path):
    from PIL import Image

    from medchallenge.algorithms.object_cxr import read_radiograph

    buffer = io.BytesIO()
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(buffer, format="JPEG")
    raw = buffer.getvalue()
    sof = raw.index(b"\xff\xc0")
    path = tmp_path / "big.jpg"  # SOF0: length, precision, height, width
    path.write_bytes(raw[: sof + 5] + struct.pack(">HH", 13_000, 13_000) + raw[sof + 9:])
    refused_with_little_memory(lambda: read_radiograph(path, (512, 512)), r"big.jpg: the header declares 169000000")


def test_the_pixel_limit_is_set_by_its_variable(big_png, monkeypatch, tmp_path):
    from medchallenge.algorithms.imageclef_caption import read_figure

    small = png_of_zeros(tmp_path / "small.png", 300, 200, bit_depth=8)
    assert read_figure(small).size == (300, 200)
    monkeypatch.setenv(MAX_PIXELS.variable, "50000")
    with pytest.raises(InputError, match=r"small.png: the header declares 60000 pixels \(300 x 200\), more than the "
                                         r"limit of 50000 pixels"):
        read_figure(small)


def coarse_ct(spacing_mm: float) -> sitk.Image:
    image = sitk.Image([64, 64, 16], sitk.sitkInt16)
    image.SetSpacing((spacing_mm,) * 3)
    return image


def test_the_grid_a_ct_is_resampled_to_is_refused_over_the_voxel_limit():
    from medchallenge.algorithms.ribfrac import resample_isotropic
    from medchallenge.algorithms.tb_caverns import resample_to_spacing

    # 64 x 64 x 16 voxels of 20 mm: 1829 x 1829 x 128 = 428 M voxels at TB's 0.7 x 0.7 x 2.5 mm
    refused_with_little_memory(lambda: resample_to_spacing(coarse_ct(20.0), (0.7, 0.7, 2.5), "ct.nii.gz"),
                               rf"ct.nii.gz: resampling to 0.7 x 0.7 x 2.5 mm needs 428190848 voxels \(1829 x 1829 "
                               rf"x 128\), more than the limit of {MAX_VOXELS.default} voxels")
    refused_with_little_memory(lambda: resample_isotropic(coarse_ct(20.0), 0.5, where="ct.nii.gz"),
                               r"ct.nii.gz: resampling to 0.5 x 0.5 x 0.5 mm needs 4194304000 voxels")
    assert resample_to_spacing(coarse_ct(2.0), (0.7, 0.7, 2.5)).GetSize() == (183, 183, 13)


def test_the_tb_algorithm_refuses_a_coarse_ct_in_one_line(tmp_path, capsys):
    from medchallenge.algorithms.tb_caverns import ALGORITHM
    from medchallenge.algorithms.runner import main

    (tmp_path / "in").mkdir()
    image = sitk.Image([64, 64, 16], sitk.sitkInt16) - 1000
    image.SetSpacing((20.0, 20.0, 20.0))
    sitk.WriteImage(image, str(tmp_path / "in" / "TST_001.nii.gz"))
    model = Path(__file__).parents[2] / "algorithms" / "tb_caverns" / "model"
    assert main(ALGORITHM, ["--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--device", "cpu"],
                baked_model_dir=model) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and "TST_001.nii.gz: resampling to 0.7 x 0.7 x 2.5 mm needs 428190848" \
        in err[-1] and "Traceback" not in "\n".join(err)
