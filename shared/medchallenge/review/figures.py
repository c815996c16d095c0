"""PNGs of one case with the ground truth (green) and the predictions (red) drawn over the image: a thumbnail for
embedding in an offline page and the same figure at the image's full resolution (opened by a click on the
thumbnail), both from one drawing. matplotlib's object API, as medchallenge.plots."""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np

from ..plots import _figure

GROUND_TRUTH = "tab:green"
PREDICTED = "tab:red"
MAX_POINTS = 10  # the most probable points drawn per radiograph
THUMBNAIL_DPI = 100
MAX_FULL_SIDE = 4096  # pixels of a full-resolution figure's longer side, at most
TITLE_POINTS = 9  # the title's and the legend's size: 12.5 px in a thumbnail
Pngs = tuple[bytes, bytes]  # (thumbnail, full resolution)
CT_FIGURE = (6.2, 3.4)  # inches: two views side by side
CT_VIEW_WIDTH = 0.46  # of the figure's width, each view
RADIOGRAPH_WIDTH = 3.8  # inches
TITLE_BAND = 0.3  # inches above a radiograph for the title
CAPTION_FIGURE = (7.2, 3.4)


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.canvas.print_png(buffer)
    return buffer.getvalue()


def _windowed(image: np.ndarray) -> np.ndarray:
    """Intensities scaled to 0..1 between the 1st and 99.5th percentiles (a CT's air to bone, a radiograph's)."""
    low, high = np.percentile(image, [1, 99.5]) if image.size else (0.0, 1.0)
    return np.clip((image.astype(np.float32) - low) / max(float(high - low), 1e-6), 0, 1)


def _pngs(figure, native: int, axes_width: float) -> Pngs:
    """The figure as a thumbnail (THUMBNAIL_DPI) and at full resolution: one figure pixel per image pixel across the
    `native` pixels drawn `axes_width` inches wide (at least the thumbnail's resolution, at most MAX_FULL_SIDE pixels
    on the longer side)."""
    figure.set_dpi(THUMBNAIL_DPI)
    thumbnail = _png(figure)
    figure.set_dpi(min(max(THUMBNAIL_DPI, native / axes_width), MAX_FULL_SIDE / max(figure.get_size_inches())))
    return thumbnail, _png(figure)


def _legend(figure, title: str) -> None:
    figure.text(0.01, 0.99, title, va="top", fontsize=TITLE_POINTS, parse_math=False)
    figure.text(0.99, 0.99, "ground truth", va="top", ha="right", fontsize=TITLE_POINTS, color=GROUND_TRUTH)
    figure.text(0.99, 0.99 - 0.07 * 2.4 / figure.get_figheight(), "predictions", va="top", ha="right",
                fontsize=TITLE_POINTS, color=PREDICTED)


def ct_boxes_png(volume_zyx: np.ndarray, ground_truth: Sequence[Sequence[int]], predicted: Sequence[Sequence[int]],
                 title: str) -> Pngs:
    """Axial and coronal maximum-intensity views of a CT (array z, y, x) with (x1, y1, z1, x2, y2, z2) voxel boxes."""
    from matplotlib.patches import Rectangle

    figure = _figure(*CT_FIGURE)
    views = ((_windowed(volume_zyx.max(axis=0)), (0, 1), "axial (x, y)"),
             (_windowed(volume_zyx.max(axis=1)), (0, 2), "coronal (x, z)"))
    for index, (view, (a, b), label) in enumerate(views):
        ax = figure.add_axes((0.02 + index * 0.49, 0.02, 0.46, 0.82))
        ax.imshow(view, cmap="gray", origin="upper" if b == 1 else "lower", aspect="auto", interpolation="nearest")
        for boxes, colour in ((ground_truth, GROUND_TRUTH), (predicted, PREDICTED)):
            for box in boxes:
                ax.add_patch(Rectangle((box[a] - 0.5, box[b] - 0.5), box[a + 3] - box[a], box[b + 3] - box[b],
                                       fill=False, edgecolor=colour, linewidth=1.2))
        ax.set_title(label, fontsize=TITLE_POINTS - 1, pad=2)
        ax.set_xticks([])
        ax.set_yticks([])
    _legend(figure, title)
    return _pngs(figure, volume_zyx.shape[2], CT_VIEW_WIDTH * CT_FIGURE[0])


