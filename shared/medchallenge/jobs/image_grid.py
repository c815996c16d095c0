"""The geometry of the image a job was given (panimg's conversion of an upload, its .mha header), and
grand-challenge's world coordinates (mm of that image) as voxel positions in it: what pre-flight and the hospital
gateway check a job's points and boxes against (medchallenge.jobs.value_rules). The voxel index i = column, j = row,
k = slice is what the algorithm saw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError

IDENTITY = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
EDGE = 0.5  # voxels: a point within half a voxel of the image's bounds lies on its edge voxel
ROUNDING = 1e-6  # voxels of floating-point noise allowed at the bounds


@dataclass(frozen=True)
class ImageGrid:
    """An image's size (x, y[, z]) in voxels and its geometry: origin and spacing (x, y, z) in mm, direction
    (row-major 3x3, columns = the i, j, k axes), as SimpleITK has them; an image without one has the identity."""

    shape: tuple[int, ...]
    origin: tuple[float, float, float] = (0.0, 0.0, 0.0)
    spacing: tuple[float, float, float] = (1.0, 1.0, 1.0)
    direction: tuple[float, ...] = IDENTITY

    def continuous_index(self, world: tuple[float, float, float]) -> tuple[float, float, float]:
        """The continuous voxel index (i, j, k) of a world point (the inverse of SimpleITK's
        TransformContinuousIndexToPhysicalPoint)."""
        axes = np.asarray(self.direction, dtype=np.float64).reshape(3, 3) * np.asarray(self.spacing)
        i, j, k = np.linalg.solve(axes, np.asarray(world, dtype=np.float64) - np.asarray(self.origin))
        return float(i), float(j), float(k)


def read_image_grid(path: Path, shape: tuple[int, ...] | None = None) -> ImageGrid:
    """The grid of a converted image file (its header only, no pixels read), of size `shape` (default: the
    header's); a 2-D image gets a third axis of one voxel."""
    import SimpleITK as sitk

    reader = sitk.ImageFileReader()
    reader.SetFileName(str(path))
    reader.ReadImageInformation()
    dimension = reader.GetDimension()
    if dimension not in (2, 3):
        raise InputError(f"the input image {path.name} is {dimension}-D; expected a 2-D or 3-D one")
    origin, spacing, direction = reader.GetOrigin(), reader.GetSpacing(), reader.GetDirection()
    if dimension == 2:
        origin, spacing = (*origin, 0.0), (*spacing, 1.0)
        direction = (direction[0], direction[1], 0.0, direction[2], direction[3], 0.0, 0.0, 0.0, 1.0)
    axes = np.asarray(direction).reshape(3, 3) * np.asarray(spacing)
    if not (np.isfinite(axes).all() and np.isfinite(origin).all()) or abs(np.linalg.det(axes)) < 1e-9:
        raise InputError(f"the input image {path.name} has no usable geometry")
    size = tuple(shape) if shape is not None else tuple(int(v) for v in reader.GetSize())
    return ImageGrid(size, tuple(origin), tuple(spacing), tuple(direction))


def image_position(grid: ImageGrid, world: tuple[float, float, float],
                   volume: bool) -> tuple[int, float, float] | None:
    """Where a world point lies in the image: (slice index k, i, j) with (i, j) in voxels from the centre of the
    top-left voxel, the point moved onto the nearest slice (a 2-D image: its one plane, whatever z says); None when
    it lies more than half a voxel beyond the image's bounds."""
    i, j, k = grid.continuous_index(world)
    if not volume:
        k = 0.0
    sizes = (grid.shape[0], grid.shape[1], grid.shape[2] if volume else 1)
    if not all(-EDGE - ROUNDING <= v <= n - 1 + EDGE + ROUNDING for v, n in zip((i, j, k), sizes)):
        return None
    i, j = (min(max(v, -EDGE), n - 1 + EDGE) for v, n in zip((i, j), sizes))
    return min(max(math.floor(k + 0.5), 0), sizes[2] - 1), i, j
