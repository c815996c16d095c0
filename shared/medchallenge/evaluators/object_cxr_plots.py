"""FROC and ROC PNGs for object-CXR, drawn with matplotlib's object API (no pyplot, no mathtext, no tight bbox).

`medchallenge.plots` goes through pyplot, whose import alone takes about 0.7 s; the Figure/Agg API is about 0.2 s
cheaper, and fixed tick labels avoid mathtext, which keeps the whole evaluation of 10,000 images under 1.5 s.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..io import atomic_output


def _figure(width: float, height: float):
    os.environ.setdefault("MPLCONFIGDIR", "/tmp/matplotlib")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(figure)
    return figure


def _save(figure, path: Path) -> None:
    with atomic_output(path, "wb") as handle:
        figure.canvas.print_png(handle)


def plot_froc_curve(path: Path, fp_rate: Sequence[float], sensitivity: Sequence[float], levels: Sequence[float],
                    level_sensitivities: Sequence[float], title: str) -> None:
    """Sensitivity against false positives per image (log x, ticks at the FROC levels), levels marked."""
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator

    figure = _figure(6, 4.5)
    figure.subplots_adjust(left=0.11, right=0.97, bottom=0.12, top=0.91)
    ax = figure.add_subplot()
    curve = [(f, s) for f, s in zip(fp_rate, sensitivity) if f > 0]
    if curve:
        ax.plot(*zip(*curve), drawstyle="steps-post", color="tab:blue", label="all points")
    marked = [(f, s) for f, s in zip(levels, level_sensitivities) if f > 0]
    if marked:
        ax.plot(*zip(*marked), "o", color="tab:red", label="FROC levels (official walk)")
    for f, s in marked:
        ax.annotate(f"{s:.3f}", (f, s), textcoords="offset points", xytext=(4, -12), fontsize=8)
    ax.set_xscale("log")
    ticks = sorted(f for f, _ in marked) or [1.0]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FixedFormatter([f"{t:g}" for t in ticks]))
    ax.xaxis.set_minor_locator(NullLocator())
    upper = max([*ticks, *(f for f, _ in curve)])
    ax.set_xlim(min(ticks) / 2, upper * 1.5)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("false positives per image")
    ax.set_ylabel("sensitivity")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right")
    _save(figure, path)


def plot_roc_curve(path: Path, fpr: Sequence[float], tpr: Sequence[float], auc: float, title: str) -> None:
    """ROC curve with its AUC and the chance diagonal."""
    figure = _figure(4.5, 4.5)
    figure.subplots_adjust(left=0.14, right=0.96, bottom=0.12, top=0.91)
    ax = figure.add_subplot()
    ax.plot(fpr, tpr, color="tab:blue", label=f"AUC = {auc:.4f}")
    ax.plot([0, 1], [0, 1], "--", color="grey", linewidth=0.8)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title(title)
    ax.legend(loc="lower right")
    _save(figure, path)
