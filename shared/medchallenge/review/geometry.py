"""The size and spacing of each case's image, from its header only (SimpleITK for CTs, Pillow for radiographs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Geometry:
    """An image's size in voxels or pixels (x, y[, z]) and its spacing in mm (1 where the file has none)."""

    size: tuple[int, ...]
    spacing: tuple[float, ...]


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
    return Geometry(tuple(int(v) for v in reader.GetSize()), tuple(float(v) for v in reader.GetSpacing()))
