"""Pre-flight's pictures of a challenge that is not one of the project's own, drawn from its sockets' kinds alone:
per case the input image with what each output socket predicted over it (a Segmentation's labels filled and
outlined, a Heat Map in colour, points, boxes, polygons, lines, angles and ellipses in the world millimetres
grand-challenge's annotation kinds hold), each socket in its own colour, worst-scoring cases first where the
evaluation gave per-case scores. A 3-D image is drawn at one slice: the one with most foreground of the
segmentations, else most heat, else most annotation points, else the middle one. Each output socket whose kind has
no picture (String, Float, a file, an image that is not an overlay) is named once, in one line.

    order = worst_first({"case-1.mha": 0.82, "case-3.mha": 0.41})  # per-case Dice: ["case-3.mha", "case-1.mha"]
    items = kind_figures(jobs, interface.inputs, interface.outputs, order)  # CaseFigure and NoPicture items
    review = kind_review(jobs, interface.inputs, interface.outputs, order, captions)  # a Review for the page
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..contract import case_key
from ..errors import InputError
from ..imaging import read_image
from ..jobs import JobResult, SocketValue
from ..sockets import Socket
from .figures import TITLE_POINTS, Pngs, _pngs, _windowed
from .geometry import Geometry
from .preflight import MAX_FIGURES, CaseFigure, Review, uploaded_case_id

log = logging.getLogger("medchallenge.review")

OVERLAY_KINDS = ("Segmentation", "Heat Map")
# the element lists of the `Multiple ...` kinds: kind -> (its key, the kind of one element)
COLLECTIONS = {"Multiple points": ("points", "Point"), "Multiple 2D bounding boxes": ("boxes", "2D bounding box"),
               "Multiple polygons": ("polygons", "Polygon"), "Multiple lines": ("lines", "Line"),
               "Multiple distance measurements": ("lines", "Distance measurement"),
               "Multiple angles": ("angles", "Angle"), "Multiple ellipses": ("ellipses", "Ellipse"),
               "Multiple three-point angles": ("angles", "Three-point angle")}
ELEMENT_KINDS = ("Point", "2D bounding box", "Polygon", "Line", "Distance measurement", "Angle", "Ellipse",
                 "Three-point angle")
ANNOTATION_KINDS = (*ELEMENT_KINDS, *COLLECTIONS)
DRAWN_KINDS = (*OVERLAY_KINDS, *ANNOTATION_KINDS)
COLOURS = ("tab:red", "tab:orange", "tab:cyan", "tab:purple", "tab:pink", "tab:olive", "tab:blue", "tab:brown")
MAX_SHAPES = 200  # annotation elements drawn per socket and case, the most probable first
ELLIPSE_POINTS = 64
FIGURE_WIDTH = 4.4  # inches
TITLE_ROW = 0.17  # inches per line of the title band above the image: the title beside the first socket's name


class CaseJobLike(Protocol):
    """A pre-flight's job of one case (grand_challenge.emulator.CaseJob): the uploaded case file and its job."""

    case: Path
    result: JobResult


@dataclass(frozen=True)
class NoPicture:
    """What kind_figures could not draw: an output socket's kind that has no picture (`case` None), or one case
    (`socket` None) whose image could not be drawn; `reason` says why, in the project's words."""

    reason: str
    socket: Socket | None = None
    case: str | None = None

    def line(self) -> str:
        if self.socket is not None:
            return f"{self.socket.slug}: no picture for kind {self.socket.kind}" + (
                f" ({self.reason})" if self.reason else "")
        return f"{self.case}: not drawn ({self.reason})"


@dataclass(frozen=True)
class Shape:
    """One annotation element in world millimetres: a polyline (closed for boxes, polygons and ellipses) or, with
    one vertex, a marker."""

    vertices: np.ndarray  # (n, 3)
    closed: bool
    probability: float


def _ellipse(major: Sequence[Sequence[float]], minor: Sequence[Sequence[float]]) -> np.ndarray:
    """The ellipse through the ends of its two axes, as ELLIPSE_POINTS vertices."""
    major_ends, minor_ends = np.asarray(major, float), np.asarray(minor, float)
    centre = major_ends.mean(axis=0)
    a, b = (major_ends[1] - major_ends[0]) / 2, (minor_ends[1] - minor_ends[0]) / 2
    t = np.linspace(0, 2 * np.pi, ELLIPSE_POINTS, endpoint=False)[:, None]
    return centre + np.cos(t) * a + np.sin(t) * b


