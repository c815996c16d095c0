"""Train the TB caverns detector on synthetic CTs and export it to ONNX (with its parameters in the metadata).

    PYTHONPATH=$PWD/shared .venv-train/bin/python training/train_tb_caverns.py \
        --out algorithms/tb_caverns/model/tb_caverns.onnx --seed 0

Seeded and CPU-only (2 threads): about 11 minutes on a shared 2-core machine (3 of them generating the cases). Training cases come from
`medchallenge.synth.tb_caverns` with generator seeds 10000+seed (training) and 20000+seed (validation, used to choose
the detection thresholds); the project's held-out cohorts use small seeds (`--seed 1` of the synth CLI), which
training never sees. Needs torch, onnx, numpy and scipy.
"""

from __future__ import annotations

import argparse
import logging
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from onnx_export import export_onnx

from medchallenge.algorithms.tb_caverns import (
    Postprocessing,
    Preprocessing,
    block_features,
    probabilities_to_detections,
)
from medchallenge.metrics.tb_caverns import case_counts, sequential_mean, threshold_score
from medchallenge.onnx_session import META_POSTPROCESSING, META_PREPROCESSING
from medchallenge.synth.tb_caverns import DEFAULT_SHAPE, DEFAULT_SPACING, case_rng, generate_case

log = logging.getLogger("train_tb_caverns")

TRAIN_SEED_OFFSET = 10_000
VALIDATION_SEED_OFFSET = 20_000


def conv_block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv3d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm3d(cout),
                         nn.LeakyReLU(0.1, inplace=True))


