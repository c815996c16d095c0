"""The lung-nodule challenge's evaluation, as its organiser writes it for grand-challenge's evaluation contract:
/input/predictions.json lists the algorithm's jobs, each job's mask is at
/input/<job pk>/output/images/nodule-mask/, the ground truth at /opt/ml/input/data/ground_truth/<case>.mha, and
the scores go to /output/metrics.json. SimpleITK reads the images and measures the surfaces.

Per case: Dice, and HD95 (the 95th percentile of the distances, in mm, from each surface voxel of one mask to the
other mask's surface, both directions pooled, as MedPy's hd95). Both masks empty: Dice 1, HD95 0. One empty: Dice 0,
HD95 the image's diagonal (the farthest any two voxels can be), so that a missed or invented nodule costs the most.
"""

import json
import math
from pathlib import Path

import numpy as np
import SimpleITK as sitk

INPUT = Path("/input")
GROUND_TRUTH = Path("/opt/ml/input/data/ground_truth")
OUTPUT = Path("/output")
SOCKET = "nodule-mask"


def case_id(image_name: str) -> str:
    """The case an uploaded image was: its file name without the extensions (lung-001.mha -> lung-001)."""
    return image_name.split(".", 1)[0]


def read_mask(path: Path) -> sitk.Image:
    return sitk.Cast(sitk.ReadImage(str(path)) > 0, sitk.sitkUInt8)


def surface_distances(surface: sitk.Image, other_surface: sitk.Image) -> np.ndarray:
    """The distance (mm) of each voxel of `surface` to the nearest voxel of `other_surface`."""
    distance = sitk.SignedMaurerDistanceMap(other_surface, insideIsPositive=False, squaredDistance=False,
                                            useImageSpacing=True)
    return np.abs(sitk.GetArrayViewFromImage(distance)[sitk.GetArrayViewFromImage(surface) > 0])


def diagonal(image: sitk.Image) -> float:
    return math.sqrt(sum(((n - 1) * s) ** 2 for n, s in zip(image.GetSize(), image.GetSpacing())))


def scores(prediction: sitk.Image, truth: sitk.Image) -> dict:
    predicted = sitk.GetArrayViewFromImage(prediction) > 0
    expected = sitk.GetArrayViewFromImage(truth) > 0
    total = int(predicted.sum() + expected.sum())
    dice = 1.0 if total == 0 else 2.0 * float((predicted & expected).sum()) / total
    if not predicted.any() and not expected.any():
        return {"dice": dice, "hd95": 0.0}
    if not predicted.any() or not expected.any():
        return {"dice": dice, "hd95": diagonal(truth)}
    surfaces = [sitk.BinaryContour(mask, fullyConnected=False) for mask in (prediction, truth)]
    distances = np.concatenate([surface_distances(surfaces[0], surfaces[1]),
                                surface_distances(surfaces[1], surfaces[0])])
    return {"dice": dice, "hd95": float(np.percentile(distances, 95))}


def main() -> None:
    jobs = json.loads((INPUT / "predictions.json").read_text())
    cases = {}
    for job in jobs:
        image_name = next(value["image"]["name"] for value in job["inputs"] if value["image"])
        output = next(value for value in job["outputs"] if value["interface"]["slug"] == SOCKET)
        folder = INPUT / job["pk"] / "output" / output["interface"]["relative_path"]
        (mask_file,) = [p for p in folder.iterdir() if p.suffix in (".mha", ".tif", ".tiff")]
        prediction = read_mask(mask_file)
        truth = read_mask(GROUND_TRUTH / f"{case_id(image_name)}.mha")
        prediction.CopyInformation(truth)  # the algorithm's image geometry, as the ground truth's
        cases[case_id(image_name)] = scores(prediction, truth)
    aggregates = {metric: {"mean": float(np.mean([c[metric] for c in cases.values()])),
                           "std": float(np.std([c[metric] for c in cases.values()]))} for metric in ("dice", "hd95")}
    (OUTPUT / "metrics.json").write_text(json.dumps({"case": cases, "aggregates": aggregates}, indent=2))


if __name__ == "__main__":
    main()
