"""Train the RibFrac fracture detector (3-D U-Net, fracture probability + 3 appearances) on synthetic rib CTs and
export it to ONNX with its pre- and post-processing parameters in the metadata.

    PYTHONPATH=$PWD/shared nice -n 10 .venv-train/bin/python training/train_ribfrac.py \
        --out algorithms/ribfrac/model/ribfrac.onnx --seed 0

Seeded and CPU-only (2 threads). Cases come from `medchallenge.synth.ribfrac_ct` with generator seeds 30000+seed
(training) and 40000+seed (validation: chooses the instance threshold); the held-out benchmark cohort uses a seed
below 1000, which training never sees. Training volumes are 256 x 256 x 128 voxels at the generator's drawn
scanner spacings (a field of view on one lateral chest wall), resampled to the model grid as inference does.
Patches: centred on fractures (50 %), on bone away from fractures (hard negatives along the ribs, spine, sternum,
scapulae; 35 %) and anywhere in the work mask (15 %); flips on every axis. Needs torch, onnx, numpy, scipy, cc3d.
"""

from __future__ import annotations

import argparse
import copy
import logging
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import SimpleITK as sitk
import torch
import torch.nn as nn
import torch.nn.functional as F

from onnx_export import export_onnx

from medchallenge.algorithms.ribfrac import (
    APPEARANCE_CODES,
    DETECTOR_INPUT,
    DETECTOR_OUTPUT,
    Postprocessing,
    Preprocessing,
    find_instances,
    normalise,
    resample_isotropic,
    sliding_window,
    work_mask,
)
from medchallenge.onnx_session import META_POSTPROCESSING, META_PREPROCESSING
from medchallenge.synth.ribfrac_ct import APPEARANCES, case_rng, generate_case

log = logging.getLogger("train_ribfrac")

TRAIN_SEED_OFFSET = 30_000
VALIDATION_SEED_OFFSET = 40_000
TRAIN_SHAPE = (256, 256, 128)
KEY_FP = (0.5, 1, 2, 4, 8)


def conv_block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv3d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm3d(cout),
                         nn.LeakyReLU(0.1, inplace=True))


