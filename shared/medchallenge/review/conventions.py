"""The convention check: a participant's most common silent mistake is a coordinate convention (x and y swapped, a
flipped axis, millimetres or world coordinates for voxels, 1-based indices, sizes for corners, points left in the
frame of the network's input), for TB boxes, object-CXR points and RibFrac masks. Each transform below undoes one such
mistake on the evaluator's parsed predictions; where the challenge's ranking metric is far better afterwards (at least
`MIN_GAIN` higher and at least twice as high), the check names the transform in one line with the metric before and
after. Scale is tried where nothing else fits: from each common network input size that could hold the predictions
(`POINT_SIDES`, `CT_SIDES`) to each image's size, and by the factor that takes the predictions onto the ground truth
best; the best-scoring scale is named. RibFrac masks are volumes on the image's own grid (a mask of another size or
spacing fails the evaluator's shape check): their axes are checked.

The predictions are rescored by the challenge's own evaluator stages (`evaluate_case`, `aggregate`) on the changed
`Cases`, so the figure is the one the evaluator would give to predictions written the other way.
"""

from __future__ import annotations

import dataclasses
import itertools
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..contract import case_key
from ..errors import InputError
from .geometry import Geometry

MIN_GAIN = 0.2  # the metric must rise by this much, and at least double, for a transform to be named
# An evaluator whose cases are costly (RibFrac: masks read, changed, written and matched again per transform) is
# checked on its first cases only, the metric before recomputed on them: a convention mistake shows in any few.
MAX_CHECKED_COSTLY_CASES = 8

Box = tuple[int, ...]
Transform = Callable[[Any, Mapping[str, Geometry], Path], Any]  # (cases, geometry, scratch folder)


@dataclass(frozen=True)
class Finding:
    """A transform under which the predictions score far better."""

    description: str  # "x and y are swapped"
    what: str  # "boxes", "points"
    metric: str
    before: float
    after: float
    scope: str = ""  # "the first 8 of 160 cases" where the check saw only those

    def line(self) -> str:
        return (f"your {self.what} match the ground truth if {self.description}: {self.metric} "
                f"{self.before:.3f} -> {self.after:.3f}" + (f" ({self.scope})" if self.scope else ""))


def _boxes_changed(change: Callable[[Box, Geometry], Box]) -> Transform:
    """TB caverns: every predicted box of a case whose image geometry is known (keyed by medchallenge.contract's
    case_key of the case id), changed by `change`."""

    def transform(cases: Any, geometry: Mapping[str, Geometry], scratch: Path) -> Any:
        boxes = cases.sources
        predictions = {}
        for case_id, case_boxes in boxes.predictions.items():
            image = geometry.get(case_key(case_id))
            predictions[case_id] = [change(tuple(box), image) for box in case_boxes] if image else list(case_boxes)
        return dataclasses.replace(cases, sources=dataclasses.replace(boxes, predictions=predictions))

    return transform


def _flipped(box: Box, axis: int, size: int) -> Box:
    low, high = size - box[axis + 3], size - box[axis]
    changed = list(box)
    changed[axis], changed[axis + 3] = low, high
    return tuple(changed)


def _swapped(box: Box, a: int, b: int) -> Box:
    changed = list(box)
    for offset in (0, 3):
        changed[a + offset], changed[b + offset] = box[b + offset], box[a + offset]
    return tuple(changed)


def _boxes_world_to_index(box: Box, g: Geometry, ras: bool = False) -> Box:
    """A box whose corners are world millimetres (ITK's LPS, or RAS as nibabel writes them) as voxel indices."""
    corners = np.array([box[:3], box[3:]], dtype=np.float64) * (np.array([-1.0, -1.0, 1.0]) if ras else 1.0)
    index = np.rint(g.world_to_index(corners)).astype(int)
    return (*index.min(axis=0).tolist(), *index.max(axis=0).tolist())


