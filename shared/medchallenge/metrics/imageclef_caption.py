"""ImageCLEFmed Caption 2021/2022 metrics: per-image concept F1, caption BLEU and ROUGE-1, as the official code did.

Spec: docs/metrics/imageclef-caption-2022.md and docs/metrics/imageclef-caption-2021.md, numbered in parallel
(concepts in section 1, captions in section 2); every section reference below names its document.

Pure functions over plain Python values. Nothing here imports NLTK or rouge-score: the three pieces of them that
the official scorers use are re-implemented for the inputs they can receive (text without ASCII punctuation) and
fuzzed against the versions the official code ran (NLTK 3.7, rouge-score 0.1.2, scikit-learn 1.0.2) by
tests/reference. The one exception is the 2021 Snowball stemmer, which `snowball_stemmer()` imports from the
installed NLTK on first use (it needs no NLTK data).

Every Unicode-dependent text operation (case mapping, whitespace, the word and space classes of regular expressions,
`(?i)`) goes through medchallenge.official.unicode13, so that it behaves as on the official Python 3.9 (Unicode 13.0),
not as on the running interpreter.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import string
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from importlib import resources

from ..official import unicode13

EDITIONS = ("2021", "2022")

STOPWORDS_FILE = "nltk-english-stopwords-179.txt"
STOPWORDS_SHA256 = "019f104ba2ed07436d05f9cdd3383034ad66014edc27fc651f837e1a038b6451"

# ---------------------------------------------------------------------------------------------------------------
# Concept detection
# ---------------------------------------------------------------------------------------------------------------


def binary_f1(true_positives: int, false_positives: int, false_negatives: int) -> float:
    """scikit-learn 1.0.2's binary F1 arithmetic (imageclef-caption-2022.md §1.2, imageclef-caption-2021.md §1.2).

    p = tp/(tp+fp), r = tp/(tp+fn), F = (1+beta2)*p*r / (beta2*p + r) with beta2 = 1, i.e. ((2.0*p)*r)/(p+r) bit
    for bit, and 0.0 when tp = 0 (zero_division "warn"). Not 2tp/(2tp+fp+fn), which differs in the last bit, e.g.
    for tp=1, fp=0, fn=4.

    Args:
        true_positives: concepts in both ground truth and prediction.
        false_positives: predicted concepts not in the ground truth.
        false_negatives: ground-truth concepts not predicted.

    Returns:
        The F1 score in [0, 1].
    """
    if true_positives == 0:
        return 0.0
    precision = true_positives / (true_positives + false_positives)
    recall = true_positives / (true_positives + false_negatives)
    return ((2.0 * precision) * recall) / (precision + recall)


def set_f1(ground_truth: Iterable[str], prediction: Iterable[str]) -> float:
    """F1 between two concept collections compared as sets (y_true/y_pred over their sorted union).

    Args:
        ground_truth: the ground-truth concepts (duplicates count once).
        prediction: the predicted concepts (duplicates count once).

    Returns:
        `binary_f1` of the two sets.
    """
    truth, predicted = set(ground_truth), set(prediction)
    tp = len(truth & predicted)
    return binary_f1(tp, len(predicted) - tp, len(truth) - tp)


def concept_f1_2022(ground_truth: Sequence[str], prediction: Sequence[str]) -> float:
    """Per-image F1, 2022 (imageclef-caption-2022.md §1.2).

    Comparison is case-insensitive (`str.upper`, Unicode 13); the empty string is a concept like any other, so an
    empty GT matched by `id|` scores 1. The 2022 code's "empty GT" branch is unreachable (a GT tuple always has one
    element), so every image counts.

    Args:
        ground_truth: stripped concept strings as the 2022 reader makes them; `('',)` for an empty ground truth.
        prediction: stripped concept strings; `()` for a run line `id`, `('',)` for `id|`.

    Returns:
        The image's F1 (`binary_f1` over the upper-cased concept sets).
    """
    return set_f1((unicode13.upper(c) for c in ground_truth), (unicode13.upper(c) for c in prediction))


def concept_f1_2021(ground_truth: str, prediction: str) -> float | None:
    """Per-image F1, 2021 (imageclef-caption-2021.md §1.2, the 2018 organiser code).

    The whole string is upper-cased (Unicode 13); blank (Unicode 13 whitespace) -> no concepts, else split on ';'
    WITHOUT stripping (`"C1; C2"` holds `" C2"`).

    Args:
        ground_truth: the raw ground-truth concept field (`''` for a line with the id only).
        prediction: the raw run concept field (`''` for a line with the id only).

    Returns:
        The image's F1, or None for an empty (blank) ground truth: that image is excluded from the mean.
    """
    truth = unicode13.upper(ground_truth)
    predicted = unicode13.upper(prediction)
    if unicode13.strip(truth) == "":
        return None
    predicted_concepts = [] if unicode13.strip(predicted) == "" else predicted.split(";")
    return set_f1(truth.split(";"), predicted_concepts)


def secondary_concept_f1(ground_truth: Sequence[str], prediction: Sequence[str],
                         concept_subset: frozenset[str]) -> float | None:
    """Secondary F1 of one image (imageclef-caption-2022.md §1.3 and §5: the organisers' later definition).

    Args:
        ground_truth: the image's manually validated concepts.
        prediction: the image's predicted concepts (as for `concept_f1_2022`).
        concept_subset: the upper-case CUIs both sides are restricted to; compared case-insensitively.

    Returns:
        The F1 of the restricted sets, or None when the restricted ground truth is empty (the image is skipped).
    """
    truth = {unicode13.upper(c) for c in ground_truth} & concept_subset
    if not truth:
        return None
    return set_f1(truth, {unicode13.upper(c) for c in prediction} & concept_subset)


def mean_over_counted(scores: Iterable[float | None], denominator: int) -> float | None:
    """The official aggregation of concept F1 (imageclef-caption-2022.md §1.2, imageclef-caption-2021.md §1.2).

    Σ scores (in the given order, float additions from 0) / (denominator - number of None scores). 2022:
    denominator len(GT), no None; 2021: empty-GT images are None and excluded.

    Args:
        scores: per-image scores in submission order; None for an image that does not count.
        denominator: the number of ground-truth images.

    Returns:
        The mean, or None when nothing is counted (the official code would divide by zero).
    """
    total = 0.0
    for score in scores:
        if score is None:
            denominator -= 1
        else:
            total += score
    return total / denominator if denominator > 0 else None


# ---------------------------------------------------------------------------------------------------------------
# Caption pre-processing (imageclef-caption-2022.md §2.2, imageclef-caption-2021.md §2.2)
# ---------------------------------------------------------------------------------------------------------------

ASCII_PUNCTUATION_DELETION = str.maketrans("", "", string.punctuation)

# NLTK 3.7's `word_tokenize` (step 3 of imageclef-caption-2022.md §2.2 and of imageclef-caption-2021.md §2.2) on
# text WITHOUT ASCII punctuation. Punkt first: its only candidate breaks are . ? !
# (PunktLanguageVars.sent_end_chars), so it returns [text.rstrip()] (or [] for blank text) and never reads its
# English model; then NLTKWordTokenizer (Treebank rules, Python `re`). Every rule that needs an ASCII character
# ( " ' ` . , : ; ? ! ( ) [ ] { } < > - * @ # $ % & ) cannot fire; what is left: pad « “ ‘ „ (STARTING_QUOTES) and
# » ” ’ (ENDING_QUOTES) with spaces, split six contractions (CONTRACTIONS2), `str.split()`.
# CONTRACTIONS2 is (?i)\b(can)(not)\b|...|(?i)\b(wan)(na)(?=\s). Where unicode13.builtin_regex_exact (ASCII text,
# nearly always) it runs as written; elsewhere spelled with Python 3.9's classes: (?i) letters as explicit classes,
# and since every character those classes match is a word character, the \b before the first letter is "no word
# character before" (checked after the first letter, so that the search can skip to candidate letters) and the \b
# after the last "no word character after".
# NOT as NLTK >= 3.10 (see tests/reference, which fuzzes this against NLTK 3.7): 3.10 also pads the dashes
# U+2012-U+2015 ("malformation—see" is one token in 3.7, three in 3.10, and "wanna—" does not split in 3.7).
_TREEBANK_PADDED = re.compile("[«“‘„»”’]")
_CONTRACTIONS2 = [("can", "not"), ("gim", "me"), ("gon", "na"), ("got", "ta"), ("lem", "me"), ("wan", "na")]


def _contractions_patterns() -> tuple[re.Pattern, re.Pattern]:
    """NLTK 3.7's CONTRACTIONS2 (without its ASCII-apostrophe rules) as one pattern: as written (the running re's
    classes) and in Python 3.9's classes."""
    as_written = re.compile("(?i)" + "|".join(
        rf"\b({first})({second})" + (r"(?=\s)" if first == "wan" else r"\b") for first, second in _CONTRACTIONS2))
    no_word_before, no_word_after = f"(?<!{unicode13.WORD}(?s:.))", f"(?!{unicode13.WORD})"
    python39 = re.compile("|".join(
        f"({unicode13.ignorecase(first[0])}{no_word_before}{unicode13.ignorecase(first[1:])})"
        f"({unicode13.ignorecase(second)})" + (f"(?={unicode13.SPACE})" if first == "wan" else no_word_after)
        for first, second in _CONTRACTIONS2))
    return as_written, python39