class FractureUNet(nn.Module):
    """Three-level 3-D U-Net; outputs the fracture probability (1 channel) and appearance probabilities (3)."""

    def __init__(self, base: int = 4):
        super().__init__()
        b = base
        self.enc1 = nn.Sequential(conv_block(1, b), conv_block(b, b))
        self.enc2 = nn.Sequential(conv_block(b, 2 * b), conv_block(2 * b, 2 * b))
        self.enc3 = nn.Sequential(conv_block(2 * b, 4 * b), conv_block(4 * b, 4 * b))
        self.up2 = nn.ConvTranspose3d(4 * b, 2 * b, 2, stride=2)
        self.dec2 = nn.Sequential(conv_block(4 * b, 2 * b), conv_block(2 * b, 2 * b))
        self.up1 = nn.ConvTranspose3d(2 * b, b, 2, stride=2)
        self.dec1 = nn.Sequential(conv_block(2 * b, b), conv_block(b, b))
        self.fracture_head = nn.Conv3d(b, 1, 1)
        self.appearance_head = nn.Conv3d(b, len(APPEARANCE_CODES), 1)
        self.pool = nn.MaxPool3d(2)

    def logits(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        e3 = self.enc3(self.pool(e2))
        d2 = self.dec2(torch.cat([self.up2(e3), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        return self.fracture_head(d1), self.appearance_head(d1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        fracture, appearance = self.logits(x)
        return torch.sigmoid(fracture), torch.softmax(appearance, dim=1)


def make_case(seed: int, index: int, pre: Preprocessing, keep_hu: bool = False, shape=TRAIN_SHAPE) -> dict:
    """One generated case on the model grid: input, targets, sampling pools."""
    case = generate_case(case_rng(seed, index), shape)
    image = sitk.GetImageFromArray(case.ct)
    image.SetSpacing(case.spacing)
    hu = sitk.GetArrayFromImage(resample_isotropic(image, pre.spacing_mm))
    labels_image = sitk.GetImageFromArray(case.labels)
    labels_image.SetSpacing(case.spacing)
    labels = sitk.GetArrayFromImage(resample_isotropic(labels_image, pre.spacing_mm, sitk.sitkNearestNeighbor, 0,
                                                       sitk.sitkUInt8))
    # appearance channel of each label (network order: buckle, nondisplaced, displaced), -1 = none
    appearance_of = np.full(256, -1, dtype=np.int8)
    for f in case.fractures:
        appearance_of[f.label] = APPEARANCES.index(f.appearance)  # the same order as APPEARANCE_CODES
    bone = hu >= pre.bone_hu
    mask = work_mask(hu, pre)
    from scipy import ndimage

    near_fracture = ndimage.maximum_filter(labels, size=9) > 0
    return {
        "input": normalise(hu, pre).astype(np.float16),
        "fracture": (labels > 0).astype(np.uint8),
        "appearance": appearance_of[labels],
        "fracture_voxels": np.argwhere(labels > 0),
        "bone_voxels": np.argwhere(bone & ~near_fracture)[::7],
        "mask_voxels": np.argwhere(mask)[::31],
        "hu": hu if keep_hu else None,
        "labels": labels,
        "codes": {f.label: f.code for f in case.fractures},
    }


def sample_batch(rng: np.random.Generator, cases: list[dict], batch: int, patch: int):
    xs, fs, aps = [], [], []
    for _ in range(batch):
        case = cases[int(rng.integers(len(cases)))]
        kind = rng.random()
        if kind < 0.5 and len(case["fracture_voxels"]):
            pool, jitter = case["fracture_voxels"], 8
        elif kind < 0.85 and len(case["bone_voxels"]):
            pool, jitter = case["bone_voxels"], 4
        else:
            pool, jitter = case["mask_voxels"], 4
        centre = pool[int(rng.integers(len(pool)))] + rng.integers(-jitter, jitter + 1, size=3)
        shape = case["input"].shape
        start = [int(np.clip(c - patch // 2, 0, max(n - patch, 0))) for c, n in zip(centre, shape)]
        sl = tuple(slice(s, s + patch) for s in start)
        x = case["input"][sl].astype(np.float32)
        f = case["fracture"][sl].astype(np.float32)
        a = case["appearance"][sl].astype(np.int64)
        pad = [(0, patch - n) for n in x.shape]
        x, f, a = np.pad(x, pad), np.pad(f, pad), np.pad(a, pad, constant_values=-1)
        for axis in range(3):
            if rng.random() < 0.5:
                x, f, a = np.flip(x, axis), np.flip(f, axis), np.flip(a, axis)
        x = x * rng.uniform(0.95, 1.05) + rng.uniform(-0.02, 0.02)
        xs.append(x[None])
        fs.append(f[None])
        aps.append(a)
    as_tensor = lambda arrays: torch.from_numpy(np.ascontiguousarray(np.stack(arrays)))  # noqa: E731
    return as_tensor(xs).float(), as_tensor(fs), as_tensor(aps)


def loss_fn(fracture_logits, appearance_logits, fracture, appearance) -> torch.Tensor:
    bce = F.binary_cross_entropy_with_logits(fracture_logits, fracture, pos_weight=torch.tensor(3.0))
    prob = torch.sigmoid(fracture_logits)
    dice = 1 - (2 * (prob * fracture).sum() + 1) / (prob.sum() + fracture.sum() + 1)
    loss = bce + dice
    if (appearance >= 0).any():
        loss = loss + 0.5 * F.cross_entropy(appearance_logits, appearance, ignore_index=-1)
    return loss


def froc_average(per_case: list[list[tuple[float, int | None]]], num_gt: int) -> float:
    """Mean recall at 0.5..8 FP per scan: detections as (confidence, hit fracture or None), hit at IoU > 0.2."""
    entries = sorted(((conf, case, hit) for case, dets in enumerate(per_case) for conf, hit in dets), reverse=True)
    hits, fps, points = set(), 0, [(0.0, 0.0)]
    for conf, case, hit in entries:
        if hit is None:
            fps += 1
        else:
            hits.add((case, hit))
        points.append((fps / len(per_case), len(hits) / max(num_gt, 1)))
    return float(np.mean([max(r for fp, r in points if fp <= k) for k in KEY_FP]))


def case_detections(labels_pred: np.ndarray, detections, labels_gt: np.ndarray) -> list[tuple[float, int | None]]:
    out = []
    for d in detections:
        pred = labels_pred == d.label_id
        best, best_iou = None, 0.2
        for g in np.unique(labels_gt[pred]):
            if g == 0:
                continue
            gt = labels_gt == g
            iou = (pred & gt).sum() / (pred | gt).sum()
            if iou > best_iou:
                best, best_iou = int(g), iou
        out.append((d.confidence, best))
    return out


def every_candidate(centres: np.ndarray) -> np.ndarray:
    """A stand-in classifier for validating the detector alone: every candidate is a (displaced) fracture."""
    return np.tile(np.eye(1 + len(APPEARANCE_CODES))[-1], (len(centres), 1))


@torch.no_grad()
def validate(model: FractureUNet, cases: list[dict], pre: Preprocessing) -> tuple[Postprocessing, float]:
    """The post-processing with the best proxy FROC average on `cases`, and that score; logs the mean fracture
    probability on fracture voxels and on other bone (does the model tell them apart at all?)."""
    was_training = model.training
    model.eval()

    def run(batch: np.ndarray) -> np.ndarray:
        return model(torch.from_numpy(batch))[0].numpy()

    maps = []
    for case in cases:
        hu = case["hu"]
        mask = work_mask(hu, pre)
        maps.append((sliding_window(run, normalise(hu, pre), mask, pre), hu >= pre.bone_hu, case))
    on_fracture = np.concatenate([fracture[case["labels"] > 0] for fracture, _, case in maps])
    on_bone = np.concatenate([fracture[bone & (case["labels"] == 0)] for fracture, bone, case in maps])
    log.info("validation mean probability: fracture voxels %.3f, other bone %.3f", on_fracture.mean(),
             on_bone.mean())
    model.train(was_training)
    num_gt = sum(int(c["labels"].max()) for c in cases)
    best = (Postprocessing(), -1.0)
    for threshold in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7):
        for min_voxels in (10, 30, 60):
            post = Postprocessing(threshold=threshold, min_voxels=min_voxels)
            per_case = []
            for fracture, bone, case in maps:
                labels, detections = find_instances(fracture, bone, post, pre.spacing_mm, every_candidate)
                per_case.append(case_detections(labels, detections, case["labels"]))
            score = froc_average(per_case, num_gt)
            log.info("validation threshold %.2f min_voxels %d: FROC average %.3f", threshold, min_voxels, score)
            if score > best[1]:
                best = (post, score)
    return best


def keep_best(best: tuple, model: FractureUNet, val: list[dict], pre: Preprocessing, step: int) -> tuple:
    """(post-processing, proxy FROC, step, weights) of the better of `best` and the model now (ties: the later)."""
    post, score = validate(model, val, pre)
    log.info("step %d: validation FROC average (proxy) %.4f with %s", step, score, post)
    return (post, score, step, copy.deepcopy(model.state_dict())) if score >= best[1] else best


def export_model(model: FractureUNet, out: Path, pre: Preprocessing, post: Postprocessing, training: dict) -> None:
    names = (DETECTOR_INPUT, DETECTOR_OUTPUT, "appearance_probability")
    export_onnx(model, torch.zeros(1, 1, 32, 32, 32), out, [names[0]], list(names[1:]),
                {META_PREPROCESSING: asdict(pre), META_POSTPROCESSING: asdict(post), "training": training},
                dynamic_axes={name: {0: "batch", 2: "z", 3: "y", 4: "x"} for name in names},
                doc_string="medchallenge RibFrac detector: fracture probability and appearance per voxel (1.6 mm grid)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="output .onnx path")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-cases", type=int, default=16)
    parser.add_argument("--val-cases", type=int, default=3)
    parser.add_argument("--minutes", type=float, default=20.0, help="training time budget (after data)")
    parser.add_argument("--steps", type=int, default=None,
                        help="train exactly this many steps instead of a time budget (reproduces a recorded model)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--patch", type=int, default=16, help="training patch edge (model grid voxels)")
    parser.add_argument("--base-channels", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--val-every", type=int, default=250,
                        help="validate every this many steps; the best checkpoint (proxy FROC) is exported")
    parser.add_argument("--threshold", type=float, default=None,
                        help="fix the post-processing (with --min-voxels, --confidence-mass-voxels) instead of the "
                             "one chosen on the validation cases")
    parser.add_argument("--min-voxels", type=int, default=20)
    parser.add_argument("--confidence-mass-voxels", type=float, default=0.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    pre = Preprocessing()
    started = time.perf_counter()
    train = []
    for i in range(args.train_cases):
        train.append(make_case(TRAIN_SEED_OFFSET + args.seed, i, pre))
        log.info("training case %d/%d: %d fractures (%.0f s)", i + 1, args.train_cases, len(train[-1]["codes"]),
                 time.perf_counter() - started)
    val = [make_case(VALIDATION_SEED_OFFSET + args.seed, i, pre, keep_hu=True) for i in range(args.val_cases)]
    log.info("generated %d training and %d validation cases (%d fractures) in %.0f s", len(train), len(val),
             sum(len(c["codes"]) for c in train), time.perf_counter() - started)

    model = FractureUNet(base=args.base_channels)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    budget = args.minutes * 60
    train_started = time.perf_counter()
    model.train()
    running, step = 0.0, 0
    best: tuple = (Postprocessing(), -1.0, 0, copy.deepcopy(model.state_dict()))
    while (step < args.steps) if args.steps else (time.perf_counter() - train_started < budget):
        step += 1
        progress = step / args.steps if args.steps else (time.perf_counter() - train_started) / budget
        for group in optimiser.param_groups:  # warm-up, then cosine decay over the time budget
            group["lr"] = 3e-3 * min(1.0, step / 50) * 0.5 * (1 + np.cos(np.pi * min(progress, 1.0)))
        x, f, a = sample_batch(rng, train, args.batch, args.patch)
        loss = loss_fn(*model.logits(x), f, a)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        running = 0.95 * running + 0.05 * loss.item() if step > 1 else loss.item()
        if step % 25 == 0:
            log.info("step %d loss %.4f (%.0f s)", step, running, time.perf_counter() - started)
        if step % args.val_every == 0:
            best = keep_best(best, model, val, pre, step)

    best = keep_best(best, model, val, pre, step)
    post, val_score, best_step, state = best
    model.load_state_dict(state)
    log.info("best checkpoint: step %d, validation FROC average (proxy) %.4f with %s", best_step, val_score, post)
    if args.threshold is not None:
        post = Postprocessing(threshold=args.threshold, min_voxels=args.min_voxels,
                              confidence_mass_voxels=args.confidence_mass_voxels)
        log.info("post-processing fixed by the command line: %s", post)
    training = {
        "generator": "medchallenge.synth.ribfrac_ct", "shape_xyz": list(TRAIN_SHAPE),
        "train_seed": TRAIN_SEED_OFFSET + args.seed, "train_cases": args.train_cases,
        "validation_seed": VALIDATION_SEED_OFFSET + args.seed, "validation_cases": args.val_cases,
        "validation_froc_average_proxy": round(val_score, 4), "steps": step, "best_step": best_step, "batch": args.batch,
        "patch": args.patch, "base_channels": args.base_channels, "torch": torch.__version__,
        "seconds": round(time.perf_counter() - started),
    }
    export_model(model, args.out, pre, post, training)
    log.info("wrote %s (%.2f MB) after %.0f s", args.out, args.out.stat().st_size / 1e6, time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
