"""Pairwise tests and ranking agreement of the leaderboard, on NumPy alone (the evaluator images carry no SciPy):
one-sided Wilcoxon signed-rank over per-case scores (challengeR's test), one-sided paired bootstrap over the
aggregate, Holm's step-down adjustment, Kendall's tau-b. The tests check the Wilcoxon p-values
against scipy.stats.wilcoxon and its decisions against challengeR's own test-then-rank examples."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def _average_ranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ranks 1..n (ties get their mean rank) and the size of each group of ties."""
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    starts = np.flatnonzero(np.concatenate([[True], sorted_values[1:] != sorted_values[:-1]]))
    sizes = np.diff(np.concatenate([starts, [len(values)]]))
    mean_rank = starts + (sizes + 1) / 2
    ranks = np.empty(len(values))
    ranks[order] = np.repeat(mean_rank, sizes)
    return ranks, sizes


def wilcoxon_greater(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """One-sided Wilcoxon signed-rank test that `a` tends to exceed `b` (paired), as challengeR tests
    (`wilcox.test(x, y, alternative, exact = FALSE, paired = TRUE)`): zero differences dropped, average ranks for
    ties, the normal approximation with the tie correction and R's continuity correction of 0.5. Returns (V, p):
    V the sum of the ranks of the positive differences; p = 1 where no difference is left."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    d = d[d != 0]
    n = len(d)
    if n == 0:
        return 0.0, 1.0
    ranks, ties = _average_ranks(np.abs(d))
    w_plus = float(ranks[d > 0].sum())
    sigma = np.sqrt(n * (n + 1) * (2 * n + 1) / 24 - np.sum(ties ** 3 - ties) / 48)
    z = (w_plus - n * (n + 1) / 4 - 0.5) / sigma
    return w_plus, 0.5 * math.erfc(z / math.sqrt(2))


def bootstrap_greater(a: np.ndarray, b: np.ndarray) -> float:
    """One-sided paired bootstrap p-value that aggregate `a` exceeds `b`: (1 + resamples with a <= b) / (1 + N),
    over the resamples where both are defined (the same resamples for both: paired)."""
    defined = np.isfinite(a) & np.isfinite(b)
    return float((1 + np.count_nonzero(a[defined] <= b[defined])) / (1 + np.count_nonzero(defined)))


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values: the k-th smallest times (m - k + 1), made monotone, at most 1."""
    p = np.asarray(pvalues, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, p[order] * (len(p) - np.arange(len(p))))
    adjusted = np.empty_like(p)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b of two rankings (ties in either reduce the denominator, as scipy.stats.kendalltau); NaN
    where either is constant."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    upper = np.triu_indices(len(x), k=1)
    dx = np.sign(x[:, None] - x[None, :])[upper]
    dy = np.sign(y[:, None] - y[None, :])[upper]
    denominator = math.sqrt(np.count_nonzero(dx) * np.count_nonzero(dy))
    return float(np.sum(dx * dy) / denominator) if denominator else math.nan
