"""Choose the RibFrac post-processing on validation cases with the project's evaluator (never the held-out seed).

    PYTHONPATH=$PWD/shared nice -n 10 .venv/bin/python training/tune_ribfrac_postprocessing.py \
        --model algorithms/ribfrac/model/ribfrac.onnx --cases 10 --seed 40000 --shape 256 256 160

Generates the cases, runs the network once per case (fracture probability; the classifier once per candidate
centroid), then for every combination of detector threshold, minimum size, minimum fracture probability of the
classifier and classifier weight writes the submission and scores it with `medchallenge.evaluators.ribfrac`.
Prints one JSON line per combination and the best by froc_average + macro_f1; the chosen values go to
`train_ribfrac_classifier.py`'s command line (Makefile `models`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import SimpleITK as sitk

from medchallenge.algorithms.ribfrac import (
    ALGORITHM,
    CasePrediction,
    FractureDetector,
    find_instances,
    normalise,
    resample_isotropic,
    sliding_window,
    to_ct_grid,
    work_mask,
)
from medchallenge.algorithms.runner import batch_cases, write_output
from medchallenge.evaluators.ribfrac import main as evaluate
from medchallenge.formats.ribfrac import case_id_from_gc_image_name
from medchallenge.imaging import read_ct
from medchallenge.io import write_text_atomic
from medchallenge.sockets import CT_IMAGE
from medchallenge.synth.ribfrac_ct import write_cohort

GRID = {"threshold": (0.3, 0.5), "min_voxels": (20, 60), "min_fracture_probability": (0.3, 0.5, 0.7, 0.85),
        "classifier_weight": (0.5, 1.0), "min_typed_probability": (0.0, 0.8, 0.9)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--cases", type=int, default=10)
    parser.add_argument("--seed", type=int, default=40_000)
    parser.add_argument("--shape", type=int, nargs=3, help="x y z of the cases (default: the generator's full size)")
    args = parser.parse_args(argv)
    if args.seed < 1000:
        raise SystemExit("seeds below 1000 are held out (the benchmark's cohort)")
    detector = FractureDetector(args.model, "cpu")
    with tempfile.TemporaryDirectory(prefix="tune_ribfrac_") as tmp:
        tmp = Path(tmp)
        write_cohort(tmp / "val", args.cases, args.seed, tuple(args.shape) if args.shape else None)
        cases = []
        for case in batch_cases(ALGORITHM, tmp / "val" / "input"):
            image, _ = read_ct(case.inputs[CT_IMAGE.slug])
            grid = resample_isotropic(image, detector.pre.spacing_mm)
            hu = sitk.GetArrayFromImage(grid)
            fracture = sliding_window(detector.run, normalise(hu, detector.pre), work_mask(hu, detector.pre),
                                      detector.pre)
            cases.append((case, image, grid, fracture, hu >= detector.pre.bone_hu, {}))
        results = []
        for values in itertools.product(*GRID.values()):
            post = replace(detector.post, **dict(zip(GRID, values)))
            out = tmp / "out"
            shutil.rmtree(out, ignore_errors=True)
            predictions = []
            for case, image, grid, fracture, bone, memo in cases:
                classify_new = detector.classifier_on(image, grid)

                def classify(centres: np.ndarray) -> np.ndarray:  # memoised per centroid
                    keys = [tuple(np.round(c, 3)) for c in centres]
                    missing = [k for k in keys if k not in memo]
                    if missing:
                        memo.update(zip(missing, classify_new(np.array(missing))))
                    return np.array([memo[k] for k in keys])

                labels, detections = find_instances(fracture, bone, post, detector.pre.spacing_mm, classify)
                label_image = sitk.GetImageFromArray(labels)
                label_image.CopyInformation(grid)
                prediction = CasePrediction(case_id_from_gc_image_name(case.name), to_ct_grid(label_image, image),
                                            detections)
                for name, value in ALGORITHM.case_outputs(case, prediction).items():
                    write_output(out / name, value)
                predictions.append((case, prediction))
            for name, text in ALGORITHM.run_files(predictions).items():
                write_text_atomic(out / name, text)
            evaluate(["--input", str(out), "--ground-truth", str(tmp / "val" / "ground_truth"), "--output",
                      str(tmp / "metrics"), "--no-progress", "--no-plots"])
            metrics = json.loads((tmp / "metrics" / "metrics.json").read_text())
            row = {**dict(zip(GRID, values)),
                   **{k: round(metrics["aggregates"][k], 4) for k in ("froc_average", "macro_f1")},
                   "confusion_matrix": metrics["meta"]["details"]["confusion_matrix"]["data"]}
            print(json.dumps(row), flush=True)
            results.append(row)
    best = max(results, key=lambda r: r["froc_average"] + r["macro_f1"])
    print("best:", json.dumps(best))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
