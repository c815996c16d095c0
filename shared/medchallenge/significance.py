"""Pairwise tests of the leaderboard: one-sided Wilcoxon signed-rank over per-case scores, one-sided paired
bootstrap over the aggregate, Holm's step-down adjustment. Checked against scipy.stats.wilcoxon in the tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.special import ndtr

EXACT_MAX_CASES = 50  # as scipy.stats.wilcoxon's method="auto": exact up to 50 differences without ties or zeros


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


def _signed_rank_tail(n: int, statistic: int) -> float:
    """P(W+ >= statistic) under the null for n differences without ties: the 2**n equally likely sign patterns,
    counted by the sum of the ranks with a + sign."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for rank in range(1, n + 1):
        counts[rank:] = counts[rank:] + counts[:-rank].copy()
    return float(counts[statistic:].sum() / counts.sum())


def wilcoxon_greater(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, str]:
    """One-sided Wilcoxon signed-rank test that `a` tends to exceed `b` (paired). Zero differences are dropped
    (Wilcoxon's rule); exact null distribution for up to 50 differences without ties, else the normal
    approximation with the tie correction and no continuity correction. Returns (W+, p, method); p = 1 where no
    difference is left."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    has_zero = bool(np.any(d == 0))
    d = d[d != 0]
    n = len(d)
    if n == 0:
        return 0.0, 1.0, "none"
    ranks, ties = _average_ranks(np.abs(d))
    w_plus = float(ranks[d > 0].sum())
    if n <= EXACT_MAX_CASES and not has_zero and np.all(ties == 1):
        return w_plus, _signed_rank_tail(n, int(np.floor(w_plus))), "exact"
    mean = n * (n + 1) / 4
    sd = np.sqrt((n * (n + 1) * (2 * n + 1) - np.sum(ties ** 3 - ties) / 2) / 24)
    return w_plus, float(ndtr(-(w_plus - mean) / sd)), "asymptotic"


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
