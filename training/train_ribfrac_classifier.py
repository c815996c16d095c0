"""Train the RibFrac instance classifier (second stage) and store it with the detector in one ONNX model.

    PYTHONPATH=$PWD/shared nice -n 10 .venv-train/bin/python training/train_ribfrac_classifier.py \
        --detector build/ribfrac-detector.onnx --out algorithms/ribfrac/model/ribfrac.onnx --seed 0

The detector (`train_ribfrac.py`) finds candidates: connected components of its fracture probability. The
classifier looks at a crop around each candidate, finer than the detector's grid (0.8 mm, 32^3 voxels, taken from
the CT itself), and says: not a fracture, buckle, nondisplaced or displaced. Its training crops, from synthetic
cases of `medchallenge.synth.ribfrac_ct` (generator seed 50000+seed, never the validation or held-out seeds), are
centred on (a) every ground-truth fracture, (b) every candidate the detector finds at a low threshold (true
fractures and the detector's false positives: the hard negatives) and (c) a few random bone voxels; each is
stored 8 voxels larger and cut at a random offset (jitter of +-4 voxels), flipped on every axis.

The output model holds both graphs: inputs `ct` (detector) and `instance_crops` (classifier), each with a tiny
default value so that either graph runs alone; the metadata keeps the detector's entries, with the post-processing
given on the command line and the classifier's training record added. Seeded; CPU-only (2 threads).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import SimpleITK as sitk
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

from onnx_export import export_onnx
from train_ribfrac import TRAIN_SHAPE, conv_block

from medchallenge.algorithms.ribfrac import (
    CLASSIFIER_INPUT,
    CLASSIFIER_OUTPUT,
    DETECTOR_INPUT,
    DETECTOR_OUTPUT,
    Postprocessing,
    Preprocessing,
    instance_crops,
    normalise,
    resample_isotropic,
    sliding_window,
    work_mask,
)
from medchallenge.onnx_session import META_POSTPROCESSING, META_PREPROCESSING
from medchallenge.synth.ribfrac_ct import APPEARANCES, case_rng, generate_case

log = logging.getLogger("train_ribfrac_classifier")

CLASSIFIER_SEED_OFFSET = 50_000
CLASSES = ("none", *APPEARANCES)  # the classifier's outputs; APPEARANCES is in the order of APPEARANCE_CODES
JITTER = 4  # crops are stored this many voxels larger on each side
CANDIDATE_THRESHOLD = 0.3  # detector probability of the training candidates (lower than inference: more negatives)
CANDIDATE_MIN_VOXELS = 10
RANDOM_BONE_CROPS = 4


class CropClassifier(nn.Module):
    """Small 3-D CNN: 32^3 crop -> 4 class probabilities (not a fracture, buckle, nondisplaced, displaced)."""

    def __init__(self, base: int = 8):
        super().__init__()
        b = base
        self.features = nn.Sequential(  # a strided first convolution keeps it cheap on a shared 2-core CPU
            nn.Conv3d(1, b, 3, stride=2, padding=1, bias=False), nn.BatchNorm3d(b), nn.LeakyReLU(0.1, inplace=True),
            conv_block(b, 2 * b), nn.MaxPool3d(2),
            conv_block(2 * b, 4 * b), nn.MaxPool3d(2),
            conv_block(4 * b, 8 * b), nn.AdaptiveAvgPool3d(1))
        self.head = nn.Linear(8 * b, len(CLASSES))

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.logits(x), dim=1)


def detector_session(path: Path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def case_crops(session: ort.InferenceSession, seed: int, index: int, pre: Preprocessing, rng: np.random.Generator
               ) -> tuple[np.ndarray, np.ndarray]:
    """Crops (n, s+2J, s+2J, s+2J; float16) and their classes (index into CLASSES) of one generated case."""
    from scipy import ndimage

    case = generate_case(case_rng(seed, index), TRAIN_SHAPE)
    image = sitk.GetImageFromArray(case.ct)
    image.SetSpacing(case.spacing)
    image.SetOrigin(case.origin)
    grid = resample_isotropic(image, pre.spacing_mm)
    hu = sitk.GetArrayFromImage(grid)
    labels_image = sitk.GetImageFromArray(case.labels)
    labels_image.CopyInformation(image)
    labels = sitk.GetArrayFromImage(resample_isotropic(labels_image, pre.spacing_mm, sitk.sitkNearestNeighbor, 0,
                                                       sitk.sitkUInt8))
    class_of = {f.label: 1 + APPEARANCES.index(f.appearance) for f in case.fractures}
    points, classes = [], []
    # (a) every ground-truth fracture, centred on its mask (CT grid)
    for label, (z, y, x) in zip(np.unique(case.labels[case.labels > 0]),
                                ndimage.center_of_mass(case.labels > 0, case.labels,
                                                       np.unique(case.labels[case.labels > 0]))):
        points.append(image.TransformContinuousIndexToPhysicalPoint((x, y, z)))
        classes.append(class_of[int(label)])
    # (b) the detector's candidates at a low threshold: the class of the fracture they overlap most, else none
    fracture = sliding_window(lambda b: session.run([DETECTOR_OUTPUT], {DETECTOR_INPUT: b})[0],
                              normalise(hu, pre), work_mask(hu, pre), pre)
    import cc3d

    components = cc3d.connected_components(fracture >= CANDIDATE_THRESHOLD, connectivity=26)
    for k, box in enumerate(ndimage.find_objects(components), start=1):
        if box is None:
            continue
        inside = components[box] == k
        if inside.sum() < CANDIDATE_MIN_VOXELS:
            continue
        overlap = labels[box][inside]
        overlap = overlap[overlap > 0]
        centre = [s.start + c for s, c in zip(box, ndimage.center_of_mass(inside))]
        points.append(grid.TransformContinuousIndexToPhysicalPoint([float(v) for v in centre[::-1]]))
        classes.append(class_of[int(np.bincount(overlap).argmax())] if overlap.size else 0)
    # (c) a few random bone voxels away from fractures
    near_fracture = ndimage.maximum_filter(labels, size=9) > 0
    bone = np.argwhere((hu >= pre.bone_hu) & ~near_fracture)
    for z, y, x in bone[rng.integers(len(bone), size=RANDOM_BONE_CROPS)] if len(bone) else []:
        points.append(grid.TransformContinuousIndexToPhysicalPoint((float(x), float(y), float(z))))
        classes.append(0)
    crops = instance_crops(image, np.asarray(points, dtype=np.float64).reshape(-1, 3), pre,
                           pre.crop_size + 2 * JITTER)
    return crops.astype(np.float16), np.asarray(classes, dtype=np.int64)


def sample_batch(rng: np.random.Generator, crops: np.ndarray, classes: np.ndarray, batch: int, size: int):
    """Class-balanced batch: random offset (jitter), flips, small intensity changes."""
    by_class = [np.flatnonzero(classes == c) for c in range(len(CLASSES))]
    by_class = [b for b in by_class if len(b)]
    xs, ys = [], []
    for _ in range(batch):
        pool = by_class[int(rng.integers(len(by_class)))]
        i = int(pool[rng.integers(len(pool))])
        z, y, x = rng.integers(0, 2 * JITTER + 1, size=3)
        crop = crops[i, z:z + size, y:y + size, x:x + size].astype(np.float32)
        for axis in range(3):
            if rng.random() < 0.5:
                crop = np.flip(crop, axis)
        xs.append(crop * rng.uniform(0.95, 1.05) + rng.uniform(-0.02, 0.02))
        ys.append(classes[i])
    return torch.from_numpy(np.ascontiguousarray(np.stack(xs)[:, None])), torch.from_numpy(np.asarray(ys))


@torch.no_grad()
def confusion(model: CropClassifier, crops: np.ndarray, classes: np.ndarray, size: int) -> np.ndarray:
    """Confusion matrix (rows truth, columns prediction) on the centre crops."""
    model.eval()
    centre = crops[:, JITTER:JITTER + size, JITTER:JITTER + size, JITTER:JITTER + size].astype(np.float32)
    predicted = np.concatenate([model(torch.from_numpy(centre[i:i + 64, None])).argmax(1).numpy()
                                for i in range(0, len(centre), 64)])
    model.train()
    matrix = np.zeros((len(CLASSES), len(CLASSES)), dtype=np.int64)
    np.add.at(matrix, (classes, predicted), 1)
    return matrix


def merge_with_detector(detector: Path, classifier: Path, out: Path, post: Postprocessing, pre: Preprocessing
                        ) -> None:
    """One model: the detector's graph and metadata plus the classifier's graph (names prefixed) and its training
    record; tiny default values for both inputs; the post-processing replaced by `post`. Written atomically."""
    merged = onnx.load(str(detector))
    second = onnx.compose.add_prefix(onnx.load(str(classifier)), "classifier/", rename_inputs=False,
                                     rename_outputs=False)
    graph = merged.graph
    keep = [o for o in graph.output if o.name == DETECTOR_OUTPUT]  # the old appearance head is not used
    del graph.output[:]
    graph.output.extend(keep + list(second.graph.output))
    graph.node.extend(second.graph.node)
    graph.initializer.extend(second.graph.initializer)
    graph.input.extend(second.graph.input)
    graph.initializer.extend([numpy_helper.from_array(np.zeros((1, 1, 4, 4, 4), np.float32), DETECTOR_INPUT),
                              numpy_helper.from_array(np.zeros((1, 1, *(pre.crop_size,) * 3), np.float32),
                                                      CLASSIFIER_INPUT)])
    meta = {p.key: p.value for p in merged.metadata_props}
    meta.update({p.key: p.value for p in second.metadata_props})
    meta[META_POSTPROCESSING] = json.dumps(asdict(post), separators=(",", ":"))
    meta[META_PREPROCESSING] = json.dumps(asdict(pre), separators=(",", ":"))
    del merged.metadata_props[:]
    for key, value in meta.items():
        entry = merged.metadata_props.add()
        entry.key, entry.value = key, value
    merged.doc_string = ("medchallenge RibFrac: detector (fracture probability per voxel, 1.6 mm grid) and instance "
                         "classifier (not a fracture / buckle / nondisplaced / displaced, 0.8 mm crops)")
    onnx.checker.check_model(merged)
    tmp = out.with_name(out.name + ".tmp")
    onnx.save(merged, str(tmp))
    os.replace(tmp, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--detector", type=Path, required=True, help="the detector's ONNX (train_ribfrac.py)")
    parser.add_argument("--out", type=Path, required=True, help="output .onnx path (detector + classifier)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", type=int, default=60)
    parser.add_argument("--cache", type=Path, default=None, help="crops file (.npz): read if it exists, else written")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--base-channels", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--threshold", type=float, default=0.5, help="post-processing: detector threshold")
    parser.add_argument("--min-voxels", type=int, default=60)
    parser.add_argument("--confidence-mass-voxels", type=float, default=100.0)
    parser.add_argument("--min-fracture-probability", type=float, default=0.5)
    parser.add_argument("--classifier-weight", type=float, default=1.0)
    parser.add_argument("--min-typed-probability", type=float, default=0.0,
                        help="below it a kept candidate's type is 'uncertain' (label code -1)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    pre = Preprocessing()
    started = time.perf_counter()
    if args.cache and args.cache.exists():
        data = np.load(args.cache)
        crops, classes, case_of = data["crops"], data["classes"], data["case"]
    else:
        session = detector_session(args.detector)
        parts = []
        for i in range(args.cases):
            parts.append(case_crops(session, CLASSIFIER_SEED_OFFSET + args.seed, i, pre, rng))
            log.info("case %d/%d: %d crops, classes %s (%.0f s)", i + 1, args.cases, len(parts[-1][1]),
                     np.bincount(parts[-1][1], minlength=len(CLASSES)).tolist(), time.perf_counter() - started)
        crops = np.concatenate([p[0] for p in parts])
        classes = np.concatenate([p[1] for p in parts])
        case_of = np.concatenate([np.full(len(p[1]), i) for i, p in enumerate(parts)])
        if args.cache:
            np.savez(args.cache, crops=crops, classes=classes, case=case_of)
    # the last sixth of the cases checks the classifier (confusion matrix), the rest trains it
    held = case_of >= int(case_of.max() * 5 / 6) + 1
    log.info("crops: %d training, %d checking; classes %s", int((~held).sum()), int(held.sum()),
             dict(zip(CLASSES, np.bincount(classes, minlength=len(CLASSES)).tolist())))
    model = CropClassifier(base=args.base_channels)
    optimiser = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    size = pre.crop_size
    model.train()
    running = 0.0
    for step in range(1, args.steps + 1):
        for group in optimiser.param_groups:
            group["lr"] = 2e-3 * min(1.0, step / 50) * 0.5 * (1 + np.cos(np.pi * step / args.steps))
        x, y = sample_batch(rng, crops[~held], classes[~held], args.batch, size)
        loss = F.cross_entropy(model.logits(x), y)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        running = 0.95 * running + 0.05 * loss.item() if step > 1 else loss.item()
        if step % 50 == 0:
            log.info("step %d loss %.4f (%.0f s)", step, running, time.perf_counter() - started)
        if step % 500 == 0 or step == args.steps:
            matrix = confusion(model, crops[held], classes[held], size)
            log.info("step %d: checking crops, rows truth %s, columns prediction:\n%s (accuracy %.3f)", step,
                     CLASSES, matrix, np.trace(matrix) / max(matrix.sum(), 1))
    post = Postprocessing(threshold=args.threshold, min_voxels=args.min_voxels,
                          confidence_mass_voxels=args.confidence_mass_voxels,
                          min_fracture_probability=args.min_fracture_probability,
                          classifier_weight=args.classifier_weight,
                          min_typed_probability=args.min_typed_probability)
    training = {"generator": "medchallenge.synth.ribfrac_ct", "shape_xyz": list(TRAIN_SHAPE),
                "seed": CLASSIFIER_SEED_OFFSET + args.seed, "cases": int(case_of.max()) + 1,
                "crops": {c: int(n) for c, n in zip(CLASSES, np.bincount(classes, minlength=len(CLASSES)))},
                "check_confusion_rows_truth": matrix.tolist(), "steps": args.steps, "batch": args.batch,
                "base_channels": args.base_channels, "torch": torch.__version__,
                "seconds": round(time.perf_counter() - started)}
    classifier = args.out.with_name(args.out.stem + "-classifier.onnx")
    export_onnx(model, torch.zeros(2, 1, size, size, size), classifier, [CLASSIFIER_INPUT], [CLASSIFIER_OUTPUT],
                {"classifier_training": training}, dynamic_axes={CLASSIFIER_INPUT: {0: "batch"},
                                                                 CLASSIFIER_OUTPUT: {0: "batch"}},
                doc_string="medchallenge RibFrac instance classifier")
    merge_with_detector(args.detector, classifier, args.out, post, pre)
    classifier.unlink()
    log.info("wrote %s (%.2f MB) after %.0f s", args.out, args.out.stat().st_size / 1e6, time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
