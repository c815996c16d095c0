"""PNG figures written next to metrics.json.

matplotlib's object API (Figure + Agg canvas, no pyplot, fixed tick labels without mathtext), imported only when
drawing: pyplot's import alone costs about 0.7 s, which matters for evaluators with a 1.5 s budget.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def _figure(width: float, height: float):
    os.environ.setdefault("MPLCONFIGDIR", "/tmp/matplotlib")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(figure)
    return figure


def _save(figure, path: Path) -> None:
    from .io import atomic_output

    with atomic_output(path, "wb") as handle:
        figure.canvas.print_png(handle)


def plot_froc(path: Path, fps: Sequence[float], sensitivities: Sequence[float],
              key_fps: Sequence[float] = (), key_sensitivities: Sequence[float] = (),
              title: str = "FROC", xlabel: str = "false positives per scan", interpolation: str = "step") -> None:
    """Sensitivity against false positives per scan/image, log-scaled x with ticks at the key points, marked.

    interpolation: how the challenge reads the curve between operating points, "step" (first crossing) or
    "linear" (np.interp), so that the key points lie on the drawn curve.
    """
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator

    figure = _figure(6, 4.5)
    figure.subplots_adjust(left=0.11, right=0.97, bottom=0.12, top=0.91)
    ax = figure.add_subplot()
    curve = [(f, s) for f, s in zip(fps, sensitivities) if f > 0]
    if curve:
        ax.plot(*zip(*curve), drawstyle="steps-post" if interpolation == "step" else "default", color="tab:blue",
                label="all operating points")
    marked = [(f, s) for f, s in zip(key_fps, key_sensitivities) if f > 0]
    if marked:
        ax.plot(*zip(*marked), "o", color="tab:red", label="reported points")
    for f, s in marked:
        ax.annotate(f"{s:.3f}", (f, s), textcoords="offset points", xytext=(4, -12), fontsize=8)
    ax.set_xscale("log")
    ticks = sorted(f for f, _ in marked) or [1.0]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FixedFormatter([f"{t:g}" for t in ticks]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(min(ticks) / 2, max([*ticks, *(f for f, _ in curve)]) * 1.5)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("sensitivity")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right")
    _save(figure, path)


def plot_roc(path: Path, fpr: Sequence[float], tpr: Sequence[float], auc: float, title: str = "ROC") -> None:
    """ROC curve with its AUC."""
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


def plot_confusion_matrix(path: Path, matrix: Sequence[Sequence[int]], row_labels: Sequence[str],
                          column_labels: Sequence[str], title: str = "confusion matrix",
                          xlabel: str = "prediction", ylabel: str = "ground truth") -> None:
    """Counts as a heat map with the numbers written in the cells."""
    import numpy as np

    data = np.asarray(matrix)
    figure = _figure(1.5 + 0.9 * len(column_labels), 1.2 + 0.8 * len(row_labels))
    figure.subplots_adjust(left=0.25, right=0.97, bottom=0.25, top=0.88)
    ax = figure.add_subplot()
    ax.imshow(data, cmap="Blues")
    ax.set_xticks(range(len(column_labels)), column_labels, rotation=30, ha="right")
    ax.set_yticks(range(len(row_labels)), row_labels)
    for (i, j), value in np.ndenumerate(data):
        ax.text(j, i, str(value), ha="center", va="center",
                color="white" if value > data.max() / 2 else "black", fontsize=9)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    _save(figure, path)


def plot_histogram(path: Path, series: dict[str, Sequence[float]], title: str = "per-case scores",
                   xlabel: str = "score", bins: int = 20) -> None:
    """Distributions of per-case scores, one histogram per named series."""
    figure = _figure(6, 4)
    figure.subplots_adjust(left=0.11, right=0.97, bottom=0.13, top=0.9)
    ax = figure.add_subplot()
    for name, values in series.items():
        ax.hist(list(values), bins=bins, range=(0, 1), alpha=0.6, label=f"{name} (n={len(values)})")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("cases")
    ax.set_title(title)
    ax.legend()
    _save(figure, path)