def element_shapes(kind: str, element: Mapping[str, Any]) -> list[Shape]:
    """The shapes of one annotation element of `kind` (one of ELEMENT_KINDS), its value valid for its kind."""
    probability = float(element.get("probability", 1.0))

    def shape(vertices: Iterable[Sequence[float]], closed: bool = False) -> Shape:
        return Shape(np.asarray(list(vertices), float).reshape(-1, 3), closed, probability)

    if kind == "Point":
        return [shape([element["point"]])]
    if kind == "2D bounding box":
        return [shape(element["corners"], closed=True)]
    if kind == "Polygon":
        return [shape(element["path_points"], closed=True)] if element["path_points"] else []
    if kind == "Line":
        return [shape(points) for points in element["path_point_lists"] if points]
    if kind == "Distance measurement":
        return [shape([element["start"], element["end"]])]
    if kind == "Angle":
        return [shape(line) for line in element["lines"]]
    if kind == "Ellipse":
        return [Shape(_ellipse(element["major_axis"], element["minor_axis"]), True, probability)]
    return [shape(element["angle"])]  # Three-point angle: arm, vertex, arm


def value_shapes(kind: str, value: Mapping[str, Any]) -> list[Shape]:
    """Every shape of an annotation value of `kind` (one of ANNOTATION_KINDS), the most probable MAX_SHAPES."""
    if kind in COLLECTIONS:
        key, element_kind = COLLECTIONS[kind]
        shapes = [s for element in value[key] for s in element_shapes(element_kind, element)]
    else:
        shapes = element_shapes(kind, value)
    return sorted(shapes, key=lambda s: -s.probability)[:MAX_SHAPES]


@dataclass
class Layer:
    """One output socket's prediction on a case, in the input image's voxels: a label or heat volume on its grid
    (array z, y, x or y, x), or shapes as continuous voxel indices (i, j[, k])."""

    socket: Socket
    colour: str
    volume: np.ndarray | None = None
    shapes: list[tuple[np.ndarray, bool, float]] | None = None


def _annotation_value(value: SocketValue) -> Any:
    """The parsed value of a job's annotation output (a File socket's bytes, checked when the output was read)."""
    import json

    return value.value if value.content is None else json.loads(value.content)


def _layers(result: JobResult, outputs: Sequence[tuple[Socket, str]], image: Any, geometry: Geometry) -> list[Layer]:
    """Each drawn output of a job on the input image's grid."""
    import SimpleITK as sitk

    values = {value.socket.slug: value for value in result.output_values}
    layers = []
    for socket, colour in outputs:
        if socket.slug not in values:  # not among the job's outputs: nothing of it to draw
            continue
        if socket.kind in OVERLAY_KINDS:
            overlay = read_image(values[socket.slug].image_file, socket.slug, allow_non_finite=True)
            if overlay.GetDimension() != image.GetDimension() or overlay.GetNumberOfComponentsPerPixel() != 1:
                raise InputError(f"{socket.slug} is a {overlay.GetDimension()}-D image of "
                                 f"{overlay.GetNumberOfComponentsPerPixel()} component(s) over a "
                                 f"{image.GetDimension()}-D input")
            labels = socket.kind == "Segmentation"  # 8-bit labels (jobs.kinds), kept so; heat as float32
            on_grid = sitk.Resample(overlay, image, sitk.Transform(),
                                    sitk.sitkNearestNeighbor if labels else sitk.sitkLinear, 0.0,
                                    overlay.GetPixelID() if labels else sitk.sitkFloat32)
            layers.append(Layer(socket, colour, volume=np.nan_to_num(sitk.GetArrayFromImage(on_grid))))
        else:
            dims = len(geometry.size)
            placed = []
            for shape in value_shapes(socket.kind, _annotation_value(values[socket.slug])):
                index = geometry.world_to_index(shape.vertices[:, :dims])  # a 2-D image: z is the plane's
                if np.isfinite(index).all():
                    placed.append((index, shape.closed, shape.probability))
            layers.append(Layer(socket, colour, shapes=placed))
    return layers