_TREEBANK_CONTRACTIONS, _TREEBANK_CONTRACTIONS_PYTHON39 = _contractions_patterns()


def _split_contraction(match: re.Match) -> str:
    last = match.lastindex
    return f" {match[last - 1]} {match[last]} "


def treebank_tokenize(text: str) -> list[str]:
    """NLTK 3.7 `nltk.word_tokenize(text)` for text without ASCII punctuation (step 3 of
    imageclef-caption-2022.md §2.2).

    "cannot" -> "can not", gimme/gonna/gotta/lemme -> two tokens, "wanna" before whitespace or at the end -> two
    tokens, the Unicode quotes « “ ‘ „ » ” ’ become tokens of their own (dashes do not: NLTK 3.7); whitespace splits
    as Python 3.9's `str.split()`.

    Args:
        text: text from which the 32 ASCII punctuation characters were deleted.

    Returns:
        The tokens.

    Raises:
        ValueError: `text` contains ASCII punctuation (the rules for it are not reproduced).
    """
    if _ASCII_PUNCTUATION.search(text):
        raise ValueError("treebank_tokenize expects text without ASCII punctuation")
    return _treebank_tokens(text)


_ASCII_PUNCTUATION = re.compile("[" + re.escape(string.punctuation) + "]")


def _treebank_tokens(text: str) -> list[str]:
    text = _TREEBANK_PADDED.sub(r" \g<0> ", text)
    contractions = _TREEBANK_CONTRACTIONS if unicode13.builtin_regex_exact(text) else _TREEBANK_CONTRACTIONS_PYTHON39
    text = contractions.sub(_split_contraction, " " + text + " ")
    return unicode13.split(text)


