"""PNG figures written next to metrics.json (matplotlib, headless, imported only when drawing)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def _pyplot():
    os.environ.setdefault("MPLCONFIGDIR", "/tmp/matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> None:
    from .io import atomic_output

    with atomic_output(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=110, bbox_inches="tight")
    _pyplot().close(fig)


def plot_froc(path: Path, fps: Sequence[float], sensitivities: Sequence[float],
              key_fps: Sequence[float] = (), key_sensitivities: Sequence[float] = (),
              title: str = "FROC", xlabel: str = "false positives per scan") -> None:
    """Sensitivity against false positives per scan/image, log-scaled x, key points marked."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    positive = [(f, s) for f, s in zip(fps, sensitivities) if f > 0]
    if positive:
        ax.plot(*zip(*positive), drawstyle="steps-post", color="tab:blue", label="FROC")
    if key_fps:
        ax.plot(key_fps, key_sensitivities, "o", color="tab:red", label="reported points")
        for f, s in zip(key_fps, key_sensitivities):
            ax.annotate(f"{s:.3f}", (f, s), textcoords="offset points", xytext=(4, -12), fontsize=8)
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("sensitivity")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right")
    _save(fig, path)


def plot_roc(path: Path, fpr: Sequence[float], tpr: Sequence[float], auc: float, title: str = "ROC") -> None:
    """ROC curve with its AUC."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.plot(fpr, tpr, color="tab:blue", label=f"AUC = {auc:.4f}")
    ax.plot([0, 1], [0, 1], "--", color="grey", linewidth=0.8)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title(title)
    ax.legend(loc="lower right")
    _save(fig, path)


def plot_confusion_matrix(path: Path, matrix: Sequence[Sequence[int]], row_labels: Sequence[str],
                          column_labels: Sequence[str], title: str = "confusion matrix",
                          xlabel: str = "prediction", ylabel: str = "ground truth") -> None:
    """Counts as a heat map with the numbers written in the cells."""
    import numpy as np

    plt = _pyplot()
    data = np.asarray(matrix)
    fig, ax = plt.subplots(figsize=(1 + 0.9 * len(column_labels), 1 + 0.8 * len(row_labels)))
    ax.imshow(data, cmap="Blues")
    ax.set_xticks(range(len(column_labels)), column_labels, rotation=30, ha="right")
    ax.set_yticks(range(len(row_labels)), row_labels)
    for (i, j), value in np.ndenumerate(data):
        ax.text(j, i, str(value), ha="center", va="center",
                color="white" if value > data.max() / 2 else "black", fontsize=9)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    _save(fig, path)


def plot_histogram(path: Path, series: dict[str, Sequence[float]], title: str = "per-case scores",
                   xlabel: str = "score", bins: int = 20) -> None:
    """Distributions of per-case scores, one histogram per named series."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, values in series.items():
        ax.hist(list(values), bins=bins, range=(0, 1), alpha=0.6, label=f"{name} (n={len(values)})")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("cases")
    ax.set_title(title)
    ax.legend()
    _save(fig, path)