def chosen_slice(layers: Sequence[Layer], depth: int) -> int:
    """The slice of a 3-D image to draw: most segmentation foreground, else most heat, else most annotation
    vertices, else the middle one."""
    for kind in OVERLAY_KINDS:
        totals = sum((np.abs(layer.volume) if kind == "Heat Map" else layer.volume != 0).sum(axis=(1, 2))
                     for layer in layers if layer.socket.kind == kind)
        if isinstance(totals, np.ndarray) and totals.max() > 0:
            return int(totals.argmax())
    counts = np.zeros(depth)
    for layer in layers:
        for index, _, _ in layer.shapes or ():
            np.add.at(counts, np.clip(np.rint(index[:, 2]).astype(int), 0, depth - 1), 1)
    return int(counts.argmax()) if counts.max() > 0 else depth // 2


def _background(image: Any) -> tuple[np.ndarray, bool]:
    """The input image's pixels for drawing, and whether they are RGB(A)."""
    import SimpleITK as sitk

    array = sitk.GetArrayFromImage(image)
    if image.GetNumberOfComponentsPerPixel() in (3, 4) and image.GetDimension() == 2:
        top = 255.0 if array.dtype == np.uint8 else max(float(array.max()), 1.0)  # 8-bit colour as it is
        return np.clip(array[..., :3].astype(np.float32) / top, 0, 1), True
    if image.GetNumberOfComponentsPerPixel() > 1:
        array = array.mean(axis=-1)
    return array, False


def case_png(image: Any, layers: Sequence[Layer], title: str) -> tuple[Pngs, str]:
    """The figure of one case: the input image (the chosen slice of a 3-D one) with every layer over it, the title
    and each socket's name in its colour above; and where the slice is, for the caption."""
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Polygon

    from ..plots import _figure

    pixels, rgb = _background(image)
    where = "2-D image"
    if image.GetDimension() == 3:
        k = chosen_slice(layers, pixels.shape[0])
        pixels, where = pixels[k], f"slice {k + 1} of {pixels.shape[0]}"
    else:
        k = None
    height, width = pixels.shape[:2]
    spacing = image.GetSpacing()
    aspect = spacing[1] / spacing[0] if spacing[0] > 0 else 1.0
    band = 0.05 + TITLE_ROW * max(1, len(layers))
    figure = _figure(FIGURE_WIDTH, FIGURE_WIDTH * height * aspect / max(width, 1) + band)
    ax = figure.add_axes((0.01, 0.01, 0.98, 0.98 - band / figure.get_figheight()))
    ax.imshow(pixels if rgb else _windowed(pixels), cmap=None if rgb else "gray", interpolation="antialiased",
              aspect=aspect)
    for layer in layers:
        if layer.volume is not None:
            plane = layer.volume[k] if k is not None else layer.volume
            if layer.socket.kind == "Segmentation":
                fill = np.zeros((*plane.shape, 4))
                fill[plane != 0] = to_rgba(layer.colour, 0.3)
                ax.imshow(fill, interpolation="nearest", aspect=aspect)
                for label in np.unique(plane[plane != 0])[:64]:
                    ax.contour(plane == label, levels=[0.5], colors=[layer.colour], linewidths=0.9)
            elif np.abs(plane).max() > 0:
                heat = np.abs(plane) / np.abs(plane).max()
                colours = np.zeros((*plane.shape, 4))
                colours[..., :3] = to_rgba(layer.colour)[:3]
                colours[..., 3] = 0.6 * heat
                ax.imshow(colours, interpolation="bilinear", aspect=aspect)
        for index, closed, probability in layer.shapes or ():
            if k is not None:  # a 3-D image: the shapes with a vertex on this slice
                if not (np.abs(index[:, 2] - k) <= 0.5).any():
                    continue
            if len(index) == 1:
                ax.plot(index[:, 0], index[:, 1], marker="x", linestyle="", color=layer.colour,
                        markersize=5 + 7 * float(np.clip(probability, 0, 1)))
            else:
                ax.add_patch(Polygon(index[:, :2], closed=closed, fill=False, edgecolor=layer.colour, linewidth=1.2))
    ax.set_xlim(-0.5, width - 0.5)
    ax.set_ylim(height - 0.5, -0.5)
    ax.set_xticks([])
    ax.set_yticks([])
    figure.text(0.01, 0.99, title, va="top", fontsize=TITLE_POINTS, parse_math=False)
    for row, layer in enumerate(layers):
        figure.text(0.99, 0.99 - row * TITLE_ROW / figure.get_figheight(), layer.socket.slug, va="top",
                    ha="right", fontsize=TITLE_POINTS, color=layer.colour, parse_math=False)
    return _pngs(figure, width, 0.98 * FIGURE_WIDTH), where


