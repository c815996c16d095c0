"""ImageCLEFmed Caption 2021/2022: UMLS concepts and a caption for each medical figure, with one small CNN (ONNX).

Pipeline: read the figure (JPEG, PNG, TIFF, BMP or a grand-challenge MHA; grey, RGB, CMYK, palette, 16-bit), fit it
into a square of the model's input size, run the network: (a) a probability per vocabulary concept, kept above its
threshold (tuned on the validation split; at least the most probable one, at most 100); (b) an embedding compared
with the training figures' embeddings (the caption bank inside the model): among the nearest training figures of the
edition, the caption with the best expected official BLEU against the other neighbours' captions (minimum Bayes
risk, neighbours weighted by similarity; the bank's pairwise BLEU is computed once from its official tokens) is
returned. Concepts, thresholds, captions, tokens and parameters all come from the model's metadata. Batch mode reads
figures in a thread pool and runs the network on batches.

`ALGORITHM` plugs it into the algorithm runner (`runner.py`): grand-challenge one-case mode (socket `medical-image`
-> `umls-concepts.json`, `caption.json`), or batch mode over every figure of the input folder (the official run files
`concepts.csv` and `captions.csv`, `ID|...` lines, the ID being the file name without its image suffix). The edition
(`--edition`, default `$CAPTION_EDITION`, else 2022) picks the captions of that edition's bank.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import unicodedata
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..contract import strip_image_suffix
from ..errors import InputError
from ..imaging import open_picture
from ..formats.imageclef_caption import CAPTIONS_RUN, CONCEPTS_RUN, MAX_CONCEPTS, PIPE
from ..sockets import CAPTION, CAPTION_INTERFACE, MEDICAL_IMAGE, UMLS_CONCEPTS
from .runner import Algorithm, Case

if TYPE_CHECKING:
    from PIL import Image

MODEL_FILENAME = "imageclef_caption.onnx"
EDITIONS = ("2022", "2021")
EDITION_VARIABLE = "CAPTION_EDITION"
FIGURE_PATTERNS = tuple(f"*.{s}" for suffix in ("jpg", "jpeg", "png", "tif", "tiff", "bmp", "mha")
                        for s in (suffix, suffix.upper()))
# Characters a caption in a run file cannot hold: the delimiters and line breaks, and (the task's rule "no special
# characters in the description") everything outside printable ASCII once typographic marks are made ASCII.
ASCII_MARKS = str.maketrans({"–": "-", "—": "-", "‐": "-", "“": '"', "”": '"', "‘": "'", "’": "'", "×": "x",
                             "µ": "u", "…": "..."})
UNSAFE = re.compile(r"[^\x20-\x7e]|\|")

# Metadata keys of the ONNX model (JSON values).
META_CONCEPTS = "concepts"
META_THRESHOLDS = "thresholds"
META_BANK = "caption_bank"
META_RETRIEVAL = "retrieval"
BLEU_ORDERS = 4  # the official BLEU: up to 4-grams, equal weights
BATCH = 16  # batch mode: figures per network run
READ_AHEAD = 2  # batch mode: batches being read while the network runs


@dataclass
class Retrieval:
    """How the caption is chosen among the nearest training figures (minimum Bayes risk under the official BLEU)."""

    neighbours: int = 20  # candidates: the most similar training figures of the edition
    similarity_weight: float = 10.0  # a neighbour's weight as evidence: exp(weight * (similarity - best similarity))
    concept_weight: float = 0.0  # weight of the Jaccard agreement of a candidate's concepts with the predicted ones

    @classmethod
    def from_dict(cls, values: dict) -> "Retrieval":
        return cls(int(values["neighbours"]), float(values["similarity_weight"]), float(values["concept_weight"]))


@dataclass
class FigureResult:
    """One figure's concepts (CUIs, in the vocabulary's order) and caption (run-file safe)."""

    concepts: list[str]
    caption: str


def to_uint8(array: np.ndarray) -> np.ndarray:
    """8-bit values of any integer or float image: uint8 kept, others stretched from their min to their max."""
    if array.dtype == np.uint8:
        return array
    values = array.astype(np.float32)
    finite = np.isfinite(values)
    if not finite.any():
        return np.zeros(array.shape, np.uint8)
    low, high = float(values[finite].min()), float(values[finite].max())
    values = np.where(finite, values, low)
    return np.clip(np.rint((values - low) * (255.0 / max(high - low, 1e-6))), 0, 255).astype(np.uint8)


def _pil_rgb(image) -> Image.Image:
    """RGB of any PIL mode: CMYK and palettes converted, 16-bit and float images stretched to 8 bits."""
    from PIL import Image

    if image.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        return Image.fromarray(to_uint8(np.asarray(image))).convert("RGB")
    return image.convert("RGB")


def read_figure(path) -> Image.Image:
    """The figure as an RGB PIL image; an unreadable file is an InputError naming it. MHA (grand-challenge's
    conversion of an upload) through SimpleITK. JPEGs are decoded at full scale (not with libjpeg's faster reduced
    scale): the pixels must be those of the MHA that grand-challenge makes of the same upload."""
    from PIL import Image, UnidentifiedImageError

    try:
        with open_picture(path) as image:
            image.load()
            if getattr(image, "n_frames", 1) > 1:
                image.seek(0)
            return _pil_rgb(image)
    except UnidentifiedImageError:
        pass  # not a format PIL knows: MHA and other ITK formats below
    except (OSError, ValueError, Image.DecompressionBombError, SyntaxError) as exc:
        raise InputError(f"{path}: cannot read the figure ({exc})") from None
    return _itk_rgb(path)


def _itk_rgb(path: Path):
    """RGB PIL image of an ITK-readable 2-D figure (or a 3-D one with a single slice)."""
    import SimpleITK as sitk
    from PIL import Image

    from ..imaging import read_image

    image = read_image(path, "figure")
    array = sitk.GetArrayFromImage(image)
    components = image.GetNumberOfComponentsPerPixel()
    if image.GetDimension() == 3 and array.shape[0] == 1:
        array = array[0]
    if array.ndim != (3 if components > 1 else 2):
        raise InputError(f"{path}: expected a 2-D figure, got an image of size {list(image.GetSize())}")
    array = to_uint8(array)
    if components == 1:
        return Image.fromarray(array).convert("RGB")
    if components in (3, 4):
        return Image.fromarray(np.ascontiguousarray(array[..., :3]), "RGB")
    return Image.fromarray(np.ascontiguousarray(array[..., 0])).convert("RGB")


def fit_square(image, size: int) -> np.ndarray:
    """(size, size, 3) uint8: the RGB figure fitted into the square (aspect kept, centred, black around)."""
    from PIL import Image

    width, height = image.size
    scale = size / max(width, height)
    fitted = image.resize((max(1, round(width * scale)), max(1, round(height * scale))), Image.BILINEAR)
    canvas = Image.new("RGB", (size, size))
    canvas.paste(fitted, ((size - fitted.width) // 2, (size - fitted.height) // 2))
    return np.asarray(canvas)


def network_input(square: np.ndarray, mean: float, std: float) -> np.ndarray:
    """(3, size, size) float32 network input of `fit_square`'s output."""
    return ((square.astype(np.float32) / 255.0 - mean) / std).transpose(2, 0, 1)