# (x1, y1, z1, x2, y2, z2) voxel indices, as the run file and the GC socket hold them
BOX_TRANSFORMS: dict[str, Transform] = {
    "x and y are swapped": _boxes_changed(lambda box, g: _swapped(box, 0, 1)),
    "x and z are swapped": _boxes_changed(lambda box, g: _swapped(box, 0, 2)),
    "x is flipped": _boxes_changed(lambda box, g: _flipped(box, 0, g.size[0])),
    "y is flipped": _boxes_changed(lambda box, g: _flipped(box, 1, g.size[1])),
    "z is flipped": _boxes_changed(lambda box, g: _flipped(box, 2, g.size[2])),
    "they are read as millimetres, not voxel indices": _boxes_changed(
        lambda box, g: tuple(int(round(v / s)) for v, s in zip(box, (*g.spacing, *g.spacing)))),
    "they are world coordinates (the image's origin, spacing and direction), not voxel indices": _boxes_changed(
        _boxes_world_to_index),
    "they are world coordinates in RAS (nibabel's: x and y negated), not voxel indices": _boxes_changed(
        lambda box, g: _boxes_world_to_index(box, g, ras=True)),
    "they count voxels from 1, not 0": _boxes_changed(lambda box, g: tuple(v - 1 for v in box)),
    "the last three numbers are read as width, height and depth, not corners": _boxes_changed(
        lambda box, g: (*box[:3], box[0] + box[3], box[1] + box[4], box[2] + box[5])),
}
# common sizes of a network's input: a CT's side (voxels) and a radiograph's (pixels)
CT_SIDES = (32, 48, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512)
POINT_SIDES = (128, 224, 256, 299, 320, 384, 416, 448, 512, 608, 640, 768, 800, 896, 1024, 1280, 1333, 1536, 2048)
FIT_TOLERANCE = 0.05  # a best-fitting factor this close to 1 is no scale mistake
MAX_FRAMES = 24  # network frames tried at most (the smallest first)


def _frame_sides(largest: float, image_side: int, sides: Sequence[int]) -> list[int]:
    """The common network sizes that could be the frame of coordinates up to `largest` on an image side of at most
    `image_side`: at least `largest`, less than the image's side."""
    return [side for side in sides if largest <= side < image_side]


