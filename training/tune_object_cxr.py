"""Choose the object-CXR model's post-processing on a validation cohort and write it into the model's metadata.

    PYTHONPATH=shared python training/tune_object_cxr.py --model algorithms/object_cxr/model/object_cxr.onnx \
        --data build/object_cxr_val

The validation cohort (`python -m medchallenge.synth object-cxr-images`) has a seed of its own, used neither in
training nor by the benchmark's held-out set. Each candidate (the image probability as the mean of the heat map's
1 ... N highest cells; with or without averaging the heat map with the mirrored image's) is scored on it by the
project's evaluator (`auc`, `froc`); the one with the highest `auc + froc` is kept. The model file is rewritten with
that `postprocessing` and a `tuning` entry (the cohort and every candidate's scores). Needs onnx, numpy and pillow.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import replace
from pathlib import Path

from onnx_export import update_metadata

from medchallenge.algorithms.object_cxr import (ForeignObjectDetector, Postprocessing, network_input,
                                                prediction_from_heatmap, read_radiograph, run_files)
from medchallenge.algorithms.runner import Case
from medchallenge.evaluators.object_cxr import main as evaluate
from medchallenge.onnx_session import META_POSTPROCESSING

TOP_CELLS = (1, 4, 9, 16, 36, 64, 100, 144)


def score(detector: ForeignObjectDetector, cohort: Path, heat_maps: list, post: Postprocessing,
          work: Path) -> dict[str, float]:
    """The evaluator's `auc` and `froc` of the cohort's predictions with post-processing `post`."""
    results = [(Case(name, {}), prediction_from_heatmap(heat, radiograph, detector.pre, post))
               for name, radiograph, heat in heat_maps]
    predictions = work / "predictions"
    predictions.mkdir(parents=True, exist_ok=True)
    for name, text in run_files(results).items():
        (predictions / name).write_text(text)
    if evaluate(["--input", str(predictions), "--ground-truth", str(cohort / "ground_truth"),
                 "--output", str(work / "metrics"), "--no-progress", "--no-plots"]) != 0:
        raise RuntimeError("the evaluator failed on the validation predictions")
    aggregates = json.loads((work / "metrics" / "metrics.json").read_text())["aggregates"]
    return {"auc": round(aggregates["auc"], 4), "froc": round(aggregates["froc"], 4)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="ONNX model, rewritten with the chosen parameters")
    parser.add_argument("--data", type=Path, required=True, help="validation cohort of object-cxr-images")
    args = parser.parse_args(argv)

    detector = ForeignObjectDetector(args.model, "cpu")
    lines = (args.data / "ground_truth" / "annotations.csv").read_text().splitlines()[1:]
    heat_maps = {False: [], True: []}
    for line in lines:
        name = line.split(",", 1)[0]
        radiograph = read_radiograph(args.data / "input" / name, detector.pre.input_size[::-1])
        x = network_input(radiograph, detector.pre)
        for flip in heat_maps:
            heat_maps[flip].append((name, radiograph, detector.heatmap(x, flip_average=flip)))
    candidates = []
    with tempfile.TemporaryDirectory() as work:
        for flip, maps in heat_maps.items():
            for top in TOP_CELLS:
                post = replace(detector.post, flip_average=flip, image_top_cells=top)
                scores = score(detector, args.data, maps, post, Path(work))
                candidates.append({"flip_average": flip, "image_top_cells": top, **scores})
                print(json.dumps(candidates[-1]), flush=True)
    best = max(candidates, key=lambda c: (c["auc"] + c["froc"], -c["flip_average"], -c["image_top_cells"]))
    post = replace(detector.post, flip_average=best["flip_average"], image_top_cells=best["image_top_cells"])
    update_metadata(args.model, {META_POSTPROCESSING: post.__dict__,
                                "tuning": {"data": str(args.data), "images": len(lines), "chosen": best,
                                           "candidates": candidates}})
    print(f"chose {json.dumps(best)}; wrote {args.model}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