def select_concepts(probabilities: np.ndarray, thresholds: np.ndarray, concepts: list[str]) -> list[str]:
    """Concepts above their thresholds (the 100 most probable where more are; the most probable one when none is),
    written in the vocabulary's order: the official F1 scores sets, and an order by probability would swap concepts
    whose probabilities differ by float noise between the CPU and CUDA (seen on an H100: tools/compare_devices.py)."""
    order = np.argsort(-probabilities, kind="stable")
    chosen = [i for i in order if probabilities[i] >= thresholds[i]][:MAX_CONCEPTS["2022"]] or [order[0]]
    return [concepts[i] for i in sorted(chosen)]


def _ngram_indicator(tokens: list[tuple[str, ...]], order: int):
    """Sparse (captions, distinct n-gram occurrences) 0/1 matrix: a caption's k-th occurrence of an n-gram is a
    column of its own, so that the product of two rows counts their clipped matches, sum of min(count, count)."""
    from scipy import sparse

    index: dict = {}
    rows, columns = [], []
    for row, words in enumerate(tokens):
        grams = Counter(zip(*(words[k:] for k in range(order))))
        for gram, count in grams.items():
            for occurrence in range(count):
                rows.append(row)
                columns.append(index.setdefault((gram, occurrence), len(index)))
    return sparse.csr_matrix((np.ones(len(rows)), (rows, columns)), shape=(len(tokens), max(len(index), 1)))


