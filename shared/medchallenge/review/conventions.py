"""The convention check: a participant's most common silent mistake is a coordinate convention (x and y swapped, a
flipped axis, millimetres for voxels, sizes for corners), for TB boxes, object-CXR points and RibFrac masks. Each transform below undoes one such mistake on the
evaluator's parsed predictions; where the challenge's ranking metric is far better afterwards (at least
`MIN_GAIN` higher and at least twice as high), the check names the transform in one line.

The predictions are rescored by the challenge's own evaluator stages (`evaluate_case`, `aggregate`) on the changed
`Cases`, so the figure is the one the evaluator would give to predictions written the other way.
"""

from __future__ import annotations

import dataclasses
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


# (x1, y1, z1, x2, y2, z2) voxel indices, as the run file and the GC socket hold them
BOX_TRANSFORMS: dict[str, Transform] = {
    "x and y are swapped": _boxes_changed(lambda box, g: _swapped(box, 0, 1)),
    "x and z are swapped": _boxes_changed(lambda box, g: _swapped(box, 0, 2)),
    "x is flipped": _boxes_changed(lambda box, g: _flipped(box, 0, g.size[0])),
    "y is flipped": _boxes_changed(lambda box, g: _flipped(box, 1, g.size[1])),
    "z is flipped": _boxes_changed(lambda box, g: _flipped(box, 2, g.size[2])),
    "they are read as millimetres, not voxel indices": _boxes_changed(
        lambda box, g: tuple(int(round(v / s)) for v, s in zip(box, (*g.spacing, *g.spacing)))),
    "the last three numbers are read as width, height and depth, not corners": _boxes_changed(
        lambda box, g: (*box[:3], box[0] + box[3], box[1] + box[4], box[2] + box[5])),
}


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
}

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

# per challenge: the metric compared, what the predictions are, and the transforms tried
CHECKS: dict[str, tuple[str, str, dict[str, Transform]]] = {
    "tb-caverns": ("map", "boxes", BOX_TRANSFORMS),
    "object-cxr": ("froc", "points", POINT_TRANSFORMS),
    "ribfrac": ("froc_average", "masks", MASK_TRANSFORMS),
}


def needs_image_sizes(challenge: str) -> bool:
    """Whether the check's transforms need each case's image size (boxes and points; masks carry their own)."""
    return challenge in CHECKS and CHECKS[challenge][2] is not MASK_TRANSFORMS


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
    metric, what, transforms = CHECKS[challenge]
    before, scope = float(aggregates[metric]), ""
    if not evaluator.cheap_cases and len(cases.ids) > MAX_CHECKED_COSTLY_CASES:
        scope = f"the first {MAX_CHECKED_COSTLY_CASES} of {len(cases.ids)} cases"
        cases = dataclasses.replace(cases, ids=cases.ids[:MAX_CHECKED_COSTLY_CASES])
        before = rescore(evaluator, cases, metric)
    findings = []
    with tempfile.TemporaryDirectory(prefix="medchallenge-review-") as scratch:
        for description, transform in transforms.items():
            try:
                after = rescore(evaluator, transform(cases, geometry, Path(scratch)), metric)
            except InputError:
                continue  # the transform made the predictions unreadable (e.g. a mask of another shape)
            if after >= before + MIN_GAIN and after >= 2 * before:
                findings.append(Finding(description, what, metric, before, after, scope))
    return sorted(findings, key=lambda f: -f.after)


def checked_transforms(challenge: str) -> Sequence[str]:
    """What the check tries for `challenge` (for the report)."""
    return list(CHECKS[challenge][2]) if challenge in CHECKS else []
