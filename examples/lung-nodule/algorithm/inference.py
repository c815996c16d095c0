"""A lung-nodule segmentation algorithm as a participant writes one for grand-challenge: the CT from
/input/images/ct/, the mask to /output/images/nodule-mask/, its settings from the model tarball at
/opt/ml/model/model.json (grand-challenge unpacks a team's model.tar.gz there).

Soft tissue inside the lung (above `threshold` HU), components smaller than `min_voxels` dropped, then dilated by
`dilate` voxels: a baseline, not a detector anyone should use."""

import json
from pathlib import Path

import SimpleITK as sitk

INPUT = Path("/input/images/ct")
OUTPUT = Path("/output/images/nodule-mask")
MODEL = Path("/opt/ml/model/model.json")
DEFAULTS = {"threshold": -350, "min_voxels": 6, "dilate": 0}


def settings() -> dict:
    if MODEL.is_file():
        return {**DEFAULTS, **json.loads(MODEL.read_text())}
    return DEFAULTS


def segment(ct: sitk.Image, threshold: float, min_voxels: int, dilate: int) -> sitk.Image:
    foreground = sitk.BinaryThreshold(ct, lowerThreshold=threshold, upperThreshold=1e6, insideValue=1, outsideValue=0)
    components = sitk.RelabelComponent(sitk.ConnectedComponent(foreground), minimumObjectSize=min_voxels)
    mask = sitk.Cast(components > 0, sitk.sitkUInt8)
    if dilate:
        mask = sitk.BinaryDilate(mask, [dilate] * mask.GetDimension())
    return mask


def main() -> None:
    (ct_file,) = [p for p in INPUT.iterdir() if p.suffix in (".mha", ".tif", ".tiff")]
    options = settings()
    mask = segment(sitk.ReadImage(str(ct_file)), options["threshold"], options["min_voxels"], options["dilate"])
    OUTPUT.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(mask, str(OUTPUT / "output.mha"), useCompression=True)


if __name__ == "__main__":
    main()