def bleu_matrix(tokens: list[tuple[str, ...]]) -> np.ndarray:
    """(n, n) float64: [h, r] the official per-figure BLEU (`metrics.imageclef_caption.caption_bleu`: sentence BLEU,
    4-grams, no smoothing, a missing n-gram order counting as the smallest float, brevity penalty) of caption h as
    the hypothesis against caption r as the reference, for captions already in the official pre-processed tokens;
    computed once per bank from sparse n-gram count matrices (the consensus term of `choose_caption`), over the
    distinct captions only (house-style captions repeat)."""
    distinct = list(dict.fromkeys(tokens))
    if len(distinct) < len(tokens):
        row = {words: k for k, words in enumerate(distinct)}
        rows = np.asarray([row[words] for words in tokens])
        return bleu_matrix(distinct)[np.ix_(rows, rows)]
    lengths = np.asarray([len(words) for words in tokens], np.float64)
    log_precision = np.zeros((len(tokens), len(tokens)))
    for order in range(1, BLEU_ORDERS + 1):
        indicator = _ngram_indicator(tokens, order)
        matches = (indicator @ indicator.T).toarray()
        if order == 1:
            any_unigram = matches > 0
        candidates = np.maximum(1.0, lengths - order + 1)[:, None]
        precision = np.where(matches > 0, matches / candidates, sys.float_info.min)
        log_precision += np.log(precision) / BLEU_ORDERS
    hypothesis, reference = lengths[:, None], lengths[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        brevity = np.where(hypothesis > reference, 1.0, np.exp(1 - reference / hypothesis))
    bleu = np.where(any_unigram, brevity * np.exp(log_precision), 0.0)
    return np.where((hypothesis == 0) & (reference == 0), 1.0, bleu)


def choose_caption(similarity: np.ndarray, candidates: np.ndarray, bank_concepts: list[frozenset[str]],
                   bleu: np.ndarray, predicted: frozenset[str], retrieval: Retrieval) -> int:
    """The bank index of the caption to return, by minimum Bayes risk: among the `retrieval.neighbours` most similar
    bank entries of `candidates` (the bank restricted, e.g. to one edition), the one with the best expected official
    BLEU against the other neighbours' captions (each weighted by its similarity, `Retrieval.similarity_weight`),
    plus the weighted Jaccard agreement of its concepts with the predicted ones; the most similar one on a tie.
    `bleu` is `bleu_matrix` of the candidates' captions, in `candidates` order."""
    positions = np.argsort(-similarity[candidates], kind="stable")[:retrieval.neighbours]
    pool = candidates[positions]
    consensus = np.zeros(len(pool))
    if len(pool) > 1:
        weights = np.exp(retrieval.similarity_weight * (similarity[pool] - similarity[pool].max()))
        evidence = bleu[np.ix_(positions, positions)] * weights[None, :]
        np.fill_diagonal(evidence, 0.0)
        consensus = evidence.sum(axis=1) / np.maximum(weights.sum() - weights, 1e-12)
    concepts = np.array([len(bank_concepts[i] & predicted) / max(len(bank_concepts[i] | predicted), 1)
                         for i in pool]) if retrieval.concept_weight else np.zeros(len(pool))
    return int(pool[int(np.argmax(consensus + retrieval.concept_weight * concepts))])


def run_file_caption(text: str) -> str:
    """A caption as a run file may carry it: typographic marks made ASCII, accents dropped, delimiters, control and
    other special characters replaced by spaces, whitespace collapsed."""
    text = unicodedata.normalize("NFKD", text.translate(ASCII_MARKS))
    text = "".join(c for c in text if not unicodedata.combining(c))
    return " ".join(UNSAFE.sub(" ", text).split())


class CaptionModel:
    """The ONNX network with its concept vocabulary, thresholds and caption bank."""

    def __init__(self, model_path: Path, device: str = "auto", edition: str | None = None):
        from ..onnx_session import META_PREPROCESSING, create_session, model_metadata

        self.edition = edition or os.environ.get(EDITION_VARIABLE) or EDITIONS[0]
        if self.edition not in EDITIONS:
            raise InputError(f"{EDITION_VARIABLE}={self.edition!r}: expected one of {', '.join(EDITIONS)}")
        self.session = create_session(model_path, device)
        meta = model_metadata(self.session)
        try:
            pre = meta[META_PREPROCESSING]
            self.size, self.mean, self.std = int(pre["size"]), float(pre["mean"]), float(pre["std"])
            self.concepts = [str(c) for c in meta[META_CONCEPTS]]
            self.thresholds = np.asarray(meta[META_THRESHOLDS], np.float32)
            bank = meta[META_BANK]
            self.captions = [str(c) for c in bank["captions"]]
            tokens = [tuple(str(t) for t in words) for words in bank["tokens"]]
            self.bank_concepts = [frozenset(self.concepts[k] for k in ks) for ks in bank["concepts"]]
            editions = np.asarray(bank["editions"])
            self.retrieval = Retrieval.from_dict(meta[META_RETRIEVAL][self.edition])
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{model_path}: model metadata lacks the concepts, thresholds, caption bank or "
                             f"{self.edition} retrieval parameters ({exc!r})") from None
        self.candidates = np.flatnonzero(editions == self.edition)
        if not len(self.candidates):
            raise InputError(f"{model_path}: the caption bank holds no {self.edition} caption")
        self.bleu = bleu_matrix([tokens[i] for i in self.candidates])
        self.input_name = self.session.get_inputs()[0].name
        self.provider = self.session.get_providers()[0]

    def predict_squares(self, squares: list[np.ndarray]) -> list[FigureResult]:
        """Concepts and caption of each of a batch of `fit_square` figures."""
        batch = np.stack([network_input(square, self.mean, self.std) for square in squares])
        probabilities, similarity = self.session.run(["concept_probabilities", "bank_similarity"],
                                                     {self.input_name: batch})
        results = []
        for figure_probabilities, figure_similarity in zip(probabilities, similarity):
            concepts = select_concepts(figure_probabilities, self.thresholds, self.concepts)
            index = choose_caption(figure_similarity, self.candidates, self.bank_concepts, self.bleu,
                                   frozenset(concepts), self.retrieval)
            results.append(FigureResult(concepts, run_file_caption(self.captions[index])))
        return results

    def predict_image(self, image) -> FigureResult:
        return self.predict_squares([fit_square(image, self.size)])[0]

    def predict(self, case: Case) -> FigureResult:
        return self.predict_image(read_figure(case.inputs[MEDICAL_IMAGE.slug]))

    def _square(self, case: Case) -> np.ndarray:
        return fit_square(read_figure(case.inputs[MEDICAL_IMAGE.slug]), self.size)

    def predict_all(self, cases: list[Case]) -> Iterator[FigureResult]:
        """Batch mode: figures read and fitted by a thread pool (Pillow releases the GIL to decode and resize) up to
        `READ_AHEAD` batches ahead, the network run on batches of `BATCH` figures; results in case order (an
        unreadable figure raises its InputError at its turn)."""
        from concurrent.futures import ThreadPoolExecutor

        from ..onnx_session import physical_cores

        with ThreadPoolExecutor(physical_cores()) as pool:
            pending: deque[list] = deque()
            for start in range(0, len(cases), BATCH):
                pending.append([pool.submit(self._square, case) for case in cases[start:start + BATCH]])
                if len(pending) > READ_AHEAD:
                    yield from self.predict_squares([future.result() for future in pending.popleft()])
            while pending:
                yield from self.predict_squares([future.result() for future in pending.popleft()])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--edition", choices=EDITIONS, default=os.environ.get(EDITION_VARIABLE) or EDITIONS[0],
                        help=f"whose captions to return (default ${EDITION_VARIABLE}, else {EDITIONS[0]})")


