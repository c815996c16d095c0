"""ImageCLEFmed Caption: synthetic concepts + captions ground truth and runs (2021 or 2022 file formats).

Writes OUT/ground_truth/{concepts.tsv,captions.csv} and OUT/predictions/{concepts.csv,captions.csv}, ready for
`evaluate.py --edition E --input OUT/predictions --ground-truth OUT/ground_truth`; with --gc-layout also
OUT/predictions_gc/ (grand-challenge predictions.json + one job folder per image, same predictions), and for 2022
with --secondary the manually validated concepts and the secondary concept list. Captions are radiology-style
sentences with the details the official pre-processing cares about (hyphens, decimals, "cannot", Unicode quotes,
µ); predictions are noisy copies (dropped, swapped and invented words, empty and very short captions).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
from collections.abc import Sequence
from pathlib import Path

from ..formats import imageclef_caption as fmt
from ..io import user_path, write_json_atomic, write_text_atomic

log = logging.getLogger("medchallenge.synth.imageclef_caption")

MODALITIES = ["Computed tomography", "CT", "MRI", "X-ray", "Plain radiograph", "Ultrasound", "PET-CT",
              "T2-weighted MRI", "Contrast-enhanced CT", "Angiography"]
REGIONS = ["the chest", "the abdomen", "the brain", "the left knee", "the right hip", "the liver", "the pelvis",
           "the cervical spine", "the lumbar spine", "both lungs", "the kidney", "the heart"]
FINDINGS = ["a 3.5 cm mass", "multiple hyperintense lesions", "no fracture", "a small pleural effusion",
            "diffuse ground-glass opacities", "an enlarged lymph node", "a well-defined cyst", "mild cardiomegaly",
            "a displaced fracture", "free fluid", "a calcified nodule", "“ring-enhancing” lesions",
            "a 12 µm deposit", "bilateral infiltrates", "a hypodense lesion", "post-operative changes"]
VERBS = ["showing", "demonstrating", "revealing", "with", "depicting"]
TAILS = ["", "", "", " (arrow).", ".", "; cannot exclude malignancy.", " – follow-up advised.",
         " in the upper lobe.", " at 6 months.", " gonna be reviewed"]
NOISE_WORDS = ["image", "scan", "patient", "lesion", "normal", "view", "axial", "sagittal", "contrast", "area"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=user_path, required=True, help="output folder")
    parser.add_argument("--edition", choices=("2021", "2022"), default="2022")
    parser.add_argument("--images", type=int, default=200, help="number of images (the 2022 test set had 7,601)")
    parser.add_argument("--concepts", type=int, default=400, help="size of the CUI vocabulary")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gc-layout", action="store_true", help="also write OUT/predictions_gc (predictions.json)")
    parser.add_argument("--secondary", action="store_true",
                        help="2022: also write concepts_manual.tsv and secondary_concepts.txt")


def _caption(rng: random.Random) -> str:
    text = f"{rng.choice(MODALITIES)} of {rng.choice(REGIONS)} {rng.choice(VERBS)} {rng.choice(FINDINGS)}"
    if rng.random() < 0.3:
        text += f" and {rng.choice(FINDINGS)}"
    return text + rng.choice(TAILS)


def _predicted_caption(rng: random.Random, truth: str) -> str:
    roll = rng.random()
    if roll < 0.03:
        return ""
    if roll < 0.06:
        return " ".join(truth.split()[:2])
    if roll < 0.12:
        return truth
    words = truth.split()
    words = [w for w in words if rng.random() > 0.15]
    words = [rng.choice(NOISE_WORDS) if rng.random() < 0.1 else w for w in words]
    if len(words) > 3 and rng.random() < 0.3:
        i = rng.randrange(len(words) - 1)
        words[i], words[i + 1] = words[i + 1], words[i]
    if rng.random() < 0.3:
        words.append(rng.choice(NOISE_WORDS))
    return " ".join(words)


def _predicted_concepts(rng: random.Random, truth: list[str], vocabulary: list[str]) -> list[str]:
    predicted = [c for c in truth if rng.random() < 0.65]
    predicted += rng.sample(vocabulary, rng.randint(0, 3))
    predicted = list(dict.fromkeys(predicted))  # no concept twice
    return [c.lower() if rng.random() < 0.05 else c for c in predicted]


def generate(edition: str, images: int, concepts: int, seed: int) -> dict:
    """Ground truth and predictions as plain dicts: ids, concept lists and captions."""
    rng = random.Random(seed)
    vocabulary = [f"C{rng.randrange(10**7):07d}" for _ in range(concepts)]
    vocabulary = list(dict.fromkeys(vocabulary))
    prefix = "ImageCLEFmedCaption_2022_test" if edition == "2022" else "synpic"
    ids = [f"{prefix}_{i:06d}" for i in range(1, images + 1)]
    gt_concepts = {i: ([] if rng.random() < 0.02 else rng.sample(vocabulary, rng.randint(1, 8))) for i in ids}
    gt_captions = {i: _caption(rng) for i in ids}
    pred_concepts = {i: _predicted_concepts(rng, gt_concepts[i], vocabulary) for i in ids}
    pred_captions = {i: _predicted_caption(rng, gt_captions[i]) for i in ids}
    order = ids[:]
    rng.shuffle(order)  # a run need not follow the ground-truth order
    return {"ids": ids, "order": order, "gt_concepts": gt_concepts, "gt_captions": gt_captions,
            "pred_concepts": {i: pred_concepts[i] for i in order},
            "pred_captions": {i: pred_captions[i] for i in order}, "vocabulary": vocabulary}


def _concept_run_lines(edition: str, data: dict, rng: random.Random) -> str:
    lines = []
    for image_id, concepts in data["pred_concepts"].items():
        if edition == "2022" and not concepts and data["gt_concepts"][image_id] and rng.random() < 0.5:
            # `id` alone (2022 reads `()`): scores like `id|` except on an empty GT, where the GC layout's `[]`
            # (written as `id|`) would score 1, so it is used only where both layouts agree
            lines.append(f"{image_id}\n")
        else:
            separator = "; " if edition == "2022" and rng.random() < 0.05 else ";"  # 2022 strips concepts
            lines.append(f"{image_id}{fmt.PIPE}{separator.join(concepts)}\n")
    return "".join(lines)


def write_cohort(out: Path, data: dict, edition: str, gc_layout: bool, secondary: bool, seed: int) -> None:
    """Write the ground truth and run files (and optionally the GC layout) of one synthetic cohort."""
    rng = random.Random(seed + 1)
    pred = out / "predictions"
    subset = manual = None
    if secondary and edition == "2022":
        subset = data["vocabulary"][:15]
        manual = {i: [c for c in concepts if c in subset or rng.random() < 0.5]
                  for i, concepts in data["gt_concepts"].items()}
    write_ground_truth(out / "ground_truth", edition, data["gt_concepts"], data["gt_captions"], subset, manual)
    write_text_atomic(pred / fmt.CONCEPTS_RUN, _concept_run_lines(edition, data, rng))
    write_text_atomic(pred / fmt.CAPTIONS_RUN, "".join(fmt.iter_run_lines(data["pred_captions"], fmt.PIPE)))
    if gc_layout:
        write_gc_layout(out / "predictions_gc", data)


def write_ground_truth(gt: Path, edition: str, concepts: dict[str, list[str]], captions: dict[str, str],
                       secondary: Sequence[str] | None = None, manual: dict[str, list[str]] | None = None) -> None:
    """The evaluator's ground-truth folder in the edition's formats (2022: concepts with a header, captions
    `ID|caption`; 2021: no header, captions `ID<TAB>caption`); with `secondary` (2022) also the secondary concept
    list and the manually validated concepts (`manual`, default: the concepts themselves)."""
    gt_delimiter = fmt.PIPE if edition == "2022" else fmt.TAB
    header = "ID\tcuis\n" if edition == "2022" else ""
    write_text_atomic(gt / fmt.CONCEPTS_GT, header + "".join(f"{i}\t{';'.join(c)}\n" for i, c in concepts.items()))
    write_text_atomic(gt / fmt.CAPTIONS_GT, "".join(f"{i}{gt_delimiter}{c}\n" for i, c in captions.items()))
    if secondary is not None and edition == "2022":
        write_text_atomic(gt / fmt.CONCEPTS_MANUAL_GT,
                          "ID\tcuis\n" + "".join(f"{i}\t{';'.join(c)}\n" for i, c in (manual or concepts).items()))
        write_text_atomic(gt / fmt.SECONDARY_CONCEPTS, "\n".join(secondary) + "\n")


def write_gc_layout(folder: Path, data: dict) -> None:
    """grand-challenge evaluation input: predictions.json plus <job-pk>/output/{umls-concepts,caption}.json."""
    jobs = []
    for number, image_id in enumerate(data["order"], start=1):
        pk = f"job-{number:06d}"
        output = folder / pk / "output"
        output.mkdir(parents=True, exist_ok=True)
        (output / "umls-concepts.json").write_text(json.dumps(data["pred_concepts"][image_id]))
        (output / "caption.json").write_text(json.dumps(data["pred_captions"][image_id], ensure_ascii=False))
        jobs.append({
            "pk": pk, "status": "Succeeded",
            "inputs": [{"interface": {"slug": "medical-image", "kind": "Image", "super_kind": "Image",
                                      "relative_path": "images/medical-image"},
                        "image": {"name": f"{image_id}.jpg"}, "value": None, "file": None}],
            "outputs": [
                {"interface": {"slug": "umls-concepts", "kind": "Anything", "super_kind": "File",
                               "relative_path": "umls-concepts.json"}, "value": None, "file": None, "image": None},
                {"interface": {"slug": "caption", "kind": "String", "super_kind": "Value",
                               "relative_path": "caption.json"},
                 "value": data["pred_captions"][image_id], "file": None, "image": None},
            ],
        })
    write_json_atomic(folder / "predictions.json", jobs, indent=None)


def run(args: argparse.Namespace) -> int:
    data = generate(args.edition, args.images, args.concepts, args.seed)
    write_cohort(args.out, data, args.edition, args.gc_layout, args.secondary, args.seed)
    log.info("%d synthetic ImageCLEFmed Caption %s images in %s (ground_truth/, predictions/%s)", args.images,
             args.edition, args.out, ", predictions_gc/" if args.gc_layout else "")
    return 0