def _keys(job: CaseJobLike) -> list[str]:
    """The names a per-case score may give a job by: its pk, its case file's name, the case id, the image name."""
    names = [job.result.pk, job.case.name, uploaded_case_id(job.case.name), case_key(job.case.name)]
    return names + [v.image_name for v in job.result.inputs if v.image_name]


def worst_first(case_scores: Mapping[str, float], higher_is_better: bool = True) -> list[str]:
    """The cases (keys a job is known by: its pk, case file name or case id) of per-case scores, worst first, for
    kind_figures' `order`; a score that is not a finite number is left out (its case is drawn after those)."""
    scored = [(name, float(score)) for name, score in case_scores.items()
              if isinstance(score, (int, float)) and not isinstance(score, bool) and np.isfinite(score)]
    return [name for name, _ in sorted(scored, key=lambda item: item[1], reverse=not higher_is_better)]


def ordered(jobs: Sequence[CaseJobLike], order: Sequence[str] | None) -> list[CaseJobLike]:
    """The succeeded jobs, those `order` names first in its order (worst first), then the others as they came."""
    succeeded = [job for job in jobs if job.result.succeeded]
    if not order:
        return succeeded
    rank = {name: position for position, name in reversed(list(enumerate(order)))}
    return sorted(succeeded, key=lambda job: min((rank[k] for k in _keys(job) if k in rank), default=len(rank)))


def kind_figures(jobs: Sequence[CaseJobLike], inputs: Sequence[Socket], outputs: Sequence[Socket],
                 order: Sequence[str] | None = None,
                 captions: Mapping[str, str] | None = None) -> list[CaseFigure | NoPicture]:
    """The figures of a pre-flight's jobs from their sockets' kinds: one NoPicture per output socket whose kind has
    none, then per succeeded job (those named in `order` first, worst first; at most MAX_FIGURES) the input image
    with the drawn outputs, its caption `captions[key]` for any of the job's keys (its pk, case file name, case id)
    with the slice shown, or a NoPicture saying why that case was not drawn."""
    image_input = next((socket for socket in inputs if socket.super_kind == "Image"), None)
    items: list[CaseFigure | NoPicture] = []
    drawn = []
    for socket in outputs:
        if socket.kind not in DRAWN_KINDS:
            items.append(NoPicture("", socket))
        elif image_input is None:
            items.append(NoPicture("no input image to draw it over", socket))
        else:
            drawn.append((socket, COLOURS[len(drawn) % len(COLOURS)]))
    if not drawn:
        return items
    captions = captions or {}
    for job in ordered(jobs, order)[:MAX_FIGURES]:
        stored = next((v.image_file for v in job.result.inputs
                       if v.socket.slug == image_input.slug and v.image_file is not None), None)
        if stored is None:
            items.append(NoPicture(f"its job has no image for {image_input.slug}", case=job.case.name))
            continue
        caption = next((captions[key] for key in _keys(job) if key in captions), "")
        try:
            image = read_image(stored, image_input.slug)
            if image.GetDimension() not in (2, 3):
                raise InputError(f"a {image.GetDimension()}-D image has no picture here")
            size = image.GetSize()
            geometry = Geometry(tuple(size), tuple(image.GetSpacing()), tuple(image.GetOrigin()),
                                tuple(image.GetDirection()))
            (png, full_png), where = case_png(image, _layers(job.result, drawn, image, geometry),
                                              f"{job.case.name}" + (f": {caption}" if caption else ""))
        except (InputError, RuntimeError, ValueError) as exc:  # one case not drawn; the others still are
            log.warning("%s: not drawn: %s", job.case.name, exc)
            items.append(NoPicture(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}",
                                   case=job.case.name))
            continue
        text = "; ".join(part for part in (caption, where) if part)
        items.append(CaseFigure(job.case.name, text, png, full_png))
    return items


def kind_review(jobs: Sequence[CaseJobLike], inputs: Sequence[Socket], outputs: Sequence[Socket],
                order: Sequence[str] | None = None, captions: Mapping[str, str] | None = None) -> Review:
    """kind_figures as a Review for the pre-flight's page (its figures, a note per NoPicture, its own heading)."""
    items = kind_figures(jobs, inputs, outputs, order, captions)
    worst = "worst-scoring cases first; " if order else ""
    return Review(figures=[item for item in items if isinstance(item, CaseFigure)],
                  notes=[item.line() for item in items if isinstance(item, NoPicture)],
                  heading=f"What the algorithm did ({worst}each output socket in its colour, as named on the figure)")

