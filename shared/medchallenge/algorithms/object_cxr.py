"""object-CXR foreign objects on chest X-rays: radiograph -> image probability and points, with a heat-map detector.

Pipeline: decode the radiograph once, at reduced size where the format allows it (JPEG DCT scaling), as one grey
channel (RGB by luma, 16-bit kept at full depth, DICOM through its modality LUT with MONOCHROME1 inverted, JPEG EXIF
orientation applied so that the network sees the chest upright); resize to the network's input; scale by the image's
own percentiles; the network gives a foreign-object heat map (CenterNet-style, one channel at stride 4), optionally
averaged with the heat map of the left-right mirrored input. Points are the heat map's local maxima (refined to the
centroid of their 3 x 3 neighbourhood), the image probability is the mean of its highest cells. Every parameter comes
from the ONNX model's metadata.

`ALGORITHM` plugs it into the algorithm runner (`runner.py`, the container contract): grand-challenge one-case mode
(socket `chest-x-ray` -> `foreign-object-likelihood.json` and the "Multiple points" `foreign-objects.json`, points in
the world coordinates of the image grand-challenge hands over), or batch mode over every JPEG, PNG and DICOM file under
the input folder, or over the `image_path` column of an image list CSV there, writing the official
`classification.csv` and `localization.csv` (image names as given: paths relative to the input folder, or the CSV's
strings; points in pixels of the stored image, x = column, y = row, origin at the top left pixel's centre).
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..imaging import open_picture
from ..sockets import CHEST_X_RAY, FOREIGN_OBJECT_LIKELIHOOD, FOREIGN_OBJECTS, OBJECT_CXR_INTERFACE
from ..dicom.detectors import foreign_object_results
from .runner import Algorithm, Case, DicomContract

log = logging.getLogger("medchallenge.object_cxr")

MODEL_FILENAME = "object_cxr.onnx"
CLASSIFICATION_FILE = "classification.csv"
LOCALIZATION_FILE = "localization.csv"
RUN_FILE_HEADER = "image_path,prediction"
IMAGE_LIST_COLUMN = "image_path"
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".dcm")
# batch mode: every radiograph under the input folder, in any letter case
CASE_PATTERNS = tuple(f"**/*{s}" for suffix in IMAGE_SUFFIXES for s in {suffix, suffix.upper()})
SITK_SUFFIXES = (".mha", ".mhd", ".nii", ".nii.gz", ".nrrd", ".tif", ".tiff")  # what grand-challenge hands over


# EXIF orientation -> the stored pixel of a displayed (upright) pixel: (x, y, W, H) -> (xs, ys) for a stored W x H
EXIF_TO_STORED = {
    1: lambda x, y, w, h: (x, y),
    2: lambda x, y, w, h: (w - 1 - x, y),
    3: lambda x, y, w, h: (w - 1 - x, h - 1 - y),
    4: lambda x, y, w, h: (x, h - 1 - y),
    5: lambda x, y, w, h: (y, x),
    6: lambda x, y, w, h: (y, h - 1 - x),
    7: lambda x, y, w, h: (w - 1 - y, h - 1 - x),
    8: lambda x, y, w, h: (w - 1 - y, x),
}
EXIF_ORIENTATION_TAG = 0x0112


@dataclass
class Preprocessing:
    """How a radiograph becomes the network input (stored in the model's metadata)."""

    input_size: tuple[int, int] = (512, 512)  # rows, columns
    percentiles: tuple[float, float] = (1.0, 99.0)  # mapped to 0 and 1
    # how a larger decoded image is brought down to the input: "area" (the mean of the pixels each input pixel covers,
    # as a detector integrates: a radiograph stored at full size then looks like one acquired at the input size) or
    # "bilinear" (Pillow's antialiased bilinear filter, smoother: models whose metadata predates the choice)
    downscale: str = "area"

    @classmethod
    def from_dict(cls, values: dict) -> "Preprocessing":
        downscale = str(values.get("downscale", "bilinear"))
        if downscale not in ("area", "bilinear"):
            raise ValueError("downscale is neither 'area' nor 'bilinear'")
        return cls(input_size=tuple(int(v) for v in values["input_size"]),
                   percentiles=tuple(float(v) for v in values["percentiles"]), downscale=downscale)


@dataclass
class Postprocessing:
    """How the heat map becomes points (stored in the model's metadata)."""

    stride: int = 4  # input pixels per heat-map cell
    min_score: float = 0.005  # weaker local maxima are not reported
    max_points: int = 20
    # cells along the image's edges that are ignored (points and image probability): foreign objects are annotated
    # over the lung fields, never at the edge, where collimation borders and cut-off anatomy are
    border_cells: int = 4
    # test-time augmentation: the heat map is the mean of the image's and its left-right mirror's
    flip_average: bool = False
    # the image probability is the mean of the heat map's `image_top_cells` highest cells (1: its maximum)
    image_top_cells: int = 1
    # the model card's operating point: a point at or above it is called a foreign object, an image whose strongest
    # point reaches it positive; chosen on the validation cohorts (`training/tune_object_cxr.py`); for users and
    # PACS, not used by the metrics
    operating_threshold: float = 0.5

    @classmethod
    def from_dict(cls, values: dict) -> "Postprocessing":
        return cls(stride=int(values["stride"]), min_score=float(values["min_score"]),
                   max_points=int(values["max_points"]), border_cells=int(values.get("border_cells", 0)),
                   flip_average=bool(values.get("flip_average", False)),
                   image_top_cells=int(values.get("image_top_cells", 1)),
                   operating_threshold=float(values.get("operating_threshold", 0.5)))


@dataclass
class Radiograph:
    """A decoded radiograph: its grey values (upright, possibly reduced) and how their pixels map to the output's
    coordinates (stored pixels of the file, or grand-challenge world coordinates)."""

    pixels: np.ndarray  # float32 (rows, columns), maybe decoded at reduced size
    size: tuple[int, int]  # the upright full-resolution size (W, H)
    to_output: object  # (x, y) arrays in the upright full-resolution frame -> output coordinates (lists)


@dataclass
class ForeignObjectPrediction:
    """One image's prediction: its probability and its points (probability, x, y[, z]) in output coordinates."""

    probability: float
    points: list[tuple[float, ...]]


def _pixel_map(x: np.ndarray, y: np.ndarray) -> list[tuple[float, float]]:
    return list(zip(x.tolist(), y.tolist()))


def read_pil(path: Path, target: tuple[int, int]) -> Radiograph:
    """JPEG/PNG (any mode) with Pillow; JPEG decoded at reduced size (DCT scaling) when the target is smaller."""
    from PIL import Image, UnidentifiedImageError

    try:
        image = open_picture(path)
        orientation = int(image.getexif().get(EXIF_ORIENTATION_TAG, 1) or 1)
        stored_w, stored_h = image.size
        upright = (stored_h, stored_w) if orientation in (5, 6, 7, 8) else (stored_w, stored_h)
        if image.format == "JPEG":
            # DCT scaling by 1/2, 1/4 or 1/8 while staying at least the network's input size (the resize then only
            # reduces): a 2,000 px JPEG is decoded at 1,000 px, a 3,000 px one at 750 px
            w, h = target if orientation not in (5, 6, 7, 8) else target[::-1]
            image.draft("L" if image.mode in ("L", "RGB", "YCbCr", "CMYK") else image.mode, (w, h))
        image.load()
        if image.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
            pixels = np.asarray(image, dtype=np.float32)
        else:
            pixels = np.asarray(image.convert("L"), dtype=np.float32)
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise InputError(f"{path}: cannot read the chest X-ray ({exc})") from None
    if pixels.ndim != 2 or min(pixels.shape) < 2:
        raise InputError(f"{path}: cannot read the chest X-ray (shape {pixels.shape})")
    pixels = _orient(pixels, orientation)
    to_stored = EXIF_TO_STORED.get(orientation, EXIF_TO_STORED[1])

    def to_output(x: np.ndarray, y: np.ndarray) -> list[tuple[float, float]]:
        xs, ys = to_stored(x, y, stored_w, stored_h)
        return _pixel_map(np.asarray(xs, float), np.asarray(ys, float))

    return Radiograph(pixels, upright, to_output)


def _orient(pixels: np.ndarray, orientation: int) -> np.ndarray:
    """The stored array turned upright as EXIF `orientation` says (Pillow's exif_transpose)."""
    ops = {2: lambda a: a[:, ::-1], 3: lambda a: a[::-1, ::-1], 4: lambda a: a[::-1], 5: lambda a: a.T,
           6: lambda a: np.rot90(a, -1), 7: lambda a: a[::-1, ::-1].T, 8: lambda a: np.rot90(a, 1)}
    return np.ascontiguousarray(ops[orientation](pixels)) if orientation in ops else pixels


def read_dicom(path: Path) -> Radiograph:
    """A DICOM CR/DX radiograph: modality LUT applied, MONOCHROME1 inverted, colour by luma, first frame."""
    from pydicom.pixels import apply_modality_lut

    from ..dicom.files import read_pixels

    dataset, pixels = read_pixels(path)  # checked against its header and the image-size limit
    try:
        pixels = np.asarray(apply_modality_lut(pixels, dataset), dtype=np.float32)
    except Exception as exc:  # pydicom raises many types for broken LUTs
        raise InputError(f"{path}: cannot apply the modality LUT of the DICOM chest X-ray ({type(exc).__name__}: "
                         f"{exc})") from None
    photometric = str(dataset.get("PhotometricInterpretation", "MONOCHROME2"))
    frames = int(dataset.get("NumberOfFrames", 1) or 1)
    if frames > 1:
        pixels = pixels[0]
    if pixels.ndim == 3:  # colour (RGB after pydicom's conversion)
        pixels = pixels[..., :3] @ np.array([0.299, 0.587, 0.114], np.float32)
    if pixels.ndim != 2:
        raise InputError(f"{path}: expected a 2-D radiograph, got pixel data of shape {pixels.shape}")
    if photometric == "MONOCHROME1":
        pixels = pixels.max() + pixels.min() - pixels
    h, w = pixels.shape
    return Radiograph(pixels, (w, h), _pixel_map)


def read_sitk(path: Path) -> Radiograph:
    """What grand-challenge hands over (panimg's MHA): 2-D, or 3-D with one slice; points in world coordinates."""
    import SimpleITK as sitk

    from ..imaging import read_image

    image = read_image(path, "chest X-ray")
    pixels = sitk.GetArrayFromImage(image).astype(np.float32)
    components = image.GetNumberOfComponentsPerPixel()
    if components >= 3:
        pixels = pixels[..., :3] @ np.array([0.299, 0.587, 0.114], np.float32)
    elif components != 1:
        raise InputError(f"{path}: expected a grey or RGB chest X-ray, got {components} components per pixel")
    if image.GetDimension() == 3:
        if pixels.shape[0] != 1:
            raise InputError(f"{path}: expected one radiograph, got a volume of {pixels.shape[0]} slices")
        pixels = pixels[0]
    h, w = pixels.shape
    dimension = image.GetDimension()

    def to_world(x: np.ndarray, y: np.ndarray) -> list[tuple[float, ...]]:
        return [tuple(image.TransformContinuousIndexToPhysicalPoint((float(a), float(b), 0.0)[:dimension]))
                for a, b in zip(x, y)]

    return Radiograph(pixels, (w, h), to_world)


def read_radiograph(path: Path, target: tuple[int, int]) -> Radiograph:
    """Decode a chest X-ray once, as the format needs; an unreadable file is one InputError naming it."""
    name = path.name.lower()
    if name.endswith(SITK_SUFFIXES):
        return read_sitk(path)
    try:
        with open(path, "rb") as handle:
            header = handle.read(132)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the chest X-ray ({exc.strerror or exc})") from None
    if name.endswith(".dcm") or header[128:132] == b"DICM":
        return read_dicom(path)
    return read_pil(path, target)


def network_input(radiograph: Radiograph, pre: Preprocessing) -> np.ndarray:
    """(1, 1, rows, columns) float32: the radiograph resized to the input size (reduced by `pre.downscale` when it is
    at least as large in both directions, else bilinear), its percentiles mapped to 0 and 1."""
    from PIL import Image

    rows, columns = pre.input_size
    image = Image.fromarray(radiograph.pixels, mode="F")
    if pre.downscale == "area" and image.width >= columns and image.height >= rows:
        image = image.resize((columns, rows), Image.BOX)
    else:
        image = image.resize((columns, rows), Image.BILINEAR, reducing_gap=2.0)
    resized = np.asarray(image, dtype=np.float32)
    lo, hi = (float(v) for v in np.percentile(resized, pre.percentiles))
    scaled = (resized - np.float32(lo)) / np.float32(max(hi - lo, 1e-6))
    return np.clip(scaled, -0.5, 1.5, out=scaled)[None, None]


def heatmap_peaks(heat: np.ndarray, post: Postprocessing) -> list[tuple[float, float, float]]:
    """(score, column, row) of the heat map's local maxima (3 x 3) at or above `min_score`, best first, refined to the
    centroid of their 3 x 3 neighbourhood; at most `max_points`."""
    padded = np.pad(heat, 1, constant_values=-np.inf)
    h, w = heat.shape
    neighbours = np.stack([padded[dy:dy + h, dx:dx + w] for dy in range(3) for dx in range(3)])
    peaks = np.argwhere((heat >= neighbours.max(axis=0)) & (heat >= post.min_score))
    order = np.argsort(-heat[peaks[:, 0], peaks[:, 1]], kind="stable")[:post.max_points]
    result = []
    values = np.pad(heat, 1, constant_values=0)
    for r, c in peaks[order]:
        window = values[r:r + 3, c:c + 3]
        total = float(window.sum())
        dy = float((window.sum(axis=1) * [-1, 0, 1]).sum()) / total if total > 0 else 0.0
        dx = float((window.sum(axis=0) * [-1, 0, 1]).sum()) / total if total > 0 else 0.0
        result.append((float(heat[r, c]), c + dx, r + dy))
    return result


def prediction_from_heatmap(heat: np.ndarray, radiograph: Radiograph, pre: Preprocessing,
                            post: Postprocessing) -> ForeignObjectPrediction:
    """Points (the heat map's peaks, in the radiograph's output coordinates) and the image probability (the mean of
    its `image_top_cells` highest cells), the `border_cells` along the edges ignored."""
    b = post.border_cells
    if b:
        heat = heat.copy()
        heat[:b], heat[-b:], heat[:, :b], heat[:, -b:] = 0, 0, 0, 0
    rows, columns = pre.input_size
    w, h = radiograph.size
    # heat-map cell -> input pixel -> upright full-resolution pixel (pixel centres)
    peaks = heatmap_peaks(heat, post)
    s = post.stride
    x = np.array([((c + 0.5) * s) * w / columns - 0.5 for _, c, _ in peaks])
    y = np.array([((r + 0.5) * s) * h / rows - 0.5 for _, _, r in peaks])
    x, y = np.clip(x, 0, w - 1), np.clip(y, 0, h - 1)
    coordinates = radiograph.to_output(x, y) if peaks else []
    points = [(score, *xy) for (score, _, _), xy in zip(peaks, coordinates)]
    top = np.partition(heat.ravel(), -post.image_top_cells)[-post.image_top_cells:]
    return ForeignObjectPrediction(float(top.mean()), points)


class ForeignObjectDetector:
    """The ONNX heat-map network with its pre- and post-processing parameters."""

    def __init__(self, model_path: Path, device: str = "auto"):
        from ..onnx_session import create_session, processing_parameters

        # no busy-waiting threads: the network runs for milliseconds while the next image is decoded beside it
        self.session = create_session(model_path, device, spinning=False)
        self.pre, self.post = processing_parameters(self.session, model_path, Preprocessing, Postprocessing)
        self.input_name = self.session.get_inputs()[0].name
        self.provider = self.session.get_providers()[0]

    def heatmap(self, x: np.ndarray, flip_average: bool | None = None) -> np.ndarray:
        """The heat map of a network input (`network_input`), averaged with its mirror's if `flip_average` (by
        default the model's post-processing says)."""
        (heat,) = self.session.run(None, {self.input_name: x})
        if self.post.flip_average if flip_average is None else flip_average:
            (mirrored,) = self.session.run(None, {self.input_name: np.ascontiguousarray(x[..., ::-1])})
            return (heat[0, 0] + mirrored[0, 0, :, ::-1]) / 2
        return heat[0, 0]

    def detect(self, radiograph: Radiograph, x: np.ndarray | None = None) -> ForeignObjectPrediction:
        """The radiograph's prediction (`x`: its network input, if already made)."""
        heat = self.heatmap(network_input(radiograph, self.pre) if x is None else x)
        return prediction_from_heatmap(heat, radiograph, self.pre, self.post)

    def read(self, case: Case) -> tuple[Radiograph, np.ndarray]:
        """The case's radiograph, decoded, and its network input."""
        radiograph = read_radiograph(case.inputs[CHEST_X_RAY.slug], self.pre.input_size[::-1])
        return radiograph, network_input(radiograph, self.pre)

    def predict(self, case: Case) -> ForeignObjectPrediction:
        return self.detect(*self.read(case))

    def predict_all(self, cases: list[Case]) -> Iterator[ForeignObjectPrediction]:
        """Batch mode: the next radiograph is decoded in a second thread while the network runs on this one (Pillow,
        NumPy and ONNX Runtime release the GIL), so a run keeps two cores busy; results in case order (an unreadable
        image raises its InputError at its turn)."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1) as pool:
            ahead = pool.submit(self.read, cases[0]) if cases else None
            for index in range(len(cases)):
                data = ahead.result()
                if index + 1 < len(cases):
                    ahead = pool.submit(self.read, cases[index + 1])
                yield self.detect(*data)


def image_list_cases(input_dir: Path) -> list[tuple[str, Path]] | None:
    """The cases of an image list CSV in the input folder (`image_path` column, as the challenge's test CSV), each
    string resolved relative to the folder; None when there is no CSV. Two CSVs, a CSV without the column, an empty
    list or a missing image are errors naming the file."""
    lists = sorted(p for p in input_dir.glob("*.csv") if p.is_file())
    if not lists:
        return None
    if len(lists) > 1:
        raise InputError(f"{input_dir}: {len(lists)} CSV files ({', '.join(p.name for p in lists)}); expected at most "
                         "one image list")
    path = lists[0]
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            if IMAGE_LIST_COLUMN not in (reader.fieldnames or []):
                raise InputError(f"{path}: no '{IMAGE_LIST_COLUMN}' column (header: {reader.fieldnames})")
            names = [row[IMAGE_LIST_COLUMN] for row in reader]
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    if not names:
        raise InputError(f"{path}: the image list is empty")
    root = input_dir.resolve()
    cases = []
    for line, name in enumerate(names, start=2):
        image = (input_dir / name).resolve()
        if not name or not image.is_relative_to(root):
            raise InputError(f"{path}: line {line}: {name!r} is not a path inside {input_dir}")
        if not image.is_file():
            raise InputError(f"{path}: line {line}: image {name!r} not found under {input_dir}")
        cases.append((name, input_dir / name))
    return cases


def _format(value: float) -> str:
    return f"{value:.6f}".rstrip("0").rstrip(".") if value else "0"


def gc_outputs(prediction: ForeignObjectPrediction) -> dict[str, object]:
    """GC mode: the likelihood (a bare number) and the "Multiple points" object (points as [x, y, z])."""
    points = [{"name": f"foreign object {k}", "point": [*xy, 0.0][:3] if len(xy) == 2 else list(xy),
               "probability": round(p, 6)}
              for k, (p, *xy) in enumerate(prediction.points, start=1)]
    return {FOREIGN_OBJECT_LIKELIHOOD.slug: round(prediction.probability, 6),
            FOREIGN_OBJECTS.slug: {"name": "Foreign objects", "type": "Multiple points", "points": points,
                                   "version": {"major": 1, "minor": 0}}}


def run_files(results: list[tuple[Case, ForeignObjectPrediction]]) -> dict[str, str]:
    """The official run files: one probability per image, and `prob x y` triples joined by `;` (maybe none)."""
    classification = [RUN_FILE_HEADER] + [f"{case.name},{_format(p.probability)}" for case, p in results]
    localization = [RUN_FILE_HEADER] + [
        case.name + "," + ";".join(f"{_format(score)} {x:.1f} {y:.1f}" for score, x, y, *_ in p.points)
        for case, p in results]
    return {CLASSIFICATION_FILE: "\n".join(classification) + "\n", LOCALIZATION_FILE: "\n".join(localization) + "\n"}


def describe(prediction: ForeignObjectPrediction) -> str:
    return f"p={prediction.probability:.3f}, {len(prediction.points)} point(s)"


ALGORITHM = Algorithm(
    description=__doc__.split("\n\n")[0],
    interfaces=(OBJECT_CXR_INTERFACE,),
    model_file=MODEL_FILENAME,
    load_model=ForeignObjectDetector,
    case_patterns=CASE_PATTERNS,
    gc_outputs=gc_outputs,
    case_outputs=lambda case, prediction: {},
    run_files=run_files,
    describe=describe,
    name_forbidden=",",
    list_cases=image_list_cases,
    dicom=DicomContract(modalities=("CR", "DX"), write_results=foreign_object_results),
)
