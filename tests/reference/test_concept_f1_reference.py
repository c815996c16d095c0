"""ImageCLEFmed Caption concept F1 (2021 and 2022 per-image code) vs scikit-learn 1.0.2 `f1_score` (Python 3.9): every
(tp, fp, fn) up to 15 each, where p/r-formula and 2tp/(2tp+fp+fn) can differ in the last bit, and random concept
lists with case, whitespace, empty-string and duplicate quirks (fixed seeds)."""

from __future__ import annotations

import itertools
import random

import pytest

from medchallenge.metrics import imageclef_caption as m

pytestmark = pytest.mark.reference

MAX_COUNT = 15


def counts_sweep() -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """One (GT, prediction) pair for every tp, fp, fn in 0..MAX_COUNT (GT never empty)."""
    pairs = []
    for tp, fp, fn in itertools.product(range(MAX_COUNT + 1), repeat=3):
        if tp + fn == 0:
            continue
        shared = [f"C{i:07d}" for i in range(tp)]
        truth = shared + [f"C{100 + i:07d}" for i in range(fn)]
        predicted = shared + [f"C{200 + i:07d}" for i in range(fp)]
        pairs.append((tuple(truth), tuple(predicted)))
    return pairs


def concept_pairs_2022(count: int, seed: int) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Stripped concept tuples as the 2022 reader makes them: ('',) for an empty field, mixed case, duplicates."""
    rng = random.Random(seed)
    pool = [f"C{i:07d}" for i in range(60)] + [f"c{i:07d}" for i in range(10)] + ["", "c0000001", "x"]
    pairs = []
    for _ in range(count):
        size = rng.choice([1, 2, 3, rng.randint(1, 10), rng.randint(1, 150)])
        truth = tuple(rng.choice(pool) for _ in range(size))
        predicted = tuple(concept if rng.random() < 0.5 else concept.lower() for concept in truth
                          if rng.random() < rng.random())
        predicted += tuple(rng.choice(pool) for _ in range(rng.choice([0, 1, rng.randint(0, 20)])))
        pairs.append((truth, predicted if rng.random() < 0.95 else ()))
    return pairs


def concept_pairs_2021(count: int, seed: int) -> list[tuple[str, str]]:
    """Raw 2021 concept fields: ';'-joined with stray spaces, empty and blank fields, trailing ';'."""
    rng = random.Random(seed)
    pool = [f"C{i:07d}" for i in range(40)] + [f"c{i:07d}" for i in range(5)] + [" C0000001", "C0000002 ", ""]
    fields = ["", " ", "  ", ";", " ; "]
    pairs = []
    for _ in range(count):
        truth = [rng.choice(pool) for _ in range(rng.choice([1, rng.randint(1, 8), rng.randint(1, 80)]))]
        predicted = [c for c in truth if rng.random() < 0.6] + [rng.choice(pool) for _ in range(rng.randint(0, 6))]
        rng.shuffle(predicted)
        gt = ";".join(truth) if rng.random() < 0.9 else rng.choice(fields)
        run = ";".join(predicted) if rng.random() < 0.9 else rng.choice(fields)
        pairs.append((gt, run + (";" if rng.random() < 0.05 else "")))
    return pairs


def test_concept_f1_2022_matches_sklearn_1_0_2(py39, record):
    pairs = counts_sweep() + concept_pairs_2022(3000, seed=811)
    reference = py39.run("concept_f1_2022", pairs)
    mismatches = [(pair, m.concept_f1_2022(*pair), expected) for pair, expected in zip(pairs, reference)
                  if m.concept_f1_2022(*pair) != expected]
    # inputs where sklearn's p/r arithmetic and 2tp/(2tp+fp+fn) round differently: the sweep must contain some
    formula_differs = sum(1 for (truth, predicted) in counts_sweep()
                          if (tp := len(set(truth) & set(predicted)))
                          and m.binary_f1(tp, len(predicted) - tp, len(truth) - tp)
                          != 2 * tp / (len(truth) + len(predicted)))
    record("concept F1 2022", py39, len(pairs), mismatches, where_2tp_formula_differs=formula_differs)
    assert formula_differs > 0


def test_concept_f1_2021_matches_sklearn_1_0_2(py39, record):
    pairs = concept_pairs_2021(3000, seed=812)
    reference = py39.run("concept_f1_2021", pairs)
    mismatches = [(pair, m.concept_f1_2021(*pair), expected) for pair, expected in zip(pairs, reference)
                  if m.concept_f1_2021(*pair) != expected]
    excluded = sum(1 for expected in reference if expected is None)
    record("concept F1 2021", py39, len(pairs), mismatches, empty_ground_truth=excluded)