def gc_outputs(prediction: FigureResult) -> dict[str, object]:
    """GC mode: the concept list and the caption string."""
    return {UMLS_CONCEPTS.slug: prediction.concepts, CAPTION.slug: prediction.caption}


def run_files(results: list[tuple[Case, FigureResult]]) -> dict[str, str]:
    """The official run files: `ID|C1;C2;...` (never `ID` alone, which the 2021 code crashed on) and
    `ID|caption`, every figure once in input order."""
    ids = [strip_image_suffix(case.name) for case, _ in results]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise InputError(f"figure ID {twice[0]!r} names more than one input file (e.g. .jpg and .png); the run files "
                         "need each ID once: rename one")
    return {CONCEPTS_RUN: "".join(f"{i}{PIPE}{';'.join(p.concepts)}\n" for i, (_, p) in zip(ids, results)),
            CAPTIONS_RUN: "".join(f"{i}{PIPE}{p.caption}\n" for i, (_, p) in zip(ids, results))}


def describe(prediction: FigureResult) -> str:
    return f"{len(prediction.concepts)} concept(s), {len(prediction.caption.split())} word(s)"


ALGORITHM = Algorithm(
    description=__doc__.split("\n\n")[0],
    interfaces=(CAPTION_INTERFACE,),
    model_file=MODEL_FILENAME,
    load_model=CaptionModel,
    case_patterns=FIGURE_PATTERNS,
    gc_outputs=gc_outputs,
    case_outputs=lambda case, prediction: {},
    run_files=run_files,
    describe=describe,
    name_forbidden=PIPE + "\t;",
    add_arguments=add_arguments,
)
