"""The image an image route's job was given (panimg's conversion of the series; its geometry: medchallenge.jobs.
image_grid) mapped back onto the images of the DICOM series.

The voxel index in the converted image, i = column, j = row, k = slice, is what the algorithm saw, so a point goes
through it onto the series: slice round(k) of the series in position order, at pixel (i, j). panimg stacks a series'
slices in InstanceNumber order (reversed when their positions decrease) and takes PixelSpacing as (x, y), which is
(row, column) spacing in DICOM: for non-square pixels its millimetres differ from the series' own, but its index does
not, once its slice order is known to be the position order (`check_slice_order`).
"""

from __future__ import annotations

import numpy as np

from ..dicom.series import DicomSeries
from ..errors import InputError
from ..jobs.image_grid import ImageGrid


def check_slice_order(series: DicomSeries, grid: ImageGrid, what: str) -> None:
    """The converted image's slice k is the series' slice k (in position order): the image has the series' slice
    count and the series' InstanceNumbers rise or fall strictly with position, as panimg's stacking by InstanceNumber
    needs. One InputError line otherwise."""
    depth = grid.shape[2] if len(grid.shape) > 2 else 1
    if depth != len(series.headers):
        raise InputError(f"{what}: the image the job was given has {depth} slices, the series {len(series.headers)}")
    try:
        steps = np.diff([int(header.get("InstanceNumber")) for header in series.headers])
    except (TypeError, ValueError):
        steps = None
    if steps is None or not ((steps > 0).all() or (steps < 0).all()):
        raise InputError(f"{what}: the series' InstanceNumbers do not follow its slice positions, so the image the "
                         "job was given (slices stacked by InstanceNumber) cannot be mapped back onto its slices")
