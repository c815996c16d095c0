"""ImageCLEF 2022 TB caverns detection: CT -> cavern boxes with a small 3-D segmentation network (ONNX).

Pipeline: read the CT (SimpleITK; array order z, y, x), reduce it block-wise to a coarse grid (mean HU in a window
plus the fractions of air and of soft-tissue voxels per block), run the network (cavern probability per coarse
voxel), take connected components above a threshold, and refine each component's box at full resolution by
trilinear up-sampling of its probabilities. Every parameter comes from the ONNX model's metadata.

`ALGORITHM` plugs it into the algorithm runner (`runner.py`, the container contract): grand-challenge one-case mode
(socket `ct-image` -> `tb-cavern-boxes.json`), or batch mode over every `*.nii.gz` of the input folder
(`submission.txt` in the official run-file format plus one JSON per case), or over the DICOM CT studies of the input
folder, which adds one DICOM SR per study (TID 1500: a volumetric ROI per box with its probability, `dicom/sr.py`).

Boxes use the challenge's convention: X is the first voxel index (ITK index i, nibabel's first axis), corners are
inclusive voxel indices inside the volume, X1 < X2, Y1 < Y2, Z1 < Z2.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..contract import strip_image_suffix
from ..formats.tb_caverns import RUN_FILE_FORBIDDEN, run_file_text
from ..imaging import read_ct, resampled_size
from ..sockets import CT_IMAGE, TB_CAVERN_BOXES, TB_CAVERNS_INTERFACE
from ..dicom.series import DicomSeries
from ..dicom.detectors import TB_CAVERN, model_card_point
from ..dicom.sr import BoxFinding, box_report
from .runner import Algorithm, Case, DicomContract

log = logging.getLogger("medchallenge.tb_caverns")

MODEL_FILENAME = "tb_caverns.onnx"
SUBMISSION_FILE = "submission.txt"
OUTPUT_VERSION = 1

# Metadata keys of the ONNX model (values are JSON objects).


@dataclass
class Preprocessing:
    """How the CT becomes the network input (stored in the model's metadata)."""

    block_zyx: tuple[int, int, int] = (2, 4, 4)
    hu_window: tuple[float, float] = (-1000.0, 200.0)
    air_below_hu: float = -950.0
    tissue_above_hu: float = -400.0
    pad_multiple: int = 4  # coarse grid sizes are padded to a multiple of this (the network's total pooling)
    # the training data's voxel spacing; a CT whose spacing differs by more than `spacing_tolerance` (relative)
    # on any axis is resampled to it first, and the boxes are mapped back to its own voxel grid
    spacing_xyz_mm: tuple[float, float, float] = (0.7, 0.7, 2.5)
    spacing_tolerance: float = 0.1

    @classmethod
    def from_dict(cls, values: dict) -> "Preprocessing":
        return cls(
            block_zyx=tuple(int(v) for v in values["block_zyx"]),
            hu_window=tuple(float(v) for v in values["hu_window"]),
            air_below_hu=float(values["air_below_hu"]),
            tissue_above_hu=float(values["tissue_above_hu"]),
            pad_multiple=int(values["pad_multiple"]),
            spacing_xyz_mm=tuple(float(v) for v in values.get("spacing_xyz_mm", cls.spacing_xyz_mm)),
            spacing_tolerance=float(values.get("spacing_tolerance", cls.spacing_tolerance)),
        )



@dataclass
class Postprocessing:
    """How coarse probabilities become boxes (stored in the model's metadata)."""

    component_threshold: float = 0.5  # coarse voxels above it form components
    refine_threshold: float = 0.5  # full-resolution threshold of the up-sampled probabilities
    min_score: float = 0.5  # a component's score (its maximum probability) must reach it
    min_coarse_voxels: int = 2

    @classmethod
    def from_dict(cls, values: dict) -> "Postprocessing":
        return cls(
            component_threshold=float(values["component_threshold"]),
            refine_threshold=float(values["refine_threshold"]),
            min_score=float(values["min_score"]),
            min_coarse_voxels=int(values["min_coarse_voxels"]),
        )



@dataclass
class Detection:
    """One cavern box: inclusive voxel corners in (x, y, z) index order, and its probability."""

    x1: int
    y1: int
    z1: int
    x2: int
    y2: int
    z2: int
    probability: float

    def corners(self) -> list[int]:
        return [self.x1, self.y1, self.z1, self.x2, self.y2, self.z2]


def block_features(ct_zyx: np.ndarray, pre: Preprocessing) -> np.ndarray:
    """(3, z', y', x') float32 network input from a (z, y, x) HU array.

    The volume is padded with air to whole blocks, then each block gives: its mean HU mapped from the window to
    [0, 1], its fraction of air voxels, and its fraction of soft-tissue voxels. The coarse grid is then padded
    (edge values) to a multiple of `pre.pad_multiple`.
    """
    bz, by, bx = pre.block_zyx
    z, y, x = ct_zyx.shape
    padded_shape = (-(-z // bz) * bz, -(-y // by) * by, -(-x // bx) * bx)
    if padded_shape != ct_zyx.shape:
        padded = np.full(padded_shape, pre.hu_window[0], dtype=np.float32)
        padded[:z, :y, :x] = ct_zyx
    else:
        padded = ct_zyx.astype(np.float32)
    gz, gy, gx = padded_shape[0] // bz, padded_shape[1] // by, padded_shape[2] // bx
    lo, hi = pre.hu_window

    def block_mean(values: np.ndarray) -> np.ndarray:
        blocks = values.reshape(gz, bz, gy, by, gx, bx)
        return blocks.sum(axis=5, dtype=np.float32).sum(axis=3).sum(axis=1) / float(bz * by * bx)

    air = block_mean((padded < pre.air_below_hu).view(np.uint8))
    tissue = block_mean((padded > pre.tissue_above_hu).view(np.uint8))
    np.clip(padded, lo, hi, out=padded)
    mean = (block_mean(padded) - lo) / (hi - lo)
    features = np.stack([mean, air, tissue]).astype(np.float32)
    m = pre.pad_multiple
    pad = [(0, 0)] + [(0, -(-s // m) * m - s) for s in features.shape[1:]]
    return np.pad(features, pad, mode="edge")


def _full_to_coarse(coords_full: np.ndarray, block: int) -> np.ndarray:
    """Continuous coarse index of full-resolution voxel centres (block centres at (k + 0.5) * block - 0.5)."""
    return (coords_full + 0.5) / block - 0.5


def probabilities_to_detections(
    probability_zyx: np.ndarray, shape_zyx: tuple[int, int, int], pre: Preprocessing, post: Postprocessing
) -> list[Detection]:
    """Boxes (x, y, z order) from coarse probabilities, sorted by probability descending."""
    from scipy import ndimage

    gz, gy, gx = (-(-s // b) for s, b in zip(shape_zyx, pre.block_zyx))
    prob = probability_zyx[:gz, :gy, :gx]
    labels, _ = ndimage.label(prob >= post.component_threshold, structure=np.ones((3, 3, 3), bool))
    detections = []
    for k, sl in enumerate(ndimage.find_objects(labels), start=1):
        component = labels[sl] == k
        if component.sum() < post.min_coarse_voxels:
            continue
        score = float(prob[sl][component].max())
        if score < post.min_score:
            continue
        box = _refine_box(prob, labels, k, sl, shape_zyx, pre, post)
        detections.append(Detection(*box, probability=score))
    detections.sort(key=lambda d: -d.probability)
    return detections


def _refine_box(prob, labels, k, sl, shape_zyx, pre: Preprocessing, post: Postprocessing) -> list[int]:
    """Inclusive (x1, y1, z1, x2, y2, z2) of the component at full resolution."""
    from scipy import ndimage

    lo = [max(s.start - 1, 0) for s in sl]
    hi = [min(s.stop + 1, n) for s, n in zip(sl, labels.shape)]
    crop = tuple(slice(a, b) for a, b in zip(lo, hi))
    # this component's probabilities, other components' voxels zeroed so neighbours do not merge
    own = np.where((labels[crop] == k) | (labels[crop] == 0), prob[crop], 0.0).astype(np.float32)
    full_lo = [a * b for a, b in zip(lo, pre.block_zyx)]
    full_hi = [min(c * b, n) for c, b, n in zip(hi, pre.block_zyx, shape_zyx)]
    grids = np.meshgrid(
        *[_full_to_coarse(np.arange(a, b, dtype=np.float32), blk) - c
          for a, b, blk, c in zip(full_lo, full_hi, pre.block_zyx, lo)],
        indexing="ij",
    )
    upsampled = ndimage.map_coordinates(own, grids, order=1, mode="nearest")
    mask = upsampled >= post.refine_threshold
    if mask.any():
        idx = np.nonzero(mask)
        box_lo = [a + int(i.min()) for a, i in zip(full_lo, idx)]
        box_hi = [a + int(i.max()) for a, i in zip(full_lo, idx)]
    else:  # the whole component's blocks
        box_lo = [s.start * b for s, b in zip(sl, pre.block_zyx)]
        box_hi = [min(s.stop * b, n) - 1 for s, b, n in zip(sl, pre.block_zyx, shape_zyx)]
    for axis, n in enumerate(shape_zyx):  # strictly ordered corners inside the volume
        if box_hi[axis] <= box_lo[axis]:
            if box_lo[axis] + 1 < n:
                box_hi[axis] = box_lo[axis] + 1
            else:
                box_lo[axis] = box_hi[axis] - 1
    (z1, y1, x1), (z2, y2, x2) = box_lo, box_hi
    return [x1, y1, z1, x2, y2, z2]


@dataclass
class CaseDetections:
    """One CT's detections, and its per-case JSON (the same document in GC and batch mode)."""

    detections: list[Detection]
    result: dict


class CavernDetector:
    """The ONNX model with its pre- and post-processing parameters."""

    def __init__(self, model_path: Path, device: str = "auto"):
        from ..onnx_session import create_session, processing_parameters

        self.session = create_session(model_path, device)
        self.pre, self.post = processing_parameters(self.session, model_path, Preprocessing, Postprocessing)
        self.input_name = self.session.get_inputs()[0].name
        self.provider = self.session.get_providers()[0]

    def probabilities(self, ct_zyx: np.ndarray) -> np.ndarray:
        features = block_features(ct_zyx, self.pre)
        (prob,) = self.session.run(None, {self.input_name: features[None]})
        return prob[0, 0]

    def detect(self, ct_zyx: np.ndarray) -> list[Detection]:
        return probabilities_to_detections(self.probabilities(ct_zyx), ct_zyx.shape, self.pre, self.post)

    def detect_image(self, image, ct_zyx: np.ndarray, where: object = "CT") -> list[Detection]:
        """Detections in `image`'s voxel grid; a CT of another spacing is resampled to the training spacing."""
        spacing = np.asarray(image.GetSpacing())
        target = np.asarray(self.pre.spacing_xyz_mm)
        if np.all(np.abs(spacing / target - 1) <= self.pre.spacing_tolerance):
            return self.detect(ct_zyx)
        import SimpleITK as sitk

        resampled = resample_to_spacing(image, self.pre.spacing_xyz_mm, where)
        log.info("spacing %s mm resampled to %s mm for the model", tuple(round(v, 3) for v in spacing),
                 self.pre.spacing_xyz_mm)
        detections = self.detect(sitk.GetArrayViewFromImage(resampled))
        return [map_detection(d, resampled, image) for d in detections]

    def predict(self, case: Case) -> CaseDetections:
        """The case's detections and its per-case JSON."""
        path = case.inputs[CT_IMAGE.slug]
        image, array = read_ct(path, case.read_image(CT_IMAGE.slug, "CT image"))
        detections = self.detect_image(image, array, path)
        return CaseDetections(detections, case_result(case.name, image, detections))


def resample_to_spacing(image, spacing_xyz_mm: tuple[float, float, float], where: object = "CT"):
    """`image` on a grid of the given spacing (same origin and direction, linear interpolation, air outside); a grid
    over the image-size limit is refused first."""
    import SimpleITK as sitk

    return sitk.Resample(image, resampled_size(image, spacing_xyz_mm, where), sitk.Transform(), sitk.sitkLinear,
                         image.GetOrigin(), tuple(spacing_xyz_mm), image.GetDirection(), -1024.0, sitk.sitkInt16)


def map_detection(detection: Detection, source, target) -> Detection:
    """A box of `source`'s voxel grid as the inclusive box of `target`'s grid covering the same corner points."""
    d = detection
    corners = np.asarray([
        target.TransformPhysicalPointToContinuousIndex(
            source.TransformContinuousIndexToPhysicalPoint((float(x), float(y), float(z))))
        for x in (d.x1, d.x2) for y in (d.y1, d.y2) for z in (d.z1, d.z2)
    ])
    size = target.GetSize()
    lo = [min(max(int(round(v)), 0), n - 2) for v, n in zip(corners.min(axis=0), size)]
    hi = [max(min(int(round(v)), n - 1), a + 1) for v, n, a in zip(corners.max(axis=0), size, lo)]
    return Detection(*lo, *hi, probability=detection.probability)


def world_box_mm(image, detection: Detection) -> list[float]:
    """Axis-aligned box (xmin, ymin, zmin, xmax, ymax, zmax) in SimpleITK world coordinates (LPS mm) covering the
    voxel box's corner voxel centres."""
    corners = [
        image.TransformContinuousIndexToPhysicalPoint((float(x), float(y), float(z)))
        for x in (detection.x1, detection.x2)
        for y in (detection.y1, detection.y2)
        for z in (detection.z1, detection.z2)
    ]
    points = np.asarray(corners)
    return [round(float(v), 3) for v in (*points.min(axis=0), *points.max(axis=0))]


def case_result(image_name: str, image, detections: list[Detection]) -> dict:
    """The per-case JSON (same schema in GC and batch mode)."""
    return {
        "version": OUTPUT_VERSION,
        "image": image_name,
        "boxes": [
            {
                "voxel_bbox": d.corners(),
                "world_bbox_mm": world_box_mm(image, d),
                "probability": round(d.probability, 6),
            }
            for d in detections
        ],
    }


def gc_outputs(prediction: CaseDetections) -> dict[str, object]:
    """GC mode: the per-case JSON as the `tb-cavern-boxes` socket's value."""
    return {TB_CAVERN_BOXES.slug: prediction.result}


def case_outputs(case: Case, prediction: CaseDetections) -> dict[str, object]:
    """Batch mode: the per-case JSON as `TST_001.json`."""
    return {f"{strip_image_suffix(case.name)}.json": prediction.result}


def run_files(results: list[tuple[Case, CaseDetections]]) -> dict[str, str]:
    """The official run file: every case's boxes in probability order."""
    return {SUBMISSION_FILE: run_file_text((case.name, detection.corners())
                                           for case, prediction in results for detection in prediction.detections)}


# A TB cavern has no code of its own in DICOM's coding schemes: a private one (99 prefix), on the lung (SNOMED CT).
CAVERN_FINDING = dataclasses.replace(TB_CAVERN, algorithm_name="medchallenge tb-caverns",
                                     algorithm_version=str(OUTPUT_VERSION))


def dicom_results(series: DicomSeries, prediction: CaseDetections) -> list:
    """DICOM mode: the boxes as one SR on the CT series, the CT called at the model card's operating point (the
    boxes under it kept, marked)."""
    findings = [BoxFinding(tuple(d.corners()), d.probability) for d in prediction.detections]
    return [box_report(series, findings, CAVERN_FINDING, model_card_point("tb-caverns", "tb-cavern-boxes"))]


def describe(prediction: CaseDetections) -> str:
    return f"{len(prediction.detections)} box(es)"


ALGORITHM = Algorithm(
    description=__doc__.split("\n\n")[0],
    interfaces=(TB_CAVERNS_INTERFACE,),
    model_file=MODEL_FILENAME,
    load_model=CavernDetector,
    case_patterns=("*.nii.gz",),
    gc_outputs=gc_outputs,
    case_outputs=case_outputs,
    run_files=run_files,
    describe=describe,
    name_forbidden=RUN_FILE_FORBIDDEN,
    dicom=DicomContract(modalities=("CT",), write_results=dicom_results),
)
