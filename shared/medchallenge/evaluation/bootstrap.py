"""Percentile bootstrap over cases: confidence intervals for every aggregate of any evaluator.

A resample draws the challenge's units (a CT, an image: `Evaluator.bootstrap_units`) with replacement; the
challenge's `resample` step builds the cases and records of the drawn units, re-keyed so that a unit drawn twice is
two cases, and the challenge's own `aggregate` runs on them, quirks included. A challenge whose aggregate is a
function of per-case sums may add `fast_bootstrap`, which computes the same numbers for all resamples at once (held
equal to the generic path by the tests). The indices are those of `scipy.stats.bootstrap` for the same seed
(`numpy.random.default_rng(seed).integers(0, n, (N, n))`), and the interval is its percentile interval.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..errors import InputError

log = logging.getLogger("medchallenge.evaluation.bootstrap")

DEFAULT_LEVEL = 0.95
DEFAULT_SEED = 0


class Aggregated(Protocol):
    """What a challenge's aggregate step gives, as far as the bootstrap reads it (cases.Summary)."""

    @property
    def aggregates(self) -> dict[str, float]: ...


class Resampled(Protocol):
    """What the bootstrap needs of a challenge's evaluator: its resampling steps and its aggregate.
    command.Evaluator is one; declared here so that the bootstrap does not depend on the
    evaluator command (which depends on the bootstrap)."""

    @property
    def challenge(self) -> str: ...

    @property
    def resampling_unit(self) -> str: ...

    @property
    def bootstrap_units(self) -> Callable[[Any], list[str]]: ...

    @property
    def resample(self) -> Callable[[Any, dict[str, Any], np.ndarray], tuple[Any, dict[str, Any]]] | None: ...

    @property
    def fast_bootstrap(self) -> Callable[[Any, dict[str, Any], np.ndarray], dict[str, np.ndarray]] | None: ...

    @property
    def aggregate(self) -> Callable[[Any, dict[str, Any]], Aggregated]: ...


def draw_resamples(num_units: int, num_resamples: int, seed: int) -> np.ndarray:
    """(num_resamples, num_units) unit indices drawn with replacement, as scipy.stats.bootstrap draws them."""
    if num_units < 1:
        raise InputError("--bootstrap: no case to resample")
    return np.random.default_rng(seed).integers(0, num_units, (num_resamples, num_units))


def resampled_ids(units: Sequence[str], draw: Sequence[int]) -> list[tuple[str, str]]:
    """(new id, original id) for each drawn unit in draw order; the new id is unique (`<id>#<position>`), so a unit
    drawn twice is two cases to every aggregate."""
    return [(f"{units[index]}#{position}", units[index]) for position, index in enumerate(draw)]


def linear_quantile(values: np.ndarray, probability: float) -> float:
    """The linear-interpolation quantile (Hyndman and Fan's type 7) written as scipy.stats.quantile computes it,
    the quantile of scipy.stats.bootstrap's percentile interval, to the last bit (numpy.quantile interpolates the
    same points but can differ in the last bit). Here so that the evaluator images need no SciPy."""
    y = np.sort(np.asarray(values, dtype=np.float64))
    n = len(y)
    position = probability * n + (1 - probability)
    upper = np.floor(position)
    fraction = 0.0 if upper < 1 else position % 1
    lower_index, upper_index = int(min(max(upper - 1, 0), n - 1)), int(min(max(upper, 0), n - 1))
    return float((1 - fraction) * y[lower_index] + fraction * y[upper_index])


def percentile_interval(replicates: np.ndarray, level: float) -> tuple[float, float]:
    """The percentile interval of the replicates: scipy.stats.bootstrap's method="percentile"."""
    alpha = (1 - level) / 2
    return linear_quantile(replicates, alpha), linear_quantile(replicates, 1 - alpha)


def replicates(evaluator: Resampled, cases: Any, records: dict[str, Any], draws: np.ndarray,
               store: Path | None = None) -> dict[str, np.ndarray]:
    """Each aggregate on each resample (rows of `draws`): float64 arrays, NaN where a resample leaves the
    aggregate undefined (the challenge's aggregate refuses it, or the aggregate is missing from it). With `store`
    (a --records folder: its fingerprint ties it to the inputs and options), they are kept there by the hash of the
    draws and reused: a phase's leaderboard takes each team's from its evaluation instead of resampling again."""
    kept = store / f"bootstrap-{hashlib.sha256(draws.astype(np.int64).tobytes()).hexdigest()[:32]}-" \
        f"{draws.shape[0]}x{draws.shape[1]}.npz" if store is not None else None
    if kept is not None and kept.is_file():
        try:
            with np.load(kept, allow_pickle=False) as loaded:
                return {key: loaded[key] for key in loaded.files}
        except (OSError, ValueError):
            pass  # unreadable: computed again
    values = _replicates(evaluator, cases, records, draws)
    if kept is not None:
        _save(kept, values)
    return values


def _save(path: Path, values: dict[str, np.ndarray]) -> None:
    """The replicates written aside, then renamed into place (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=path.parent, prefix=".bootstrap-", suffix=".npz")
    try:
        with os.fdopen(handle, "wb") as output:
            np.savez(output, **values)
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


def _replicates(evaluator: Resampled, cases: Any, records: dict[str, Any], draws: np.ndarray) -> dict[str, np.ndarray]:
    if evaluator.fast_bootstrap is not None:
        return evaluator.fast_bootstrap(cases, records, draws)
    if evaluator.resample is None:
        raise InputError(f"{evaluator.challenge}: this evaluator has no bootstrap")
    values: dict[str, np.ndarray] = {}
    for row, draw in enumerate(draws):
        try:
            aggregates = evaluator.aggregate(*evaluator.resample(cases, records, draw)).aggregates
        except (InputError, ValueError, ZeroDivisionError):
            aggregates = {}
        for key, value in aggregates.items():
            values.setdefault(key, np.full(len(draws), np.nan))[row] = value
    return values


def intervals(values: dict[str, np.ndarray], level: float, seed: int) -> dict[str, dict[str, float | int]]:
    """meta.bootstrap: per aggregate {low, high, level, n, seed} (and num_undefined where some resamples gave
    no finite value); an aggregate finite in no resample is left out."""
    result: dict[str, dict[str, float | int]] = {}
    for key, replicate in values.items():
        finite = replicate[np.isfinite(replicate)]
        if not len(finite):
            continue
        low, high = percentile_interval(finite, level)
        result[key] = {"low": low, "high": high, "level": level, "n": len(replicate), "seed": seed}
        if len(finite) < len(replicate):
            result[key]["num_undefined"] = len(replicate) - len(finite)
    return result


def bootstrap(evaluator: Resampled, cases: Any, records: dict[str, Any], num_resamples: int, seed: int,
              level: float, store: Path | None = None) -> dict[str, dict[str, float | int]]:
    """The intervals of every aggregate from `num_resamples` resamples of the evaluator's units (the replicates
    kept in `store`: `replicates`)."""
    started = time.perf_counter()
    draws = draw_resamples(len(evaluator.bootstrap_units(cases)), num_resamples, seed)
    result = intervals(replicates(evaluator, cases, records, draws, store), level, seed)
    log.info("bootstrap: %d resamples of %d %s in %.2f s", num_resamples, draws.shape[1], evaluator.resampling_unit,
             time.perf_counter() - started)
    return result


def check_level(level: float) -> float:
    if not (0 < level < 1) or not math.isfinite(level):
        raise InputError(f"--bootstrap-level {level}: expected a number between 0 and 1 (e.g. 0.95)")
    return level
