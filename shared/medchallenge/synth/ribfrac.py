"""RibFrac synthetic cohort: ellipsoid fractures along curved ribs, predictions by jitter/split/merge/drop/add.

Writes OUT/ground_truth (`RibFracNNN-label.nii.gz` + `ribfrac-synth-info.csv`) and OUT/predictions, either as the
official submission (`RibFracNNN.nii.gz` + `ribfrac-synth-pred.csv`, --layout files) or as grand-challenge's
`predictions.json` layout (--layout gc: per job an uint16 `.mha` in images/rib-fracture-instances and
rib-fracture-detections.json). Arrays are drawn in the official (x, y, z) index space.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..io import user_path

log = logging.getLogger("medchallenge.synth.ribfrac")

CLASS_CODES = (1, 2, 3, 4)  # Displaced, Nondisplaced, Buckle, Segmental
CLASS_WEIGHTS = (0.35, 0.35, 0.2, 0.1)
SPACING_MM = (0.78, 0.78, 1.25)
RIBS_PER_SIDE = 12


@dataclass(frozen=True)
class Fracture:
    """An ellipsoid in voxel coordinates (x, y, z): centre, unit axes, semi-axis lengths."""

    centre: tuple[float, float, float]
    axes: tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]
    radii: tuple[float, float, float]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=user_path, required=True, help="output folder (ground_truth/ and predictions/)")
    parser.add_argument("--cases", type=int, default=6, help="number of cases (default 6)")
    parser.add_argument("--shape", type=int, nargs=3, default=(96, 96, 64), metavar=("X", "Y", "Z"),
                        help="volume size in voxels (default 96 96 64; the benchmark uses 512 512 300)")
    parser.add_argument("--fractures", type=float, default=5.0, help="mean fractures per case (default 5)")
    parser.add_argument("--false-positives", type=float, default=2.0, help="mean added predictions per case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layout", choices=("files", "gc"), default="files",
                        help="predictions as the official submission (files) or grand-challenge predictions.json (gc)")
    parser.add_argument("--first-id", type=int, default=501, help="number of the first case id (RibFracNNN)")


class RibCage:
    """Ribs as elliptic arcs around the body axis, descending towards the front."""

    def __init__(self, shape: tuple[int, int, int]) -> None:
        self.shape = shape
        self.unit = max(min(shape[0], shape[1]) / 512, 0.25)

    def point(self, rib: int, side: int, phi: float) -> tuple[np.ndarray, np.ndarray]:
        """Position and unit tangent of rib `rib` (0..11) on `side` (-1/+1) at angle phi (0 back .. pi front)."""
        x_size, y_size, z_size = self.shape
        a, b = 0.42 * x_size, 0.36 * y_size
        z0 = z_size * (0.12 + 0.7 * rib / (RIBS_PER_SIDE - 1))
        drop = 0.12 * z_size
        position = np.array([x_size / 2 + side * a * np.sin(phi), y_size / 2 - b * np.cos(phi),
                             z0 - drop * phi / np.pi])
        tangent = np.array([side * a * np.cos(phi), b * np.sin(phi), -drop / np.pi])
        return position, tangent / np.linalg.norm(tangent)

    def fracture(self, rng: np.random.Generator, rib: int, side: int, phi: float,
                 length: float | None = None) -> Fracture:
        """An ellipsoid elongated along the rib at that point."""
        centre, tangent = self.point(rib, side, phi)
        normal = np.cross(tangent, [0.0, 0.0, 1.0])
        normal /= np.linalg.norm(normal)
        binormal = np.cross(tangent, normal)
        along = length if length is not None else max(2.0, self.unit * rng.uniform(6, 14))
        across = max(1.5, self.unit * rng.uniform(3, 6))
        return Fracture(tuple(centre), (tuple(tangent), tuple(normal), tuple(binormal)),
                        (along, across, across * rng.uniform(0.8, 1.2)))

    def random_site(self, rng: np.random.Generator) -> tuple[int, int, float]:
        return int(rng.integers(RIBS_PER_SIDE)), int(rng.choice((-1, 1))), float(rng.uniform(0.15, 0.85) * np.pi)


def paint(volume: np.ndarray, fracture: Fracture, label: int) -> None:
    """Set the voxels inside the ellipsoid to `label` (volume indexed [x, y, z]); later labels overwrite."""
    centre = np.asarray(fracture.centre)
    reach = max(fracture.radii)
    low = np.maximum(np.floor(centre - reach).astype(int), 0)
    high = np.minimum(np.ceil(centre + reach).astype(int) + 1, volume.shape)
    if np.any(high <= low):
        return
    grid = np.stack(np.meshgrid(*(np.arange(lo, hi) for lo, hi in zip(low, high)), indexing="ij"), axis=-1)
    offset = grid - centre
    inside = sum(((offset @ np.asarray(axis)) / radius) ** 2
                 for axis, radius in zip(fracture.axes, fracture.radii)) <= 1.0
    region = volume[low[0]:high[0], low[1]:high[1], low[2]:high[2]]
    region[inside] = label


def jitter(rng: np.random.Generator, fracture: Fracture) -> Fracture:
    shift = rng.normal(0, fracture.radii[1] / 2, 3)
    radii = tuple(r * rng.uniform(0.7, 1.4) for r in fracture.radii)
    return replace(fracture, centre=tuple(np.asarray(fracture.centre) + shift), radii=radii)


def split(fracture: Fracture) -> list[Fracture]:
    """Two halves along the rib."""
    tangent = np.asarray(fracture.axes[0])
    half = fracture.radii[0] / 2
    return [replace(fracture, centre=tuple(np.asarray(fracture.centre) + sign * 1.1 * half * tangent),
                    radii=(half * 0.9, *fracture.radii[1:])) for sign in (-1, 1)]


def merge(first: Fracture, second: Fracture) -> Fracture:
    """One ellipsoid covering both (for two fractures of one rib)."""
    a, b = np.asarray(first.centre), np.asarray(second.centre)
    direction = (b - a) / max(np.linalg.norm(b - a), 1e-6)
    normal = np.cross(direction, [0.0, 0.0, 1.0])
    normal /= max(np.linalg.norm(normal), 1e-6)
    return Fracture(tuple((a + b) / 2), (tuple(direction), tuple(normal), tuple(np.cross(direction, normal))),
                    (np.linalg.norm(b - a) / 2 + first.radii[0], first.radii[1], first.radii[2]))


def make_case(rng: np.random.Generator, cage: RibCage, mean_fractures: float, mean_fp: float,
              empty_gt: bool, empty_pred: bool):
    """(gt volume, gt rows [(label, code)], pred volume, pred rows [(label, confidence, code)])."""
    gt_objects: list[tuple[Fracture, int]] = []
    pairs = []
    count = 0 if empty_gt else int(rng.poisson(mean_fractures))
    while len(gt_objects) < count:
        rib, side, phi = cage.random_site(rng)
        code = -1 if rng.random() < 0.08 else int(rng.choice(CLASS_CODES, p=CLASS_WEIGHTS))
        if rng.random() < 0.2:  # segmental: a second fracture further along the same rib
            code = 4
            gap = float(rng.uniform(0.06, 0.12) * np.pi)
            pairs.append((len(gt_objects), len(gt_objects) + 1))
            gt_objects.append((cage.fracture(rng, rib, side, phi), code))
            gt_objects.append((cage.fracture(rng, rib, side, min(phi + gap, 0.9 * np.pi)), code))
        else:
            gt_objects.append((cage.fracture(rng, rib, side, phi), code))

    gt = np.zeros(cage.shape, dtype=np.uint8)
    for label, (fracture, _) in enumerate(gt_objects, start=1):
        paint(gt, fracture, label)

    predicted: list[tuple[Fracture, float, int]] = []
    merged = set()
    for first, second in pairs:
        if rng.random() < 0.4:
            merged.update((first, second))
            predicted.append((merge(gt_objects[first][0], gt_objects[second][0]), _true_confidence(rng), 4))
    for index, (fracture, code) in enumerate(gt_objects):
        if index in merged or rng.random() < 0.15:  # merged above, or dropped (missed)
            continue
        guess = _guess_code(rng, code)
        parts = split(fracture) if rng.random() < 0.1 else [jitter(rng, fracture)]
        predicted.extend((part, _true_confidence(rng), guess) for part in parts)
    for _ in range(int(rng.poisson(mean_fp))):
        predicted.append((cage.fracture(rng, *cage.random_site(rng)), round(float(rng.uniform(0.05, 0.8)), 3),
                          int(rng.choice(CLASS_CODES))))
    if empty_pred:
        predicted = []
    predicted = [predicted[i] for i in rng.permutation(len(predicted))]

    pred = np.zeros(cage.shape, dtype=np.uint8)
    for label, (fracture, _, _) in enumerate(predicted, start=1):
        paint(pred, fracture, label)
    gt_rows = [(0, 0)] + [(label, code) for label, (_, code) in enumerate(gt_objects, start=1)]
    pred_rows = [(0, 0.5, 0)] + [(label, conf, code) for label, (_, conf, code) in enumerate(predicted, start=1)]
    return gt, gt_rows, pred, pred_rows


def _true_confidence(rng: np.random.Generator) -> float:
    return round(float(np.clip(rng.normal(0.72, 0.15), 0.05, 0.99)), 3)


def _guess_code(rng: np.random.Generator, code: int) -> int:
    draw = rng.random()
    if draw < 0.05:
        return 0
    if draw < 0.1:
        return -1
    if draw < 0.75 and code > 0:
        return code
    return int(rng.choice(CLASS_CODES))


def write_volume(path: Path, volume_xyz: np.ndarray, dtype=np.uint8) -> None:
    """Write a label volume indexed [x, y, z] (NIfTI or MHA by extension, compressed)."""
    import SimpleITK as sitk

    image = sitk.GetImageFromArray(np.ascontiguousarray(volume_xyz.T.astype(dtype, copy=False)))
    image.SetSpacing(SPACING_MM)
    path.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(image, str(path), useCompression=True)


def write_stored_nifti(path: Path, stored: np.ndarray, slope: float = 1.0, inter: float = 0.0) -> None:
    """A NIfTI-1 file (`.nii` or `.nii.gz`) holding exactly `stored`, indexed [x, y, z], in its dtype and byte order,
    with these scale fields, as a writer that keeps a CT's header does (nibabel's own writers recompute them)."""
    import gzip

    import nibabel as nib

    header = nib.Nifti1Header(endianness=stored.dtype.byteorder if stored.dtype.byteorder in "<>" else "<")
    header.set_data_dtype(stored.dtype)
    header.set_data_shape(stored.shape)
    header.set_data_offset(352)
    header["scl_slope"], header["scl_inter"] = slope, inter
    path.parent.mkdir(parents=True, exist_ok=True)
    with (gzip.open if path.name.endswith(".gz") else open)(path, "wb") as handle:
        handle.write(header.binaryblock + b"\0" * 4 + stored.tobytes(order="F"))


def _write_csv(path: Path, header: tuple[str, ...], rows: list[tuple]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def _gc_job(pk: str, case_id: str, detections: dict) -> dict:
    return {
        "pk": pk, "status": "Succeeded",
        "inputs": [{"interface": {"slug": "ct-image", "kind": "Image", "super_kind": "Image",
                                  "relative_path": "images/ct"},
                    "value": None, "file": None, "image": {"pk": pk, "name": f"{case_id}-image.nii.gz"}}],
        "outputs": [
            {"interface": {"slug": "rib-fracture-instances", "kind": "Image", "super_kind": "Image",
                           "relative_path": "images/rib-fracture-instances"},
             "value": None, "file": None, "image": {"pk": pk, "name": "output.mha"}},
            {"interface": {"slug": "rib-fracture-detections", "kind": "Anything", "super_kind": "Value",
                           "relative_path": "rib-fracture-detections.json"},
             "value": detections, "file": None, "image": None},
        ],
    }


def run(args: argparse.Namespace) -> int:
    rng = np.random.default_rng(args.seed)
    cage = RibCage(tuple(args.shape))
    gt_dir, pred_dir = args.out / "ground_truth", args.out / "predictions"
    gt_table, pred_table, jobs = [], [], []
    for index in range(args.cases):
        case_id = f"RibFrac{args.first_id + index}"
        gt, gt_rows, pred, pred_rows = make_case(rng, cage, args.fractures, args.false_positives,
                                                 empty_gt=index % 5 == 4, empty_pred=index % 7 == 5)
        write_volume(gt_dir / f"{case_id}-label.nii.gz", gt)
        gt_table.extend((case_id, *row) for row in gt_rows)
        if args.layout == "files":
            write_volume(pred_dir / f"{case_id}.nii.gz", pred)
            pred_table.extend((case_id, *row) for row in pred_rows)
        else:
            pk = str(uuid.uuid5(uuid.NAMESPACE_URL, f"medchallenge/synth/ribfrac/{args.seed}/{case_id}"))
            output = pred_dir / pk / "output"
            write_volume(output / "images" / "rib-fracture-instances" / "output.mha", pred, np.uint16)
            detections = {"version": 1, "detections": [
                {"label_id": label, "confidence": conf, "label_code": code} for label, conf, code in pred_rows[1:]]}
            (output / "rib-fracture-detections.json").write_text(json.dumps(detections, indent=1))
            jobs.append(_gc_job(pk, case_id, detections))
        log.info("%s: %d fractures, %d predictions", case_id, len(gt_rows) - 1, len(pred_rows) - 1)
    _write_csv(gt_dir / "ribfrac-synth-info.csv", ("public_id", "label_id", "label_code"), gt_table)
    if args.layout == "files":
        _write_csv(pred_dir / "ribfrac-synth-pred.csv", ("public_id", "label_id", "confidence", "label_code"),
                   pred_table)
    else:
        (pred_dir / "predictions.json").write_text(json.dumps(jobs, indent=1))
    log.info("wrote %d cases to %s", args.cases, args.out)
    return 0