@functools.cache
def load_stopwords() -> frozenset[str]:
    """NLTK's 179-word English stop-word list as the 2021/2022 evaluators used it (imageclef-caption-2022.md §2.2
    step 4), read from the package data and checked against its sha256 (the list NLTK downloads today has 198 words).

    Returns:
        The stop words.

    Raises:
        RuntimeError: the packaged list is not the expected file (sha256 or word count).
    """
    data = resources.files("medchallenge").joinpath("data", STOPWORDS_FILE).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != STOPWORDS_SHA256:
        raise RuntimeError(f"medchallenge/data/{STOPWORDS_FILE}: sha256 {digest} is not the expected "
                           f"{STOPWORDS_SHA256}; reinstall the medchallenge package")
    words = frozenset(unicode13.split(data.decode("utf-8")))
    if len(words) != 179:
        raise RuntimeError(f"medchallenge/data/{STOPWORDS_FILE}: expected 179 words, found {len(words)}")
    return words


def snowball_stemmer() -> Callable[[str], str]:
    """NLTK's English Snowball (Porter2) stemmer, `SnowballStemmer("english").stem`, memoised
    (imageclef-caption-2021.md §2.2 step 5). Its one Unicode-dependent step, the `word.lower()` it starts with, is
    Python 3.9's (`_Unicode13Word`).

    Constructed with ignore_stopwords=False, so it reads no NLTK data. Importing NLTK costs about a second, which
    is why only the 2021 edition pays it. The pinned NLTK 3.10.4 stems every word as 3.7 did: their EnglishStemmer
    differs only in how the loop marking a y after a vowel as Y is written (same result); tests/reference fuzzes
    the installed stemmer against 3.7's."""
    return _snowball_stem