def radiograph_points_png(image: np.ndarray, objects: Sequence[tuple[str, np.ndarray]],
                          points: Sequence[tuple[float, float, float]], title: str) -> Pngs:
    """A radiograph (array y, x) with its objects ("rectangle" / "ellipse" x1 y1 x2 y2, "polygon" vertices (n, 2))
    and the most probable predicted points (probability, x, y), in the array's pixel coordinates."""
    from matplotlib.patches import Ellipse, Polygon, Rectangle

    height, width = image.shape
    figure = _figure(RADIOGRAPH_WIDTH, RADIOGRAPH_WIDTH * height / max(width, 1) + TITLE_BAND)
    ax = figure.add_axes((0.01, 0.01, 0.98, 0.98 - TITLE_BAND / figure.get_figheight()))
    ax.imshow(_windowed(image), cmap="gray", interpolation="antialiased")
    for kind, shape in objects:
        if kind == "polygon":
            ax.add_patch(Polygon(shape, closed=True, fill=False, edgecolor=GROUND_TRUTH, linewidth=1.2))
        elif kind in ("rectangle", "ellipse"):
            x1, y1, x2, y2 = shape
            patch = (Rectangle((x1, y1), x2 - x1, y2 - y1, fill=False, edgecolor=GROUND_TRUTH, linewidth=1.2)
                     if kind == "rectangle" else
                     Ellipse(((x1 + x2) / 2, (y1 + y2) / 2), x2 - x1, y2 - y1, fill=False, edgecolor=GROUND_TRUTH,
                             linewidth=1.2))
            ax.add_patch(patch)
    for probability, x, y in sorted(points, reverse=True)[:MAX_POINTS]:
        ax.plot([x], [y], marker="x", color=PREDICTED, markersize=5 + 7 * float(np.clip(probability, 0, 1)))
    ax.set_xlim(-0.5, width - 0.5)
    ax.set_ylim(height - 0.5, -0.5)
    ax.set_xticks([])
    ax.set_yticks([])
    _legend(figure, title)
    return _pngs(figure, width, 0.98 * RADIOGRAPH_WIDTH)


def ct_masks_png(volume_zyx: np.ndarray, ground_truth_zyx: np.ndarray, predicted_zyx: np.ndarray, title: str) -> Pngs:
    """Axial and coronal maximum-intensity views of a CT with the outlines of two instance masks' projections."""
    figure = _figure(*CT_FIGURE)
    for index, (axis, origin, label) in enumerate(((0, "upper", "axial (x, y)"), (1, "lower", "coronal (x, z)"))):
        ax = figure.add_axes((0.02 + index * 0.49, 0.02, 0.46, 0.82))
        ax.imshow(_windowed(volume_zyx.max(axis=axis)), cmap="gray", origin=origin, aspect="auto",
                  interpolation="nearest")
        for mask, colour in ((ground_truth_zyx, GROUND_TRUTH), (predicted_zyx, PREDICTED)):
            projection = (mask > 0).any(axis=axis)
            if projection.any() and not projection.all():
                ax.contour(projection.astype(np.float32), levels=[0.5], colors=[colour], linewidths=1.0,
                           origin=origin)
        ax.set_title(label, fontsize=TITLE_POINTS - 1, pad=2)
        ax.set_xticks([])
        ax.set_yticks([])
    _legend(figure, title)
    return _pngs(figure, volume_zyx.shape[2], CT_VIEW_WIDTH * CT_FIGURE[0])


def _wrapped(text: str, width: int = 52, lines: int = 4) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width)[:lines])


def figure_concepts_png(image: np.ndarray | None, true_concepts: Sequence[str], predicted_concepts: Sequence[str],
                        true_caption: str | None, predicted_caption: str | None, title: str) -> Pngs:
    """A caption figure (None: not available, an empty panel says so) with its concepts: found (black), missed
    (green: in the ground truth only), extra (red: in the predictions only), and the two captions. Text is drawn as
    text (no mathtext), cut to a few lines."""
    figure = _figure(*CAPTION_FIGURE)
    ax = figure.add_axes((0.01, 0.02, 0.36, 0.84))
    if image is None:
        ax.text(0.5, 0.5, "no image", ha="center", va="center", fontsize=TITLE_POINTS, color="grey")
    else:
        ax.imshow(image, cmap="gray" if image.ndim == 2 else None, interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    found = [c for c in predicted_concepts if c in set(true_concepts)]
    rows = [("found: " + " ".join(found), "black"),
            ("missed: " + " ".join(c for c in true_concepts if c not in set(predicted_concepts)), GROUND_TRUTH),
            ("extra: " + " ".join(c for c in predicted_concepts if c not in set(true_concepts)), PREDICTED)]
    if true_caption is not None:
        rows.append(("true: " + true_caption, GROUND_TRUTH))
    if predicted_caption is not None:
        rows.append(("predicted: " + predicted_caption, PREDICTED))
    y = 0.84
    for text, colour in rows:
        wrapped = _wrapped(text)
        figure.text(0.39, y, wrapped, va="top", fontsize=TITLE_POINTS - 1, color=colour, parse_math=False,
                    usetex=False)
        y -= 0.05 + 0.055 * (wrapped.count("\n") + 1)
    _legend(figure, title)
    return _pngs(figure, 0 if image is None else image.shape[1], 0.36 * CAPTION_FIGURE[0])
