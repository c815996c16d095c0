"""Choose the object-CXR model's pre- and post-processing on a validation cohort and write them into its metadata.

    PYTHONPATH=shared python training/tune_object_cxr.py --model algorithms/object_cxr/model/object_cxr.onnx \
        --data build/object_cxr_val_4100 [more cohorts]

The validation cohorts (`python -m medchallenge.synth object-cxr-images`) have seeds of their own, used neither in
training nor by the benchmark's held-out set. Each candidate (the downscaling of a larger radiograph to the input:
area mean or bilinear; the image probability as the mean of the heat map's 1 ... N highest cells; with or without
averaging the heat map with the mirrored image's) is scored on them by the project's evaluator (`auc`, `froc`); the
one with the highest `auc + froc` is kept. The operating threshold (stated in the model card: a point at or above it
is called a foreign object, and an image is called positive when its strongest point reaches it; the image
probability, a mean of the highest cells, never exceeds the strongest point) is the strongest-point score with the
highest sensitivity + specificity (Youden's J) over the cohorts' images with the chosen processing. The model file is
rewritten with that `preprocessing` and `postprocessing` and a `tuning` entry (the cohorts, the operating point,
every candidate's scores). Needs onnx, numpy and pillow.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from onnx_export import update_metadata

from medchallenge.algorithms.object_cxr import (ForeignObjectDetector, Postprocessing, network_input,
                                                prediction_from_heatmap, read_radiograph, run_files)
from medchallenge.algorithms.runner import Case
from medchallenge.evaluators.object_cxr import main as evaluate
from medchallenge.onnx_session import META_POSTPROCESSING, META_PREPROCESSING

TOP_CELLS = (1, 4, 9, 16, 36, 64, 100, 144)
DOWNSCALE = ("area", "bilinear")


def predictions(detector: ForeignObjectDetector, heat_maps: list, post: Postprocessing) -> list:
    """(case, prediction) of every image of the cohort with post-processing `post`."""
    return [(Case(name, {}), prediction_from_heatmap(heat, radiograph, detector.pre, post))
            for name, radiograph, heat in heat_maps]


def youden_threshold(scores: list[float], positive: list[bool]) -> dict[str, float]:
    """The score with the highest sensitivity + specificity - 1 (the highest such threshold on ties), with its
    sensitivity and specificity."""
    p, y = np.asarray(scores, float), np.asarray(positive, bool)
    best = None
    for threshold in np.unique(p):
        sensitivity, specificity = float((p[y] >= threshold).mean()), float((p[~y] < threshold).mean())
        if best is None or sensitivity + specificity >= best[1] + best[2]:
            best = (float(threshold), sensitivity, specificity)
    return {"threshold": round(best[0], 4), "sensitivity": round(best[1], 4), "specificity": round(best[2], 4)}


def score(detector: ForeignObjectDetector, ground_truth: Path, heat_maps: list, post: Postprocessing,
          work: Path) -> dict[str, float]:
    """The evaluator's `auc` and `froc` of the cohort's predictions with post-processing `post`."""
    folder = work / "predictions"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in run_files(predictions(detector, heat_maps, post)).items():
        (folder / name).write_text(text)
    if evaluate(["--input", str(folder), "--ground-truth", str(ground_truth), "--output", str(work / "metrics"),
                 "--no-progress", "--no-plots"]) != 0:
        raise RuntimeError("the evaluator failed on the validation predictions")
    aggregates = json.loads((work / "metrics" / "metrics.json").read_text())["aggregates"]
    return {"auc": round(aggregates["auc"], 4), "froc": round(aggregates["froc"], 4)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="ONNX model, rewritten with the chosen parameters")
    parser.add_argument("--data", type=Path, nargs="+", required=True,
                        help="validation cohorts of object-cxr-images (scored together, names prefixed by the folder)")
    args = parser.parse_args(argv)

    detector = ForeignObjectDetector(args.model, "cpu")
    lines = [(cohort, *line.split(",", 1)) for cohort in args.data
             for line in (cohort / "ground_truth" / "annotations.csv").read_text().splitlines()[1:]]
    heat_maps = {(downscale, flip): [] for downscale in DOWNSCALE for flip in (False, True)}
    for cohort, name, _ in lines:
        radiograph = read_radiograph(cohort / "input" / name, detector.pre.input_size[::-1])
        for downscale, flip in heat_maps:
            x = network_input(radiograph, replace(detector.pre, downscale=downscale))
            heat_maps[downscale, flip].append((f"{cohort.name}/{name}", radiograph,
                                               detector.heatmap(x, flip_average=flip)))
    candidates = []
    with tempfile.TemporaryDirectory() as work:
        ground_truth = Path(work) / "ground_truth"
        ground_truth.mkdir()
        (ground_truth / "annotations.csv").write_text(
            "image_name,annotation\n" + "".join(f"{cohort.name}/{name},{annotation}\n"
                                                for cohort, name, annotation in lines))
        for (downscale, flip), maps in heat_maps.items():
            for top in TOP_CELLS:
                post = replace(detector.post, flip_average=flip, image_top_cells=top)
                scores = score(detector, ground_truth, maps, post, Path(work))
                candidates.append({"downscale": downscale, "flip_average": flip, "image_top_cells": top, **scores})
                print(json.dumps(candidates[-1]), flush=True)
    best = max(candidates, key=lambda c: (c["auc"] + c["froc"], c["downscale"] == "area", -c["flip_average"],
                                          -c["image_top_cells"]))
    pre = replace(detector.pre, downscale=best["downscale"])
    post = replace(detector.post, flip_average=best["flip_average"], image_top_cells=best["image_top_cells"])
    positive = [bool(annotation.strip()) for _, _, annotation in lines]
    strongest = [max((point[0] for point in p.points), default=0.0)
                 for _, p in predictions(detector, heat_maps[pre.downscale, post.flip_average], post)]
    operating = youden_threshold(strongest, positive)
    post = replace(post, operating_threshold=operating["threshold"])
    update_metadata(args.model, {META_PREPROCESSING: pre.__dict__, META_POSTPROCESSING: post.__dict__,
                                "tuning": {"data": [str(p) for p in args.data], "images": len(lines), "chosen": best,
                                           "operating_point": operating, "candidates": candidates}})
    print(f"chose {json.dumps(best)}, operating point {json.dumps(operating)}; wrote {args.model}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
