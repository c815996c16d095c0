"""Train the object-CXR foreign-object detector on synthetic radiographs and export it to ONNX (parameters in metadata).

    PYTHONPATH=shared python training/train_object_cxr.py --data DIR [DIR ...] --out algorithms/object_cxr/model/object_cxr.onnx

Each DIR is a cohort of `python -m medchallenge.synth object-cxr-images` (input/*.jpg, ground_truth/annotations.csv),
made with a training seed that the benchmark's held-out seed never equals. Images go through the algorithm's own
reader and pre-processing (`medchallenge.algorithms.object_cxr`), so training and inference see the same input.

The network is a small fully convolutional heat-map model (CenterNet-style, one channel at stride 4): an encoder to
stride 32 with a dilated context block, a decoder adding skip connections back to stride 4, and a sigmoid head. Its
target is each annotation's shape (rectangle, ellipse, polygon) drawn at heat-map resolution: a point anywhere inside
an annotation detects it (object-cxr.md §3), so the network learns "inside a foreign object". With --resume and
--hard-fraction, part of the crops are centred on the resumed model's strongest false maxima (hard negatives: ECG
snaps, collimation corners). The image probability (mean of the heat map's highest cells, flip averaging) is chosen
afterwards on a validation cohort by `training/tune_object_cxr.py`. Seeded; needs torch, onnx, numpy and pillow.
Training stops after --minutes, or after --steps.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFilter
from torch import nn

from onnx_export import export_onnx

from medchallenge.algorithms.object_cxr import Postprocessing, Preprocessing, network_input, read_radiograph
from medchallenge.onnx_session import META_POSTPROCESSING, META_PREPROCESSING


def norm(channels: int, folded: bool) -> nn.Module:
    """Batch norm, or nothing where it has been folded into the convolution before (an exported model resumed)."""
    return nn.Identity() if folded else nn.BatchNorm2d(channels)


def conv(cin: int, cout: int, stride: int = 1, dilation: int = 1, folded: bool = False) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, padding=dilation, dilation=dilation, bias=folded),
                         norm(cout, folded), nn.ReLU(inplace=True))


class HeatmapNet(nn.Module):
    """Patchify stem to stride 4, encoder to stride 32 (dilated context), decoder with skips back to stride 4;
    output: foreign-object probability per cell. Narrow on purpose: it must run at 10 images/s on 2 CPU cores."""

    def __init__(self, width: int = 16, folded: bool = False):
        super().__init__()
        w, f = width, folded
        self.stem = nn.Sequential(nn.Conv2d(1, w, 4, 4, bias=f), norm(w, f), nn.ReLU(inplace=True),
                                  conv(w, w, folded=f))  # stride 4
        self.down8 = nn.Sequential(conv(w, 2 * w, 2, folded=f), conv(2 * w, 2 * w, folded=f))
        self.down16 = nn.Sequential(conv(2 * w, 3 * w, 2, folded=f), conv(3 * w, 3 * w, folded=f))
        self.down32 = nn.Sequential(conv(3 * w, 4 * w, 2, folded=f), conv(4 * w, 4 * w, dilation=2, folded=f))
        self.lat32 = nn.Conv2d(4 * w, 2 * w, 1)
        self.lat16 = nn.Conv2d(3 * w, 2 * w, 1)
        self.lat8 = nn.Conv2d(2 * w, 2 * w, 1)
        self.fuse8 = conv(2 * w, w, folded=f)
        self.head = nn.Sequential(conv(w, w, folded=f), nn.Conv2d(w, 1, 1))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        s4 = self.stem(x)
        s8 = self.down8(s4)
        s16 = self.down16(s8)
        s32 = self.down32(s16)
        y = self.up(self.lat32(s32)) + self.lat16(s16)
        y = self.fuse8(self.up(y) + self.lat8(s8))
        return self.head(self.up(y) + s4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.logits(x))


def load_exported(model: HeatmapNet, path: Path) -> None:
    """Load an exported model's weights (batch norm folded into its convolutions) into a `folded` network: ONNX
    Conv nodes in graph order are the network's convolutions in the order its forward pass runs them."""
    import onnx
    from onnx import numpy_helper

    proto = onnx.load(str(path))
    weights = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    order: list[nn.Conv2d] = []
    hooks = [m.register_forward_hook(lambda module, *_: order.append(module))
             for m in model.modules() if isinstance(m, nn.Conv2d)]
    with torch.no_grad():
        model.logits(torch.zeros(1, 1, 64, 64))
    for hook in hooks:
        hook.remove()
    nodes = [n for n in proto.graph.node if n.op_type == "Conv"]
    assert len(nodes) == len(order), (len(nodes), len(order))
    with torch.no_grad():
        for node, module in zip(nodes, order):
            module.weight.copy_(torch.from_numpy(weights[node.input[1]]))
            module.bias.copy_(torch.from_numpy(weights[node.input[2]]))


