"""The lung-nodule challenge's evaluation written a second time, without SimpleITK or any medical-imaging
package: NumPy and SciPy only, reading the MetaImage (.mha) files itself. The same contract and the same scores as
../evaluation/evaluate.py (Dice; HD95 in mm, both surface directions pooled; both masks empty: 1 and 0; one empty: 0
and the image's diagonal): an organiser's cross-check that the numbers do not depend on one library."""

import json
import math
import zlib
from pathlib import Path

import numpy as np
from scipy import ndimage

INPUT = Path("/input")
GROUND_TRUTH = Path("/opt/ml/input/data/ground_truth")
OUTPUT = Path("/output")
SOCKET = "nodule-mask"
ELEMENT_TYPES = {"MET_UCHAR": np.uint8, "MET_CHAR": np.int8, "MET_USHORT": np.uint16, "MET_SHORT": np.int16,
                 "MET_UINT": np.uint32, "MET_INT": np.int32, "MET_FLOAT": np.float32, "MET_DOUBLE": np.float64}


def read_mha(path: Path) -> tuple[np.ndarray, tuple[float, ...]]:
    """A MetaImage with its data in the same file: the voxels as [z, y, x] and the spacing as (x, y, z)."""
    raw = path.read_bytes()
    header, position = {}, 0
    while True:
        end = raw.index(b"\n", position)
        key, _, value = raw[position:end].decode("ascii").partition("=")
        header[key.strip()] = value.strip()
        position = end + 1
        if key.strip() == "ElementDataFile":
            break
    if header["ElementDataFile"] != "LOCAL" or int(header.get("ElementNumberOfChannels", "1")) != 1:
        raise ValueError(f"{path.name}: expected one channel of data in the file itself")
    data = raw[position:]
    if header.get("CompressedData", "False") == "True":
        data = zlib.decompress(data)
    dtype = np.dtype(ELEMENT_TYPES[header["ElementType"]])
    dtype = dtype.newbyteorder(">" if header.get("BinaryDataByteOrderMSB", "False") == "True" else "<")
    size = [int(n) for n in header["DimSize"].split()]
    spacing = tuple(float(s) for s in header.get("ElementSpacing", " ".join(["1"] * len(size))).split())
    return np.frombuffer(data, dtype, count=math.prod(size)).reshape(size[::-1]), spacing


def surface(mask: np.ndarray) -> np.ndarray:
    """The mask's voxels with a face neighbour outside it."""
    return mask & ~ndimage.binary_erosion(mask, ndimage.generate_binary_structure(mask.ndim, 1), border_value=1)


def scores(predicted: np.ndarray, expected: np.ndarray, spacing: tuple[float, ...]) -> dict:
    total = int(predicted.sum() + expected.sum())
    dice = 1.0 if total == 0 else 2.0 * float((predicted & expected).sum()) / total
    if not predicted.any() and not expected.any():
        return {"dice": dice, "hd95": 0.0}
    if not predicted.any() or not expected.any():
        diagonal = math.sqrt(sum(((n - 1) * s) ** 2 for n, s in zip(expected.shape[::-1], spacing)))
        return {"dice": dice, "hd95": diagonal}
    sampling = spacing[::-1]  # [z, y, x]
    a, b = surface(predicted), surface(expected)
    distances = np.concatenate([ndimage.distance_transform_edt(~b, sampling=sampling)[a],
                                ndimage.distance_transform_edt(~a, sampling=sampling)[b]])
    return {"dice": dice, "hd95": float(np.percentile(distances, 95))}


def main() -> None:
    jobs = json.loads((INPUT / "predictions.json").read_text())
    cases = {}
    for job in jobs:
        image_name = next(value["image"]["name"] for value in job["inputs"] if value["image"])
        case = image_name.split(".", 1)[0]
        output = next(value for value in job["outputs"] if value["interface"]["slug"] == SOCKET)
        folder = INPUT / job["pk"] / "output" / output["interface"]["relative_path"]
        (mask_file,) = [p for p in folder.iterdir() if p.suffix == ".mha"]
        predicted, _ = read_mha(mask_file)
        expected, spacing = read_mha(GROUND_TRUTH / f"{case}.mha")
        cases[case] = scores(predicted > 0, expected > 0, spacing)
    aggregates = {metric: {"mean": float(np.mean([c[metric] for c in cases.values()])),
                           "std": float(np.std([c[metric] for c in cases.values()]))} for metric in ("dice", "hd95")}
    (OUTPUT / "metrics.json").write_text(json.dumps({"case": cases, "aggregates": aggregates}, indent=2))


if __name__ == "__main__":
    main()
