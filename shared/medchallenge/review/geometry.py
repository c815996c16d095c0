"""The size, spacing, origin and direction of each case's image, from its header only (SimpleITK for CTs, Pillow for
radiographs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Geometry:
    """An image's size in voxels or pixels (x, y[, z]), its spacing in mm (1 where the file has none), and where
    its voxels are in the world (ITK's LPS millimetres: a voxel index i is at origin + direction @ (spacing * i);
    direction row-major, the identity and origin 0 where the file has none)."""

    size: tuple[int, ...]
    spacing: tuple[float, ...]
    origin: tuple[float, ...] = ()
    direction: tuple[float, ...] = ()

    def world_to_index(self, points: np.ndarray) -> np.ndarray:
        """World points (n, dims) as continuous voxel indices."""
        dims = len(self.size)
        origin = np.asarray(self.origin or (0.0,) * dims)
        direction = np.asarray(self.direction or np.eye(dims).ravel()).reshape(dims, dims)
        return np.linalg.solve(direction * np.asarray(self.spacing), (points - origin).T).T


def read_geometry(path: Path) -> Geometry:
    """The header of `path`: a CT (NIfTI, MHA, ...) through SimpleITK, a JPEG or PNG through Pillow."""
    if path.suffix.lower() in (".jpg", ".jpeg", ".png"):
        from PIL import Image

        with Image.open(path) as image:
            return Geometry(tuple(image.size), (1.0, 1.0))
    import SimpleITK as sitk

    reader = sitk.ImageFileReader()
    reader.SetFileName(str(path))
    reader.ReadImageInformation()
    return Geometry(tuple(int(v) for v in reader.GetSize()), tuple(float(v) for v in reader.GetSpacing()),
                    tuple(float(v) for v in reader.GetOrigin()), tuple(float(v) for v in reader.GetDirection()))