def annotation_mask(annotation: str, size: tuple[int, int], grid: tuple[int, int]) -> np.ndarray:
    """The annotation's shapes drawn on the heat-map grid (image pixels (W, H) -> grid (rows, columns))."""
    rows, columns = grid
    sx, sy = columns / size[0], rows / size[1]
    canvas = Image.new("L", (columns, rows), 0)
    draw = ImageDraw.Draw(canvas)
    for shape in filter(None, annotation.split(";")):
        kind, *values = shape.split(" ")
        xy = [(float(x) * sx, float(y) * sy) for x, y in zip(values[::2], values[1::2])]
        if kind == "0":
            draw.rectangle([xy[0], xy[1]], fill=1)
        elif kind == "1":
            draw.ellipse([xy[0], xy[1]], fill=1)
        elif kind == "2":
            draw.polygon(xy, fill=1)
    return np.asarray(canvas, dtype=np.float32)


def load_cohort(folder: Path, pre: Preprocessing, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """Network inputs (float16) and target masks (uint8) of every image of a cohort."""
    grid = (pre.input_size[0] // stride, pre.input_size[1] // stride)
    lines = (folder / "ground_truth" / "annotations.csv").read_text().splitlines()[1:]
    images, masks = [], []
    for line in lines:
        name, annotation = line.split(",", 1)
        radiograph = read_radiograph(folder / "input" / name, pre.input_size[::-1])
        images.append(network_input(radiograph, pre)[0, 0].astype(np.float16))
        masks.append(annotation_mask(annotation, radiograph.size, grid).astype(np.uint8))
    return np.stack(images), np.stack(masks)


def hard_negatives(model_path: Path, images: np.ndarray, masks: np.ndarray, border: int, per_image: int = 3,
                   min_score: float = 0.05) -> list[tuple[int, int, int]]:
    """(image, row, column) heat-map cells where an exported model is most wrong: its strongest local maxima outside
    the foreign objects (support devices, collimation edges, dense anatomy), at most `per_image` per image, at or
    above `min_score`, away from the `border` cells that post-processing ignores."""
    from medchallenge.algorithms.object_cxr import Postprocessing, heatmap_peaks
    from medchallenge.onnx_session import create_session

    session = create_session(model_path, "cpu")
    name = session.get_inputs()[0].name
    post = Postprocessing(min_score=min_score, max_points=4 * per_image, border_cells=border)
    found = []
    for k in range(len(images)):
        (heat,) = session.run(None, {name: images[k][None, None].astype(np.float32)})
        heat = heat[0, 0]
        heat[:border], heat[-border:], heat[:, :border], heat[:, -border:] = 0, 0, 0, 0
        near_object = np.asarray(Image.fromarray(masks[k] * 255).filter(ImageFilter.MaxFilter(5))) > 0
        peaks = [(k, int(round(r)), int(round(c))) for _, c, r in heatmap_peaks(heat, post)
                 if not near_object[int(round(r)), int(round(c))]]
        found += peaks[:per_image]
    return found


def sample_crops(rng: np.random.Generator, images: np.ndarray, masks: np.ndarray, batch: int, crop: int,
                 stride: int, object_fraction: float = 0.6, hard: list[tuple[int, int, int]] = (),
                 hard_fraction: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """`batch` crops of `crop` input pixels (the network is fully convolutional; crops cost a fraction of whole
    images), centred near a foreign object for `object_fraction` of them, near a hard negative (`hard`: image, row,
    column) for `hard_fraction`, anywhere otherwise."""
    cells = crop // stride
    grid_rows, grid_columns = masks.shape[1:]
    xs, ys = [], []
    for _ in range(batch):
        k = int(rng.integers(len(images)))
        draw = rng.random()
        positives = np.argwhere(masks[k]) if draw < object_fraction else np.zeros((0, 2))
        if len(hard) and object_fraction <= draw < object_fraction + hard_fraction:
            k, *centre = hard[rng.integers(len(hard))]
            positives = np.array([centre])
        if len(positives):
            r, c = positives[rng.integers(len(positives))] + rng.integers(-cells // 3, cells // 3 + 1, 2)
            r0, c0 = r - cells // 2, c - cells // 2
        else:
            r0, c0 = rng.integers(0, grid_rows - cells + 1), rng.integers(0, grid_columns - cells + 1)
        r0, c0 = int(np.clip(r0, 0, grid_rows - cells)), int(np.clip(c0, 0, grid_columns - cells))
        xs.append(images[k, r0 * stride:(r0 + cells) * stride, c0 * stride:(c0 + cells) * stride])
        ys.append(masks[k, r0:r0 + cells, c0:c0 + cells])
    return np.stack(xs), np.stack(ys)


def augment(rng: np.random.Generator, images: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Left-right flips, contrast/brightness/gamma and noise on the scaled input."""
    images, masks = images.astype(np.float32), masks.astype(np.float32)
    flip = rng.random(len(images)) < 0.5
    images[flip], masks[flip] = images[flip, :, ::-1], masks[flip, :, ::-1]
    gain = rng.uniform(0.8, 1.25, (len(images), 1, 1)).astype(np.float32)
    bias = rng.uniform(-0.1, 0.1, (len(images), 1, 1)).astype(np.float32)
    gamma = rng.uniform(0.8, 1.25, (len(images), 1, 1)).astype(np.float32)
    images = np.sign(images) * np.abs(images) ** gamma * gain + bias
    images += rng.normal(0, rng.uniform(0, 0.03), images.shape).astype(np.float32)
    return np.ascontiguousarray(images[:, None]), np.ascontiguousarray(masks[:, None])


def focal_loss(logits: torch.Tensor, target: torch.Tensor, alpha: float = 0.75, gamma: float = 2.0) -> torch.Tensor:
    """Focal loss, normalised by the number of positive cells (at least one per image)."""
    p = torch.sigmoid(logits)
    bce = nn.functional.binary_cross_entropy_with_logits(logits, target, reduction="none")
    weight = torch.where(target > 0.5, alpha * (1 - p) ** gamma, (1 - alpha) * p ** gamma)
    return (weight * bce).sum() / torch.clamp(target.sum(), min=float(len(target)))


def export_model(model: HeatmapNet, out: Path, pre: Preprocessing, post: Postprocessing, training: dict) -> None:
    export_onnx(model, torch.zeros(1, 1, *pre.input_size), out, ["radiograph"], ["heatmap"],
                {META_PREPROCESSING: pre.__dict__, META_POSTPROCESSING: post.__dict__, "training": training})


def _training_of(path: Path) -> str:
    """The `training` metadata of an exported model."""
    import onnx

    return next(p.value for p in onnx.load(str(path)).metadata_props if p.key == "training")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, nargs="+", required=True, help="cohorts of object-cxr-images")
    parser.add_argument("--out", type=Path, required=True, help="output .onnx path")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--width", type=int, default=16, help="channels at stride 4")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--crop", type=int, default=192, help="training crop in input pixels (multiple of 32)")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--minutes", type=float, default=20.0, help="training time budget")
    parser.add_argument("--steps", type=int, default=0,
                        help="stop after this many steps instead (reproduces a run: the model card gives its steps); "
                             "the learning rate then decays over the steps")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--resume", type=Path, help="continue from an exported model (batch norm stays folded)")
    parser.add_argument("--object-fraction", type=float, default=0.6, help="crops centred near a foreign object")
    parser.add_argument("--hard-fraction", type=float, default=0.0,
                        help="crops centred on the resumed model's strongest false maxima (hard negatives)")
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    pre, post = Preprocessing(), Postprocessing()
    started = time.time()
    cohorts = [load_cohort(folder, pre, post.stride) for folder in args.data]
    images = np.concatenate([c[0] for c in cohorts])
    masks = np.concatenate([c[1] for c in cohorts])
    print(f"{len(images)} images ({int((masks.reshape(len(masks), -1).max(1) > 0).sum())} with objects) loaded in "
          f"{time.time() - started:.0f} s", flush=True)

    hard = hard_negatives(args.resume, images, masks, post.border_cells) if args.resume and args.hard_fraction else []
    if args.hard_fraction:
        print(f"{len(hard)} hard negatives from {args.resume}", flush=True)
    model = HeatmapNet(args.width, folded=args.resume is not None)
    if args.resume:
        load_exported(model, args.resume)
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    budget = args.minutes * 60
    started, step, losses = time.time(), 0, []
    while True:
        elapsed = time.time() - started
        if (step >= args.steps) if args.steps else (elapsed >= budget):
            break
        progress = step / args.steps if args.steps else elapsed / budget
        for group in optimiser.param_groups:  # cosine decay over the budget
            group["lr"] = args.lr * 0.5 * (1 + np.cos(np.pi * min(progress, 1.0)))
        x, y = augment(rng, *sample_crops(rng, images, masks, args.batch, args.crop, post.stride,
                                          args.object_fraction, hard, args.hard_fraction))
        model.train()
        loss = focal_loss(model.logits(torch.from_numpy(x)), torch.from_numpy(y))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
        step += 1
        if step % 25 == 0:
            print(f"step {step} ({elapsed / 60:.1f} min): loss {np.mean(losses[-25:]):.4f}", flush=True)
    training = {"images": int(len(images)), "steps": step, "batch": args.batch, "crop": args.crop, "seed": args.seed,
                "minutes": round((time.time() - started) / 60, 1), "final_loss": round(float(np.mean(losses[-50:])), 4),
                "data": [str(p) for p in args.data], "width": args.width, "lr": args.lr,
                "object_fraction": args.object_fraction, "hard_fraction": args.hard_fraction, "hard_negatives": len(hard),
                "resumed_from": json.loads(_training_of(args.resume)) if args.resume else None}
    export_model(model, args.out, pre, post, training)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB): {json.dumps(training)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