class _Unicode13Word(str):
    """A word whose `lower()` is Python 3.9's: the stemmer lower-cases its argument, then works on the result."""

    def lower(self) -> str:
        return unicode13.lower(str(self))


@functools.lru_cache(maxsize=None)
def _snowball_stem(word: str) -> str:
    return _nltk_snowball().stem(_Unicode13Word(word))


@functools.cache
def _nltk_snowball():
    from nltk.stem.snowball import SnowballStemmer

    return SnowballStemmer("english")


def preprocess_caption(text: str, stopwords: frozenset[str],
                       stem: Callable[[str], str] | None = None) -> list[str]:
    """The official caption pre-processing, steps 1-5 of imageclef-caption-2022.md §2.2 and
    imageclef-caption-2021.md §2.2.

    `str.lower()` (Unicode 13, as all case mapping here), delete the ASCII punctuation without inserting spaces
    ("x-ray" -> "xray", "3.5" -> "35"), Treebank word tokens, drop tokens whose lower-case form is a stop word,
    then `stem` each token when given.

    Args:
        text: a ground-truth or run caption.
        stopwords: the stop-word list (`load_stopwords()`).
        stem: the stemmer (2021: `snowball_stemmer()`; 2022: None, no stemming).

    Returns:
        The tokens that BLEU and ROUGE-1 compare.
    """
    cleaned = unicode13.lower(text).translate(ASCII_PUNCTUATION_DELETION)
    lower = str.lower if cleaned.isascii() else unicode13.lower  # ASCII case mapping is the same in every version
    tokens = [token for token in _treebank_tokens(cleaned) if lower(token) not in stopwords]
    if stem is not None:
        tokens = [stem(token) for token in tokens]
    return tokens


# ---------------------------------------------------------------------------------------------------------------
# BLEU (imageclef-caption-2022.md §2.3, imageclef-caption-2021.md §2.3)
# ---------------------------------------------------------------------------------------------------------------

BLEU_MAX_ORDER = 4
BLEU_WEIGHT = 0.25


def _ngrams(tokens: Sequence[str], n: int):
    return tokens if n == 1 else zip(*(tokens[i:] for i in range(n)))


def _clipped_matches(reference: Sequence[str], hypothesis: Sequence[str], n: int) -> int:
    """Σ over the hypothesis n-grams g of min(count_hyp(g), count_ref(g))."""
    remaining = Counter(_ngrams(reference, n))
    matches = 0
    for gram in _ngrams(hypothesis, n):
        if remaining[gram] > 0:
            remaining[gram] -= 1
            matches += 1
    return matches


def sentence_bleu(reference: Sequence[str], hypothesis: Sequence[str]) -> float:
    """NLTK's `sentence_bleu([reference], hypothesis)` with weights (0.25,)*4 and no smoothing (method0):
    clipped n-gram counts num_n over den_n = max(1, len(hyp)-n+1); 0 when no unigram matches; a zero num_n
    (n > 1) enters as sys.float_info.min, so short or 4-gram-less candidates get tiny non-zero scores (~1e-77);
    brevity penalty 1 if c > r else exp(1 - r/c); BLEU = BP * exp(fsum(0.25*log(p_n))).

    Args:
        reference: the ground-truth tokens.
        hypothesis: the candidate tokens.

    Returns:
        BLEU in [0, 1]; 0.0 without a shared unigram (also for an empty side).
    """
    hyp_len, ref_len = len(hypothesis), len(reference)
    log_precisions = []
    matches = 1
    for n in range(1, BLEU_MAX_ORDER + 1):
        # no (n-1)-gram in common -> no n-gram in common either
        matches = _clipped_matches(reference, hypothesis, n) if matches and hyp_len >= n else 0
        if n == 1 and matches == 0:
            return 0.0
        precision = matches / max(1, hyp_len - n + 1) if matches else sys.float_info.min
        log_precisions.append(BLEU_WEIGHT * math.log(precision))
    brevity_penalty = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    return brevity_penalty * math.exp(math.fsum(log_precisions))


