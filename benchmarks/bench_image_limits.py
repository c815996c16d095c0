"""The image-size limit and the header checks of the readers (issue 22, parts 4 and 5): what they cost on normal inputs, and
the peak memory of a refused bomb. Normal inputs: a 512 x 512 x 300 CT as int16 and float32 NIfTI (`read_ct`: the
streamed length check, the NaN count of float voxels, the pixdim check), a 512 x 512 x 100 DICOM series (`read_volume`:
each slice's header read first, its pixel data checked against it) and a 2,048 x 2,048 PNG (the caption reader), each
timed in full and the checks alone. Bombs: a 20,000 x 20,000 deflated DICOM radiograph and a 13,000 x 13,000 16-bit
PNG, each refused in a fresh process whose own peak RSS is reported."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

from medchallenge.process_memory import PeakMemory

BOMB = """
import sys, struct, zlib
from pathlib import Path
kind, path = sys.argv[1], Path(sys.argv[2])
from medchallenge.errors import InputError
from medchallenge.algorithms.imageclef_caption import read_figure
from medchallenge.algorithms.object_cxr import read_radiograph
try:
    if kind == "imports":
        pass
    elif kind == "dicom":
        read_radiograph(path, (512, 512))
    else:
        read_figure(path)
except InputError as exc:
    print(exc)
"""


def _best(call, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return round(min(times), 4)


def _png(path: Path, size: int, bit_depth: int) -> Path:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")

    rng = np.random.default_rng(0)
    deflater = zlib.compressobj(6)
    row_bytes = size * bit_depth // 8
    rows = [deflater.compress(b"\0" + (rng.integers(0, 255, row_bytes, dtype=np.uint8).tobytes() if size < 4096
                                       else bytes(row_bytes))) for _ in range(size)]
    header = size.to_bytes(4, "big") * 2 + bytes([bit_depth, 0, 0, 0, 0])
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", b"".join(rows) + deflater.flush())
                     + chunk(b"IEND", b""))
    return path


def _deflated_bomb(path: Path, edge: int) -> Path:
    from pydicom.filebase import DicomBytesIO
    from pydicom.filewriter import write_dataset, write_file_meta_info

    from medchallenge.dicom.synthetic import SyntheticStudy, radiograph_dataset

    ds = radiograph_dataset(np.zeros((2, 2), np.uint8), SyntheticStudy("bomb", "PAT_BOMB"))
    ds.Rows = ds.Columns = edge
    del ds.PixelData
    ds.file_meta.TransferSyntaxUID = "1.2.840.10008.1.2.1.99"
    meta, body = DicomBytesIO(), DicomBytesIO()
    meta.write(b"\0" * 128 + b"DICM")
    write_file_meta_info(meta, ds.file_meta, enforce_standard=True)
    body.is_little_endian, body.is_implicit_VR = True, False
    write_dataset(body, ds)
    deflater = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    parts = [deflater.compress(body.getvalue() + b"\xe0\x7f\x10\x00OB\0\0" + (edge * edge).to_bytes(4, "little"))]
    zeros = bytes(1 << 22)
    parts += [deflater.compress(zeros[: min(len(zeros), edge * edge - start)]) for start in range(0, edge * edge,
                                                                                                   len(zeros))]
    path.write_bytes(meta.getvalue() + b"".join(parts) + deflater.flush())
    return path


def _child(kind: str, path: Path) -> tuple[float, float, str, int]:
    """(seconds, peak RSS in MB, stdout, exit status) of the reader run on `path` in a fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", BOMB, kind, str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    with PeakMemory(proc.pid) as peak:
        _, status, _ = os.wait4(proc.pid, 0)
    return (time.perf_counter() - start, peak.mib, proc.stdout.read().decode().strip(),
            os.waitstatus_to_exitcode(status))


def _refusal(kind: str, path: Path) -> dict:
    """The refusal's time and peak RSS, next to the peak RSS of the same process that only imports the readers (a
    child's peak counts what it shared with this process when it started)."""
    seconds, peak, message, status = _child(kind, path)
    return {"file_bytes": path.stat().st_size, "seconds": round(seconds, 2), "peak_rss_mb": round(peak, 1),
            "imports_only_peak_rss_mb": round(_child("imports", path)[1], 1),
            "refused": "more than the limit" in message, "exit_status": status}


def run() -> dict:
    import SimpleITK as sitk

    from medchallenge.algorithms.imageclef_caption import read_figure
    from medchallenge.dicom.files import read_header
    from medchallenge.dicom.series import find_series, read_volume, select_study_series
    from medchallenge.dicom.synthetic import SyntheticStudy, write_ct_series
    from medchallenge.imaging import check_nifti_complete, nifti_header, open_picture, read_ct

    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench_limits_") as tmp:
        root = Path(tmp)
        # first, while this process is small: a child starts as its copy, and its peak RSS counts that
        results["refused_deflated_dicom_20000x20000"] = _refusal("dicom", _deflated_bomb(root / "bomb.dcm", 20_000))
        results["refused_png_13000x13000x16bit"] = _refusal("png", _png(root / "bomb.png", 13_000, 16))
        ct = np.random.default_rng(0).integers(-1000, 1500, (300, 512, 512)).astype(np.int16)
        image = sitk.GetImageFromArray(ct)
        image.SetSpacing((0.7, 0.7, 1.25))
        for name, typed in (("int16", image), ("float32", sitk.Cast(image, sitk.sitkFloat32))):
            path = root / f"{name}.nii.gz"
            sitk.WriteImage(typed, str(path))
            results[f"nifti_512x512x300_{name}"] = {
                "read_ct_seconds": _best(lambda: read_ct(path)),
                "sitk_read_seconds": _best(lambda: sitk.ReadImage(str(path))),
                "length_and_nan_check_seconds": _best(lambda: check_nifti_complete(path)),
                "pixdim_check_seconds": _best(lambda: nifti_header(path)),
            }
        paths = write_ct_series(root / "dicom", ct[:100].transpose(2, 1, 0), np.diag([-0.7, -0.7, 1.25, 1]),
                                SyntheticStudy("bench", "PAT_BENCH"))

        def read_series():
            ((series, spacing),) = select_study_series(find_series(root / "dicom"), ("CT",))
            read_volume(series, spacing)

        results["dicom_512x512x100"] = {"find_select_read_seconds": _best(read_series),
                                        "slice_header_checks_seconds": _best(lambda: [read_header(p) for p in paths])}
        png = _png(root / "figure.png", 2048, 8)
        results["png_2048x2048"] = {"read_figure_seconds": _best(lambda: read_figure(png)),
                                    "size_check_seconds": _best(lambda: open_picture(png).close())}
    return results


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=1))
