"""Images as grand-challenge imports them: uploads (and image outputs) converted by panimg, as GC's
`import_images` calls its `convert()` (cases/tasks.py)."""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..sockets import Socket
from .errors import EmulationError
from .values import SocketValue

# The panimg release grand-challenge.org locks (uv.lock of comic/grand-challenge.org, with
# `panimg!=0.15.1,>=0.12.0` in its pyproject.toml); pinned in requirements/runtime.txt.
PANIMG_VERSION = "0.15.2"


@dataclass
class UploadedImage:
    """An image as GC stores it after converting an upload with panimg."""

    pk: str
    name: str
    file: Path
    image_type: str  # "MHD" | "TIFF"
    metadata: dict = field(default_factory=dict)  # panimg's PanImg fields (width, voxel_width_mm, color_space, ...)
    timepoints: int | None = None
    segments: frozenset[int] | None = None  # panimg's: the voxel values of a single-channel 8-bit image, else None

    @property
    def shape_without_color(self) -> tuple[int, ...]:
        """grand-challenge's Image.shape_without_color: `[(t), (z), y, x]`."""
        depth = self.metadata.get("depth")
        return (*(() if self.timepoints is None else (self.timepoints,)), *(() if depth is None else (depth,)),
                self.metadata["height"], self.metadata["width"])

    def value(self, pk: int, socket: Socket) -> SocketValue:
        """This image as the value of an image socket."""
        return SocketValue(pk, socket, image_pk=self.pk, image_name=self.name, image_file=self.file)


def _panimg():
    try:
        import panimg
        from panimg import image_builders
    except ImportError as exc:
        raise EmulationError(f"uploads are converted with panimg=={PANIMG_VERSION} as grand-challenge does; "
                             f"install requirements/runtime.txt ({exc})") from None
    logging.getLogger("panimg").setLevel(logging.WARNING)
    return panimg, image_builders


def preload_panimg() -> None:
    """Import panimg now (0.7 s of CPU here) rather than at the first conversion: a service converting each job's
    input (the gateway's job runner) at its start, so that its first study does not wait for it."""
    _panimg()


def convert(input_dir: Path, output_dir: Path, builders, what: str) -> list[UploadedImage]:
    """panimg `convert()` as GC's `import_images` calls it (no post-processors); errors become one line."""
    panimg, _ = _panimg()
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        result = panimg.convert(input_directory=input_dir, output_directory=output_dir, builders=builders,
                                post_processors=[], recurse_subdirectories=True)
    except Exception as exc:  # panimg lets pydantic/TypeErrors of odd images escape; GC reports them like this
        try:  # pydantic: the first error's message; others: the first line
            first = exc.errors()[0]["msg"]
        except Exception:
            first = (str(exc).strip().splitlines() or [""])[0]
        raise EmulationError(f"{what}: grand-challenge would report 'An unexpected error occurred' (panimg "
                             f"{type(exc).__name__}: {first})") from None
    files = {f.image_id: f for f in result.new_image_files if f.image_type.value in ("MHD", "TIFF")}
    images = []
    for image in sorted(result.new_images, key=lambda i: i.name):
        stored = files[image.pk]
        metadata = {k: getattr(image, k) for k in ("width", "height", "depth", "voxel_width_mm", "voxel_height_mm",
                                                   "voxel_depth_mm", "color_space")}
        metadata["color_space"] = metadata["color_space"].value
        images.append(UploadedImage(str(image.pk), image.name, Path(stored.file), stored.image_type.value, metadata,
                                    image.timepoints, image.segments))
    if not images:
        errors = "; ".join(f"{Path(p).name}: {' / '.join(e)}" for p, e in sorted(result.file_errors.items()))
        raise EmulationError(f"{what}: no image could be imported ({errors or 'no files'})")
    return images


def upload_case(case_file: Path, store: Path) -> UploadedImage:
    """Convert one uploaded file as GC's upload processing does; the converted file is kept under `store`."""
    with tempfile.TemporaryDirectory(prefix="upload-") as tmp:
        upload_dir = Path(tmp) / "upload"
        upload_dir.mkdir()
        shutil.copyfile(case_file, upload_dir / case_file.name)
        images = convert(upload_dir, Path(tmp) / "converted", None, f"upload {case_file.name}")
        if len(images) != 1:
            raise EmulationError(f"upload {case_file.name}: panimg made {len(images)} images of one file")
        image = images[0]
        kept = store / image.pk / image.file.name
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(image.file, kept)
        image.file = kept
    return image


def import_output_image(folder: Path, store: Path, socket: Socket) -> UploadedImage:
    """An image output socket's folder as GC imports it (MHA and TIFF builders only; exactly one image)."""
    _, builders = _panimg()
    images = convert(folder, store, [builders.image_builder_mhd, builders.image_builder_tiff],
                     f"No output images could be imported from '{socket.relative_path}'")
    if len(images) > 1:
        raise EmulationError(f"Only 1 image should be produced in '{socket.relative_path}', we found {len(images)}")
    return images[0]