def _fitted_factor(pairs: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> float | None:
    """The one factor that puts the most predicted centres inside ground-truth extents: `pairs` of (a predicted
    centre, an object's lowest corner, its highest corner), any number of axes; each pair holds for the factors
    within an interval, and the factor is the middle of where most intervals meet. None where no pair holds for
    any factor, or where the factor is within FIT_TOLERANCE of 1 (no scale mistake)."""
    events = []
    for centre, low, high in pairs:
        if np.all(centre > 0):
            start, stop = float(np.max(low / centre)), float(np.min(high / centre))
            if 0 < start <= stop:
                events += [(start, 1), (stop, -1)]
    ordered = sorted(events, key=lambda e: (e[0], -e[1]))  # at one value, intervals open before others close
    best, count, factor = 0, 0, None
    for index, (value, step) in enumerate(ordered):
        count += step
        if step > 0 and count > best:  # the next event closes or opens one: the middle of the two
            best, factor = count, (value + ordered[index + 1][0]) / 2
    return factor if factor is not None and abs(factor - 1) > FIT_TOLERANCE else None


def _fitted_scale(factor: float) -> str:
    return f"they are scaled by {1 / factor:.3g} (multiplied by {factor:.3g}, the factor that fits best)"


def _box_centres(boxes: Sequence[Box]) -> np.ndarray:
    corners = np.array(boxes, dtype=np.float64).reshape(-1, 6)
    return (corners[:, :3] + corners[:, 3:]) / 2


def _box_scales(cases: Any, geometry: Mapping[str, Geometry]) -> list[tuple[str, Transform]]:
    """TB boxes scaled: from each common network frame that could hold them (one side in x and y, one in z) to each
    image's size, and by the one factor that fits best."""
    boxes = cases.sources
    predicted = [np.array(b, dtype=np.float64) for b in boxes.predictions.values() if b]
    if not predicted:
        return []
    largest = np.concatenate(predicted).reshape(-1, 2, 3).max(axis=(0, 1))
    image = np.array([g.size for g in geometry.values()] or [(0, 0, 0)]).max(axis=0)
    in_plane = _frame_sides(max(largest[:2]), max(image[:2]), CT_SIDES)  # a network's x and y sides are one
    scales: list[tuple[str, Transform]] = []
    for side, depth in itertools.islice(itertools.product(in_plane, _frame_sides(largest[2], image[2], CT_SIDES)),
                                        MAX_FRAMES):
        sides = (side, side, depth)
        frame = (*sides, *sides)
        scales.append((f"they are in a {'x'.join(map(str, sides))} frame (a network's input size), not the image's "
                       "voxels", _boxes_changed(lambda box, g, frame=frame: tuple(
                           int(round(v * s / f)) for v, s, f in zip(box, (*g.size, *g.size), frame)))))
    pairs = [(centre, np.array(truth[:3], dtype=np.float64), np.array(truth[3:], dtype=np.float64))
             for case_id, case_boxes in boxes.predictions.items() for centre in _box_centres(case_boxes)
             for truth in boxes.ground_truth.get(case_id, [])]
    factor = _fitted_factor(pairs)
    if factor is not None:
        scales.append((_fitted_scale(factor), _boxes_changed(lambda box, g: tuple(int(round(v * factor))
                                                                                  for v in box))))
    return scales


def _points_changed(change: Callable[[np.ndarray, np.ndarray, Geometry], tuple[np.ndarray, np.ndarray]]) -> Transform:
    """object-CXR: every point of an image whose geometry is known, changed by `change`; the hit tests redone."""

    def transform(cases: Any, geometry: Mapping[str, Geometry], scratch: Path) -> Any:
        submission = cases.submission
        x, y = submission.x.copy(), submission.y.copy()
        for index, path in enumerate(cases.gt.image_paths):
            image = geometry.get(case_key(path))
            chosen = submission.point_image == index
            if image is not None and chosen.any():
                x[chosen], y[chosen] = change(submission.x[chosen], submission.y[chosen], image)
        return cases.with_points(x, y)  # evaluators/object_cxr.py's PointCases

    return transform


# x, y in pixels of the radiograph, as localization.csv and the GC points hold them
POINT_TRANSFORMS: dict[str, Transform] = {
    "x and y are swapped": _points_changed(lambda x, y, g: (y, x)),
    "x is flipped": _points_changed(lambda x, y, g: (g.size[0] - x, y)),
    "y is flipped": _points_changed(lambda x, y, g: (x, g.size[1] - y)),
    "they are read as fractions of the image size, not pixels": _points_changed(
        lambda x, y, g: (x * g.size[0], y * g.size[1])),
    "they are read as millimetres, not pixels": _points_changed(lambda x, y, g: (x / g.spacing[0], y / g.spacing[1])),
    "they count pixels from 1, not 0": _points_changed(lambda x, y, g: (x - 1, y - 1)),
}


def _object_extents(gt: Any, index: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The extents (lowest x, y; highest x, y) of an image's ground-truth objects: a box's or ellipse's corners, a
    polygon's vertices' bounds."""
    extents = []
    for k in np.flatnonzero(gt.object_image == index):
        if np.isnan(gt.boxes[k]).any():
            start, stop = gt.vertex_start[k], gt.vertex_start[k + 1]
            vertices = np.column_stack([gt.vertices_x[start:stop], gt.vertices_y[start:stop]]).astype(np.float64)
            extents.append((vertices.min(axis=0), vertices.max(axis=0)))
        else:
            extents.append((np.array(gt.boxes[k][:2], dtype=np.float64), np.array(gt.boxes[k][2:], dtype=np.float64)))
    return extents


def _point_scales(cases: Any, geometry: Mapping[str, Geometry]) -> list[tuple[str, Transform]]:
    """object-CXR points scaled: from each common network frame that could hold them to each image's size, and by
    the factor that fits best (each image's most probable points against its objects' extents)."""
    submission, gt = cases.submission, cases.gt
    if not len(submission.x):
        return []
    scales: list[tuple[str, Transform]] = []
    largest = float(max(submission.x.max(), submission.y.max()))
    for side in _frame_sides(largest, max((max(g.size) for g in geometry.values()), default=0), POINT_SIDES):
        scales.append((f"they are in a {side}-pixel frame (a network's input size), not the image's pixels",
                       _points_changed(lambda x, y, g, side=side: (x * g.size[0] / side, y * g.size[1] / side))))
    pairs = []
    for index in range(len(gt.image_paths)):
        chosen = np.flatnonzero(submission.point_image == index)
        extents = _object_extents(gt, index)
        # as many of its most probable points as it has objects, each against each object
        for k in chosen[np.argsort(-submission.probability[chosen], kind="stable")[:len(extents)]]:
            point = np.array([submission.x[k], submission.y[k]], dtype=np.float64)
            pairs += [(point, low, high) for low, high in extents]
    factor = _fitted_factor(pairs)
    if factor is not None:
        scales.append((_fitted_scale(factor), _points_changed(lambda x, y, g: (x * factor, y * factor))))
    return scales


def _masks_changed(change: Callable[[np.ndarray], np.ndarray]) -> Transform:
    """RibFrac: every predicted instance mask (array z, y, x) changed by `change`, written under the scratch folder
    (the evaluator reads masks from files); a mask whose shape `change` alters fails the shape check, as it would."""

    def transform(cases: Any, geometry: Mapping[str, Geometry], scratch: Path) -> Any:
        import SimpleITK as sitk

        folder = Path(tempfile.mkdtemp(dir=scratch))
        sources = {}
        for case_id in cases.ids:
            source = cases.sources[case_id]
            if source.pred_volume is None:
                sources[case_id] = source
                continue
            original = sitk.ReadImage(str(source.pred_volume))
            changed = sitk.GetImageFromArray(np.ascontiguousarray(change(sitk.GetArrayViewFromImage(original))))
            if changed.GetSize() == original.GetSize():
                changed.CopyInformation(original)
            target = folder / f"{len(sources):05d}.nii.gz"
            sitk.WriteImage(changed, str(target))
            sources[case_id] = dataclasses.replace(source, pred_volume=target)
        return dataclasses.replace(cases, sources=sources)

    return transform


# instance masks as NIfTI volumes (array z, y, x here)
MASK_TRANSFORMS: dict[str, Transform] = {
    "x and y are swapped": _masks_changed(lambda a: np.swapaxes(a, 1, 2)),
    "x is flipped": _masks_changed(lambda a: a[:, :, ::-1]),
    "y is flipped": _masks_changed(lambda a: a[:, ::-1, :]),
    "z is flipped": _masks_changed(lambda a: a[::-1]),
}

Scales = Callable[[Any, Mapping[str, Geometry]], list[tuple[str, Transform]]]  # alternatives: the best is named
SCALE_TRIED = "a scale (a common network input size to the image's, or the factor that fits best)"

# per challenge: the metric compared, what the predictions are, the transforms tried, and the scales tried
CHECKS: dict[str, tuple[str, str, dict[str, Transform], Scales | None]] = {
    "tb-caverns": ("map", "boxes", BOX_TRANSFORMS, _box_scales),
    "object-cxr": ("froc", "points", POINT_TRANSFORMS, _point_scales),
    "ribfrac": ("froc_average", "masks", MASK_TRANSFORMS, None),
}


def needs_image_sizes(challenge: str) -> bool:
    """Whether the check's transforms need each case's image size (boxes and points; masks carry their own)."""
    return challenge in CHECKS and CHECKS[challenge][3] is not None


def rescore(evaluator: Any, cases: Any, metric: str) -> float:
    """`metric` of `cases` through the evaluator's two stages."""
    records = {case_id: evaluator.evaluate_case(cases.sources, case_id) for case_id in cases.ids}
    return float(evaluator.aggregate(cases, records).aggregates[metric])


def check_conventions(challenge: str, evaluator: Any, cases: Any, geometry: Mapping[str, Geometry],
                      aggregates: Mapping[str, float]) -> list[Finding]:
    """The transforms under which the predictions score far better, the best first (none for a challenge without
    coordinates)."""
    if challenge not in CHECKS:
        return []
    metric, what, transforms, scales = CHECKS[challenge]
    before, scope = float(aggregates[metric]), ""
    if not evaluator.cheap_cases and len(cases.ids) > MAX_CHECKED_COSTLY_CASES:
        scope = f"the first {MAX_CHECKED_COSTLY_CASES} of {len(cases.ids)} cases"
        cases = dataclasses.replace(cases, ids=cases.ids[:MAX_CHECKED_COSTLY_CASES])
        before = rescore(evaluator, cases, metric)
    with tempfile.TemporaryDirectory(prefix="medchallenge-review-") as scratch:

        def fitting(description: str, transform: Transform) -> Finding | None:
            try:
                after = rescore(evaluator, transform(cases, geometry, Path(scratch)), metric)
            except InputError:
                return None  # the transform made the predictions unreadable (e.g. a mask of another shape)
            return Finding(description, what, metric, before, after, scope) \
                if after >= before + MIN_GAIN and after >= 2 * before else None

        findings = [f for f in (fitting(d, t) for d, t in transforms.items()) if f]
        if scales and not findings:  # where no simpler transform explains them: the scale that fits best
            fitted = [f for f in (fitting(d, t) for d, t in scales(cases, geometry)) if f]
            findings = sorted(fitted, key=lambda f: -f.after)[:1]
    return sorted(findings, key=lambda f: -f.after)


def checked_transforms(challenge: str) -> Sequence[str]:
    """What the check tries for `challenge` (for the report)."""
    if challenge not in CHECKS:
        return []
    _, _, transforms, scales = CHECKS[challenge]
    return [*transforms, *([SCALE_TRIED] if scales else [])]