def caption_bleu(reference: Sequence[str], hypothesis: Sequence[str]) -> float:
    """Per-image BLEU of the official evaluators: 1 when both token lists are empty, else `sentence_bleu`."""
    if not reference and not hypothesis:
        return 1.0
    return sentence_bleu(reference, hypothesis)


# ---------------------------------------------------------------------------------------------------------------
# ROUGE-1 (imageclef-caption-2022.md §2.4)
# ---------------------------------------------------------------------------------------------------------------

_ROUGE_NON_ALPHANUMERIC = re.compile(r"[^a-z0-9]+")


def rouge_tokenize(text: str) -> list[str]:
    """rouge-score 0.1.2's default tokeniser without stemmer: lower() (Unicode 13), every run outside [a-z0-9] -> one
    space, split; so non-ASCII letters (µ, é) and Unicode punctuation vanish or split words."""
    return unicode13.split(_ROUGE_NON_ALPHANUMERIC.sub(" ", unicode13.lower(text)))


def rouge1_fmeasure(target: str, prediction: str) -> float:
    """rouge-score's `RougeScorer(['rouge1']).score(target, prediction)['rouge1'].fmeasure`: unigram multisets,
    overlap = Σ min counts, P = overlap/max(|pred|,1), R = overlap/max(|target|,1), F = 2*P*R/(P+R) or 0.0.

    Args:
        target: the ground-truth text.
        prediction: the candidate text.

    Returns:
        The ROUGE-1 F-measure in [0, 1].
    """
    target_counts = Counter(rouge_tokenize(target))
    prediction_counts = Counter(rouge_tokenize(prediction))
    overlap = sum(min(count, prediction_counts[gram]) for gram, count in target_counts.items())
    precision = overlap / max(sum(prediction_counts.values()), 1)
    recall = overlap / max(sum(target_counts.values()), 1)
    if precision + recall > 0:
        return 2 * precision * recall / (precision + recall)
    return 0.0


def caption_rouge1(reference: Sequence[str], hypothesis: Sequence[str]) -> float:
    """Per-image ROUGE-1 F of the 2022 evaluator: tokens joined by spaces; 1 when both joined strings are empty,
    else `rouge1_fmeasure(reference, hypothesis)` (a non-empty caption that rouge tokenises to nothing gives 0)."""
    target, prediction = " ".join(reference), " ".join(hypothesis)
    if not target and not prediction:
        return 1.0
    return rouge1_fmeasure(target, prediction)


# ---------------------------------------------------------------------------------------------------------------
# Caption aggregates
# ---------------------------------------------------------------------------------------------------------------


def sum_then_divide(scores: Iterable[float], denominator: int) -> float:
    """Primary caption score (imageclef-caption-2022.md §2.5, imageclef-caption-2021.md §2.4).

    Args:
        scores: per-image BLEU in submission order, summed from 0 in that order.
        denominator: the number of ground-truth captions.

    Returns:
        The sum divided by `denominator`.
    """
    total = 0.0
    for score in scores:
        total += score
    return total / denominator


def numpy_mean(scores: Sequence[float]) -> float:
    """2022 ROUGE-1 aggregate (imageclef-caption-2022.md §2.5): `np.mean(list_of_F)` (numpy's pairwise summation,
    bit for bit)."""
    import numpy as np

    return float(np.mean(np.asarray(scores, dtype=np.float64)))
