"""object-CXR: synthetic ground truth (rectangles, ellipses, concave polygons) and point predictions.

Writes OUT/ground_truth/annotations.csv and OUT/predictions/ with classification.csv + localization.csv (run files,
default) or GC's predictions.json layout (per job foreign-object-likelihood.json and foreign-objects.json).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np

from ..io import user_path, write_json_atomic, write_text_atomic

IMAGE_SIZE = 2048
FIRST_IMAGE_NUMBER = 8001  # the public test images are named 08001.jpg ... (image_path per row: object-cxr.md §1)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=user_path, required=True, help="output folder (ground_truth/ and predictions/)")
    parser.add_argument("--images", type=int, default=1000, help="number of images (default %(default)s)")
    parser.add_argument("--points", type=int, default=30, help="predicted points per image (default %(default)s)")
    parser.add_argument("--positive-fraction", type=float, default=0.5,
                        help="fraction of images with foreign objects (default %(default)s)")
    parser.add_argument("--layout", choices=("run-files", "gc"), default="run-files",
                        help="predictions as classification.csv + localization.csv, or GC predictions.json")
    parser.add_argument("--seed", type=int, default=0)


def _polygon(rng: np.random.Generator, cx: float, cy: float, radius: float) -> list[int]:
    """A star-shaped (usually concave) polygon with 6-14 integer vertices around (cx, cy)."""
    n = int(rng.integers(6, 15))
    angles = np.sort(rng.uniform(0, 2 * np.pi, n))
    radii = radius * rng.uniform(0.4, 1.0, n)
    xs = np.rint(cx + radii * np.cos(angles)).astype(int)
    ys = np.rint(cy + radii * np.sin(angles)).astype(int)
    return np.column_stack([xs, ys]).ravel().tolist()


def generate(images: int, points: int, positive_fraction: float, seed: int) -> dict:
    """Ground-truth rows and predictions (as plain Python data) for `images` images."""
    rng = np.random.default_rng(seed)
    names = [f"test/{FIRST_IMAGE_NUMBER + i:05d}.jpg" for i in range(images)]
    annotations, centres = [], []
    for _ in range(images):
        objects, image_centres = [], []
        if rng.random() < positive_fraction:
            for _ in range(int(rng.integers(1, 8))):
                kind = int(rng.choice(3, p=[0.4, 0.3, 0.3]))
                cx, cy = rng.uniform(300, IMAGE_SIZE - 300, 2)
                half_w, half_h = rng.uniform(8, 120, 2)
                if kind == 2:
                    coords = _polygon(rng, cx, cy, max(half_w, half_h))
                else:
                    coords = [int(cx - half_w), int(cy - half_h), int(cx + half_w), int(cy + half_h)]
                objects.append(f"{kind} " + " ".join(map(str, coords)))
                image_centres.append((cx, cy, min(half_w, half_h)))
        annotations.append(";".join(objects))
        centres.append(image_centres)
    classification = []
    localization = []
    for image_centres in centres:
        positive = bool(image_centres)
        classification.append(float(np.clip(rng.normal(0.7 if positive else 0.3, 0.2), 0, 1)))
        triples = []
        for cx, cy, size in image_centres[:points]:
            if rng.random() < 0.8:  # a point near the object's centre, usually a hit
                x, y = rng.normal((cx, cy), 0.3 * size)
                triples.append((rng.uniform(0.3, 1.0), x, y))
        while len(triples) < points:
            x, y = rng.uniform(0, IMAGE_SIZE, 2)
            triples.append((rng.uniform(0.0, 0.7), x, y))
        order = rng.permutation(len(triples))
        localization.append([(round(p, 4), round(x, 1), round(y, 1)) for p, x, y in (triples[k] for k in order)])
    return {"names": names, "annotations": annotations, "classification": classification,
            "localization": localization}


def write_run_files(out: Path, cohort: dict) -> None:
    rows = [f"{n},{p:.4f}" for n, p in zip(cohort["names"], cohort["classification"])]
    write_text_atomic(out / "classification.csv", "image_path,prediction\n" + "\n".join(rows) + "\n")
    rows = [n + "," + ";".join(f"{p:g} {x:g} {y:g}" for p, x, y in triples)
            for n, triples in zip(cohort["names"], cohort["localization"])]
    write_text_atomic(out / "localization.csv", "image_path,prediction\n" + "\n".join(rows) + "\n")


def _socket(slug: str, kind: str, super_kind: str, relative_path: str) -> dict:
    return {"slug": slug, "kind": kind, "super_kind": super_kind, "relative_path": relative_path}


def write_gc_layout(out: Path, cohort: dict) -> None:
    """GC's evaluation input: predictions.json plus /input/<job-pk>/output/<relative_path> per job."""
    jobs = []
    for i, (name, likelihood, triples) in enumerate(zip(cohort["names"], cohort["classification"],
                                                        cohort["localization"])):
        pk = f"job-{i + 1:06d}"
        upload_name = name.rsplit("/", 1)[-1]
        points = {"name": "Foreign objects", "type": "Multiple points", "version": {"major": 1, "minor": 0},
                  "points": [{"name": f"p{k + 1}", "point": [x, y, 0], "probability": p}
                             for k, (p, x, y) in enumerate(triples)]}
        write_json_atomic(out / pk / "output" / "foreign-object-likelihood.json", round(likelihood, 4), indent=None)
        write_json_atomic(out / pk / "output" / "foreign-objects.json", points, indent=None)
        jobs.append({
            "pk": pk,
            "status": "Succeeded",
            "inputs": [{"interface": _socket("chest-x-ray", "Image", "Image", "images/chest-x-ray"),
                        "value": None, "file": None, "image": {"pk": f"image-{i + 1}", "name": upload_name}}],
            "outputs": [
                {"interface": _socket("foreign-object-likelihood", "Float", "Value", "foreign-object-likelihood.json"),
                 "value": round(likelihood, 4), "file": None, "image": None},
                {"interface": _socket("foreign-objects", "Multiple points", "File", "foreign-objects.json"),
                 "value": None, "file": f"https://example.invalid/{pk}/foreign-objects.json", "image": None},
            ],
        })
    write_json_atomic(out / "predictions.json", jobs, indent=None)


def run(args: argparse.Namespace) -> int:
    cohort = generate(args.images, args.points, args.positive_fraction, args.seed)
    rows = [f"{n},{a}" for n, a in zip(cohort["names"], cohort["annotations"])]
    write_text_atomic(args.out / "ground_truth" / "annotations.csv", "image_path,annotation\n" + "\n".join(rows) + "\n")
    if args.layout == "gc":
        write_gc_layout(args.out / "predictions", cohort)
    else:
        write_run_files(args.out / "predictions", cohort)
    n_objects = sum(len(a.split(";")) for a in cohort["annotations"] if a)
    logging.getLogger("medchallenge").info(
        "object-cxr: %d images, %d objects, %d points -> %s", args.images, n_objects,
        sum(map(len, cohort["localization"])), args.out)
    return 0
