"""Synthetic chest CT patches with lung nodules, their masks, and three teams' models and submissions file: what
an organiser of a lung-nodule segmentation challenge has before a phase opens (here made up, reproducibly).

    python examples/lung-nodule/make_data.py --out lung-data [--cases 4] [--seed 0]

Writes OUT/cases/lung-NNN.mha (int16 Hounsfield units: lung parenchyma around -850 HU with noise, vessels, and
0-3 nodules of soft tissue), OUT/ground-truth/lung-NNN.mha (uint8: 1 inside a nodule), OUT/models/<team>.tar.gz
(the algorithm's settings as model.json, one per team) and OUT/submissions.toml (three teams on the example's
algorithm image, each with its model). The last case has no nodule, as some scans of a screening cohort have none.
Needs numpy and SimpleITK.
"""

from __future__ import annotations

import argparse
import io
import json
import tarfile
from pathlib import Path

import numpy as np
import SimpleITK as sitk

SHAPE = (24, 48, 48)  # z, y, x voxels
SPACING = (0.8, 0.8, 1.5)  # x, y, z mm
MARGIN = 4  # voxels of plain parenchyma along every border
# the teams' settings (the algorithm's model.json): a fair threshold, a low one (vessels leak in), a dilation
TEAMS = {"alpha": {"threshold": -350, "min_voxels": 6, "dilate": 0},
         "beta": {"threshold": -650, "min_voxels": 2, "dilate": 0},
         "gamma": {"threshold": -350, "min_voxels": 6, "dilate": 1}}
ALGORITHM_IMAGE = "lung-nodule-algorithm:1"


def case_volume(rng: np.random.Generator, nodules: int) -> tuple[np.ndarray, np.ndarray]:
    """One CT patch (HU) and its nodule mask."""
    z, y, x = np.indices(SHAPE)
    ct = np.full(SHAPE, -850.0)
    mask = np.zeros(SHAPE, np.uint8)
    for _ in range(2):  # vessels: thin tubes of -300 HU
        y0, x0 = rng.uniform(MARGIN + 4, SHAPE[1] - MARGIN - 4, 2)
        tube = np.hypot(y - y0 - 0.3 * (z - SHAPE[0] / 2), x - x0) < rng.uniform(0.8, 1.4)
        tube &= (z >= MARGIN) & (z < SHAPE[0] - MARGIN)
        ct[tube] = -300
    for _ in range(nodules):
        radius = rng.uniform(2.0, 4.5)  # voxels in-plane; fewer along z, whose voxels are longer
        centre = [rng.uniform(MARGIN + radius, s - MARGIN - radius) for s in SHAPE]
        inside = (((z - centre[0]) * SPACING[2] / SPACING[0]) ** 2 + (y - centre[1]) ** 2
                  + (x - centre[2]) ** 2) <= radius ** 2
        ct[inside] = 20
        mask[inside] = 1
    blurred = sitk.GetArrayFromImage(sitk.SmoothingRecursiveGaussian(image(ct), 0.9))  # the partial volume, in mm
    ct = blurred + rng.normal(0, 45, SHAPE)
    return np.clip(ct, -1024, 3071).astype(np.int16), mask


def image(array: np.ndarray) -> sitk.Image:
    result = sitk.GetImageFromArray(array)
    result.SetSpacing(SPACING)
    return result


def model_tarball(settings: dict) -> bytes:
    data = json.dumps(settings, indent=2).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("model.json")
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cases", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    for folder in ("cases", "ground-truth", "models"):
        (args.out / folder).mkdir(parents=True, exist_ok=True)
    for index in range(1, args.cases + 1):
        nodules = 0 if index == args.cases else int(rng.integers(1, 4))
        ct, mask = case_volume(rng, nodules)
        sitk.WriteImage(image(ct), str(args.out / "cases" / f"lung-{index:03d}.mha"), useCompression=True)
        sitk.WriteImage(image(mask), str(args.out / "ground-truth" / f"lung-{index:03d}.mha"), useCompression=True)
    entries = []
    for team, settings in TEAMS.items():
        (args.out / "models" / f"{team}.tar.gz").write_bytes(model_tarball(settings))
        entries.append(f'[[submission]]\nteam = "{team}"\nimage = "{ALGORITHM_IMAGE}"\n'
                       f'model = "models/{team}.tar.gz"\n')
    (args.out / "submissions.toml").write_text("\n".join(entries))
    print(f"{args.cases} cases, their masks and {len(TEAMS)} teams' submissions in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