class CavernUNet(nn.Module):
    """A three-level 3-D U-Net; the output is the cavern probability per coarse voxel."""

    def __init__(self, in_channels: int = 3, base: int = 12):
        super().__init__()
        b = base
        self.enc1 = nn.Sequential(conv_block(in_channels, b), conv_block(b, b))
        self.enc2 = nn.Sequential(conv_block(b, 2 * b), conv_block(2 * b, 2 * b))
        self.enc3 = nn.Sequential(conv_block(2 * b, 4 * b), conv_block(4 * b, 4 * b))
        self.up2 = nn.ConvTranspose3d(4 * b, 2 * b, 2, stride=2)
        self.dec2 = nn.Sequential(conv_block(4 * b, 2 * b), conv_block(2 * b, 2 * b))
        self.up1 = nn.ConvTranspose3d(2 * b, b, 2, stride=2)
        self.dec1 = nn.Sequential(conv_block(2 * b, b), conv_block(b, b))
        self.head = nn.Conv3d(b, 1, 1)
        self.pool = nn.MaxPool3d(2)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        e3 = self.enc3(self.pool(e2))
        d2 = self.dec2(torch.cat([self.up2(e3), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        return self.head(d1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.logits(x))


def coarse_fraction(mask_zyx: np.ndarray, pre: Preprocessing, grid_shape: tuple[int, int, int]) -> np.ndarray:
    """Fraction of `mask` voxels per block, on the network's (padded) coarse grid."""
    bz, by, bx = pre.block_zyx
    padded = np.zeros([g * b for g, b in zip(grid_shape, pre.block_zyx)], dtype=np.uint8)
    z, y, x = mask_zyx.shape
    padded[:z, :y, :x] = mask_zyx
    blocks = padded.reshape(grid_shape[0], bz, grid_shape[1], by, grid_shape[2], bx)
    return blocks.sum(axis=5, dtype=np.float32).sum(axis=3).sum(axis=1) / float(bz * by * bx)


def make_case(seed: int, index: int, pre: Preprocessing, shape) -> dict:
    case = generate_case(case_rng(seed, index), shape)
    ct_zyx = case.ct.T  # C-contiguous (z, y, x) view
    features = block_features(ct_zyx, pre)
    grid = features.shape[1:]
    target = coarse_fraction(case.cavern_labels.T > 0, pre, grid)
    lungs = coarse_fraction(case.lung_mask_v2.T > 0, pre, grid) > 0.5
    # look-alikes: lung blocks full of air (bullae, bronchi) or of soft tissue (nodules, vessels), not caverns
    look_alikes = lungs & (target == 0) & ((features[1] > 0.6) | (features[2] > 0.6))
    return {
        "features": features.astype(np.float16),
        "target": target.astype(np.float16),
        "lung_voxels": np.argwhere(lungs),
        "cavern_voxels": np.argwhere(target > 0.5),
        "look_alike_voxels": np.argwhere(look_alikes),
        "shape_zyx": ct_zyx.shape,
        "boxes": [b.corners() for b in case.boxes],
    }


def sample_batch(rng: np.random.Generator, cases: list[dict], batch: int, patch: tuple[int, int, int]):
    """Patches centred on caverns (40 %), on look-alikes (30 %) or anywhere in the lungs; left-right flips."""
    xs, ys = [], []
    for _ in range(batch):
        case = cases[int(rng.integers(len(cases)))]
        kind = rng.random()
        if kind < 0.4 and len(case["cavern_voxels"]):
            pool = case["cavern_voxels"]
        elif kind < 0.7 and len(case["look_alike_voxels"]):
            pool = case["look_alike_voxels"]
        else:
            pool = case["lung_voxels"]
        centre = pool[int(rng.integers(len(pool)))] + rng.integers(-6, 7, size=3) * np.array([0.5, 1, 1])
        grid = case["features"].shape[1:]
        start = [int(np.clip(c - p // 2, 0, max(g - p, 0))) for c, p, g in zip(centre, patch, grid)]
        sl = tuple(slice(s, s + p) for s, p in zip(start, patch))
        x = case["features"][(slice(None), *sl)].astype(np.float32)
        y = case["target"][sl].astype(np.float32)[None]
        pad = [(0, 0)] + [(0, p - s) for p, s in zip(patch, x.shape[1:])]
        x, y = np.pad(x, pad, mode="edge"), np.pad(y, pad)
        if rng.random() < 0.5:
            x, y = x[..., ::-1], y[..., ::-1]
        xs.append(x)
        ys.append(y)
    return torch.from_numpy(np.ascontiguousarray(np.stack(xs))), torch.from_numpy(np.ascontiguousarray(np.stack(ys)))


def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    bce = F.binary_cross_entropy_with_logits(logits, target)
    prob = torch.sigmoid(logits)
    dice = 1 - (2 * (prob * target).sum() + 1) / (prob.sum() + target.sum() + 1)
    return bce + 0.5 * dice


def case_score(gt: list, pred: list) -> float:
    """The official per-case score (greedy first-come matching; empty-case rules), from the project's metric."""
    _, counts = case_counts(gt, pred)
    return sequential_mean([threshold_score(*count) for count in counts])


@torch.no_grad()
def predict(model: CavernUNet, features: np.ndarray) -> np.ndarray:
    return model(torch.from_numpy(features.astype(np.float32))[None])[0, 0].numpy()


def tune_postprocessing(probs: list[np.ndarray], cases: list[dict], pre: Preprocessing) -> tuple[Postprocessing, float]:
    """The post-processing thresholds with the best mean case score on the validation cases."""
    best = (Postprocessing(), -1.0)
    for component in (0.3, 0.4, 0.5):
        for refine in (0.3, 0.4, 0.5, 0.6):
            for min_score in (0.5, 0.6, 0.7, 0.8, 0.9):
                post = Postprocessing(component, refine, min_score, 2)
                score = float(np.mean([
                    case_score(c["boxes"], [d.corners() for d in probabilities_to_detections(p, c["shape_zyx"], pre, post)])
                    for p, c in zip(probs, cases)
                ]))
                if score > best[1]:
                    best = (post, score)
    return best


def export_model(model: CavernUNet, out: Path, pre: Preprocessing, post: Postprocessing, training: dict) -> None:
    axes = {0: "batch", 2: "z", 3: "y", 4: "x"}
    export_onnx(model, torch.zeros(1, 3, 8, 16, 16), out, ["features"], ["cavern_probability"],
                {META_PREPROCESSING: asdict(pre), META_POSTPROCESSING: asdict(post), "training": training},
                dynamic_axes={"features": axes, "cavern_probability": axes},
                doc_string="medchallenge TB caverns detector: cavern probability per coarse voxel")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="output .onnx path")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-cases", type=int, default=80)
    parser.add_argument("--val-cases", type=int, default=16)
    parser.add_argument("--iterations", type=int, default=1500)
    parser.add_argument("--batch", type=int, default=6)
    parser.add_argument("--patch", type=int, nargs=3, default=[16, 48, 48], metavar=("Z", "Y", "X"),
                        help="coarse patch size (default 16 48 48)")
    parser.add_argument("--base-channels", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    pre = Preprocessing(spacing_xyz_mm=DEFAULT_SPACING)  # the spacing the cases are generated at
    started = time.perf_counter()

    train = [make_case(TRAIN_SEED_OFFSET + args.seed, i, pre, DEFAULT_SHAPE) for i in range(args.train_cases)]
    val = [make_case(VALIDATION_SEED_OFFSET + args.seed, i, pre, DEFAULT_SHAPE) for i in range(args.val_cases)]
    log.info("generated %d training and %d validation cases in %.0f s", len(train), len(val),
             time.perf_counter() - started)

    model = CavernUNet(base=args.base_channels)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=3e-3, total_steps=args.iterations,
                                                   pct_start=0.1)
    model.train()
    running = 0.0
    for step in range(1, args.iterations + 1):
        x, y = sample_batch(rng, train, args.batch, tuple(args.patch))
        loss = loss_fn(model.logits(x), y)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        running = 0.95 * running + 0.05 * loss.item() if step > 1 else loss.item()
        if step % 50 == 0:
            log.info("step %d/%d loss %.4f (%.0f s)", step, args.iterations, running, time.perf_counter() - started)

    model.eval()
    probs = [predict(model, c["features"]) for c in val]
    post, val_score = tune_postprocessing(probs, val, pre)
    log.info("validation mean case score %.4f with %s", val_score, post)
    training = {
        "generator": "medchallenge.synth.tb_caverns", "shape_xyz": list(DEFAULT_SHAPE),
        "train_seed": TRAIN_SEED_OFFSET + args.seed, "train_cases": args.train_cases,
        "validation_seed": VALIDATION_SEED_OFFSET + args.seed, "validation_cases": args.val_cases,
        "validation_score": round(val_score, 4), "iterations": args.iterations, "batch": args.batch,
        "patch_zyx": args.patch, "base_channels": args.base_channels, "torch": torch.__version__,
        "seconds": round(time.perf_counter() - started),
    }
    export_model(model, args.out, pre, post, training)
    log.info("wrote %s (%.2f MB) after %.0f s", args.out, args.out.stat().st_size / 1e6, time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
