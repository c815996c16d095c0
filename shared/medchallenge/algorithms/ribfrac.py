"""MICCAI 2020 RibFrac: CT -> rib-fracture instances and their types, with a small 3-D U-Net detector and an
instance classifier (one ONNX model, FracNet-like).

Pipeline: read the CT (SimpleITK; arrays in z, y, x order), resample it to the detector's isotropic spacing, find
where ribs can be (bone above a threshold, dilated) and run the detector only on the patches that hold such voxels
(batched, Gaussian-weighted blending of overlapping patches): a fracture probability per voxel. Voxels above a
threshold form candidates (cc3d, 26-connectivity). The classifier looks at a finer crop of the CT around each
candidate's centroid and gives the probabilities of not a fracture, buckle, nondisplaced and displaced: candidates
that are probably no fracture are dropped, the others get a confidence from the detector and the classifier and
the most probable type; two complete (nondisplaced or displaced) fractures of one rib (joined by bone within their
bounding box) are both segmental. Instances are mapped back to the CT's voxel grid (nearest neighbour). Every
parameter comes from the ONNX model's metadata.

`ALGORITHM` plugs it into the algorithm runner (`runner.py`): grand-challenge one-case mode (socket `ct-image` ->
`images/rib-fracture-instances/output.mha` + `rib-fracture-detections.json`), or batch mode over every
`*.nii.gz`/`*.nii`/`*.mha` of the input folder (`RibFracNNN.nii.gz` per case + `ribfrac-predictions.csv`, the
official submission).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..formats.ribfrac import case_id_from_gc_image_name
from ..imaging import read_ct, resampled_size
from ..sockets import CT_IMAGE, RIB_FRACTURE_DETECTIONS, RIB_FRACTURE_INSTANCES, RIBFRAC_INTERFACE
from ..dicom.detectors import rib_fracture_results
from .runner import Algorithm, Case, DicomContract, ImageOutput

log = logging.getLogger("medchallenge.ribfrac")

MODEL_FILENAME = "ribfrac.onnx"
# the model's two graphs: the detector (CT patches -> fracture probability) and the classifier (crops around the
# candidates -> not a fracture / buckle / nondisplaced / displaced); each input has a tiny default, so that either
# graph is run alone
DETECTOR_INPUT, DETECTOR_OUTPUT = "ct", "fracture_probability"
CLASSIFIER_INPUT, CLASSIFIER_OUTPUT = "instance_crops", "instance_class_probability"
PREDICTIONS_CSV = "ribfrac-predictions.csv"
OUTPUT_VERSION = 1
# the classifier's appearance classes (after "not a fracture") and their label codes (3 Buckle, 2 Nondisplaced,
# 1 Displaced)
APPEARANCE_CODES = (3, 2, 1)
UNCERTAIN_TYPE_CODE = -1  # a fracture whose type the classifier is not sure of (RibFrac's Ignore code)
COMPLETE_CODES = (2, 1)
SEGMENTAL_CODE = 4
MAX_INSTANCES = 255  # the official code reads masks as uint8


@dataclass
class Preprocessing:
    """How the CT becomes network input (stored in the model's metadata)."""

    spacing_mm: float = 1.6  # isotropic model grid
    hu_window: tuple[float, float] = (-300.0, 1300.0)  # mapped to [0, 1]
    bone_hu: float = 300.0  # bone, where the work is done (after dilation)
    dilation_mm: float = 6.0
    patch: int = 32  # patch edge (voxels of the model grid)
    stride: int = 28  # patch step; overlaps are blended with Gaussian weights
    air_below_hu: float = -500.0  # a CT in HU has air; else the input is refused
    min_bone_voxels: int = 100  # fewer bone voxels on the model grid: no ribs, an empty prediction
    crop_spacing_mm: float = 0.8  # the classifier's crops around each candidate: isotropic spacing...
    crop_size: int = 32  # ... and edge (voxels)

    @classmethod
    def from_dict(cls, values: dict) -> "Preprocessing":
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()
                      if k in cls.__dataclass_fields__})


@dataclass
class Postprocessing:
    """How probabilities become instances (stored in the model's metadata)."""

    threshold: float = 0.5  # voxels at or above it form instances
    min_voxels: int = 20  # smaller components (model grid) are dropped
    min_confidence: float = 0.1
    # 0: an instance's confidence is its peak probability; > 0: peak x (1 - exp(-summed probability / this)), so
    # that large, sure components rank above small ones (model-grid voxels)
    confidence_mass_voxels: float = 0.0
    segmental_distance_mm: tuple[float, float] = (20.0, 90.0)  # centroid distance of two fractures of one rib
    min_fracture_probability: float = 0.5  # the classifier's; candidates below it are dropped
    classifier_weight: float = 1.0  # confidence = detector ** (1 - w) * classifier's fracture probability ** w
    # candidates kept with a fracture probability below this get the type "uncertain" (label code -1, which the
    # official classification score skips, docs/metrics/ribfrac.md §4) instead of a guess; 0: always a type
    min_typed_probability: float = 0.0

    @classmethod
    def from_dict(cls, values: dict) -> "Postprocessing":
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()
                      if k in cls.__dataclass_fields__})


@dataclass
class Detection:
    """One fracture instance: its label in the instance map, confidence and label code."""

    label_id: int
    confidence: float
    label_code: int


@dataclass
class CasePrediction:
    """One CT's instance map (SimpleITK image in the CT's geometry, uint8) and its detections."""

    public_id: str
    instances: object
    detections: list[Detection] = field(default_factory=list)


def resample_isotropic(image, spacing_mm: float, interpolator=None, default: float = -1024.0, pixel_type=None,
                       where: object = "CT"):
    """`image` on an isotropic grid of `spacing_mm` covering the same extent (same origin and direction); a grid
    over the image-size limit is refused first."""
    import SimpleITK as sitk

    size = resampled_size(image, (spacing_mm,) * 3, where)
    return sitk.Resample(image, size, sitk.Transform(), interpolator or sitk.sitkLinear, image.GetOrigin(),
                         (spacing_mm,) * 3, image.GetDirection(), default,
                         sitk.sitkFloat32 if pixel_type is None else pixel_type)


def normalise(hu_zyx: np.ndarray, pre: Preprocessing) -> np.ndarray:
    """HU mapped from the window to [0, 1] (float32)."""
    lo, hi = pre.hu_window
    out = np.clip(hu_zyx, lo, hi).astype(np.float32)
    out -= lo
    out /= hi - lo
    return out


def work_mask(hu_zyx: np.ndarray, pre: Preprocessing) -> np.ndarray:
    """Where the network runs and where instances may be: blocks of about `dilation_mm` holding bone, and their
    neighbour blocks (a block-wise dilation: cheap on a whole CT)."""
    from scipy import ndimage

    b = max(1, int(round(pre.dilation_mm / pre.spacing_mm)))
    shape = hu_zyx.shape
    grid = tuple(-(-n // b) for n in shape)
    bone = np.zeros(tuple(g * b for g in grid), dtype=bool)
    bone[: shape[0], : shape[1], : shape[2]] = hu_zyx >= pre.bone_hu
    coarse = bone.reshape(grid[0], b, grid[1], b, grid[2], b).any(axis=(1, 3, 5))
    coarse = ndimage.maximum_filter(coarse.view(np.uint8), size=3).view(bool)
    full = np.broadcast_to(coarse[:, None, :, None, :, None], (grid[0], b, grid[1], b, grid[2], b))
    return full.reshape(bone.shape)[: shape[0], : shape[1], : shape[2]]


def tile_starts(shape: tuple[int, ...], mask: np.ndarray, patch: int, stride: int) -> list[tuple[int, int, int]]:
    """Corners of the patches (covering the volume, last one flush with the end) that hold mask voxels."""
    axes = []
    for n in shape:
        starts = list(range(0, max(n - patch, 0) + 1, stride))
        if starts[-1] + patch < n:
            starts.append(n - patch)
        axes.append(starts)
    return [(z, y, x) for z in axes[0] for y in axes[1] for x in axes[2]
            if mask[z:z + patch, y:y + patch, x:x + patch].any()]


def gaussian_weights(patch: int) -> np.ndarray:
    """nnU-Net-like blending weights: a Gaussian of sigma patch/8 around the patch centre, floored."""
    centre = (patch - 1) / 2
    g = np.exp(-((np.arange(patch) - centre) ** 2) / (2 * (patch / 8) ** 2)).astype(np.float32)
    weights = g[:, None, None] * g[None, :, None] * g[None, None, :]
    return np.maximum(weights / weights.max(), 1e-3).astype(np.float32)


def sliding_window(run, volume: np.ndarray, mask: np.ndarray, pre: Preprocessing, batch: int = 4) -> np.ndarray:
    """Blended fracture probability (z, y, x) on the mask's patches, 0 outside the mask.

    `run(batch_array) -> fracture (n, 1, p, p, p)`. A volume smaller than a patch is padded (with the window's floor)
    and cropped back.
    """
    p = pre.patch
    shape = volume.shape
    padded_shape = tuple(max(n, p) for n in shape)
    if padded_shape != shape:
        grown = np.zeros(padded_shape, dtype=np.float32)
        grown[: shape[0], : shape[1], : shape[2]] = volume
        volume = grown
        grown_mask = np.zeros(padded_shape, dtype=bool)
        grown_mask[: shape[0], : shape[1], : shape[2]] = mask
        mask = grown_mask
    fracture = np.zeros(padded_shape, dtype=np.float32)
    weight = np.zeros(padded_shape, dtype=np.float32)
    g = gaussian_weights(p)
    starts = tile_starts(padded_shape, mask, p, pre.stride)
    for first in range(0, len(starts), batch):
        chunk = starts[first:first + batch]
        x = np.stack([volume[z:z + p, y:y + p, w:w + p] for z, y, w in chunk])[:, None]
        for (z, y, w), pr in zip(chunk, run(x)):
            region = (slice(z, z + p), slice(y, y + p), slice(w, w + p))
            fracture[region] += pr[0] * g
            weight[region] += g
    np.maximum(weight, 1e-6, out=weight)  # uncovered voxels hold 0 / 1e-6 = 0
    fracture /= weight
    fracture[~mask] = 0.0
    return fracture[tuple(slice(0, n) for n in shape)]


def instance_crops(image, points_xyz_mm: np.ndarray, pre: Preprocessing, size: int | None = None) -> np.ndarray:
    """Normalised crops (n, size, size, size; z, y, x) of `image` (HU) centred on physical points, on an isotropic
    grid of `pre.crop_spacing_mm` aligned with the image's axes (linear interpolation, air outside)."""
    import SimpleITK as sitk

    size = size or pre.crop_size
    direction = np.asarray(image.GetDirection(), dtype=np.float64).reshape(3, 3)
    half = direction @ np.full(3, (size - 1) / 2 * pre.crop_spacing_mm)
    crops = np.empty((len(points_xyz_mm), size, size, size), dtype=np.float32)
    for i, point in enumerate(points_xyz_mm):
        crop = sitk.Resample(image, [size] * 3, sitk.Transform(), sitk.sitkLinear,
                             tuple(float(v) for v in np.asarray(point) - half), (pre.crop_spacing_mm,) * 3,
                             image.GetDirection(), -1024.0, sitk.sitkFloat32)
        crops[i] = normalise(sitk.GetArrayViewFromImage(crop), pre)
    return crops


def find_instances(fracture: np.ndarray, bone: np.ndarray, post: Postprocessing, spacing_mm: float,
                   classify: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, list[Detection]]:
    """Instance map (uint8, labels 1..n by descending confidence) and detections from the fracture probability.

    `classify(centres)` gets the candidates' centroids (n, 3; z, y, x on the model grid) and returns their class
    probabilities (n, 4: not a fracture, buckle, nondisplaced, displaced). A candidate is kept when its fracture
    probability (1 - the first) is at least `post.min_fracture_probability`; its confidence is
    detector_confidence ** (1 - w) * fracture_probability ** w (w = `post.classifier_weight`), its code the most
    probable appearance, or UNCERTAIN_TYPE_CODE below `post.min_typed_probability`."""
    import cc3d

    # uint8, not bool: cc3d 4.1.1's bool path can fail on isolated voxels (metrics.ribfrac._components_in_box)
    candidates_mask = (fracture >= post.threshold).view(np.uint8)
    components = cc3d.connected_components(candidates_mask, connectivity=26, out_dtype=np.uint32)
    count = int(components.max())
    if count == 0:
        return np.zeros(fracture.shape, dtype=np.uint8), []
    voxels = np.flatnonzero(components)  # only the components' voxels are looked at
    flat = components.ravel()[voxels]
    sizes = np.bincount(flat, minlength=count + 1)
    peak = np.zeros(count + 1, dtype=np.float32)
    np.maximum.at(peak, flat, fracture.ravel()[voxels])
    candidates = [k for k in range(1, count + 1) if sizes[k] >= post.min_voxels and peak[k] >= post.min_confidence]
    if not candidates:
        return np.zeros(fracture.shape, dtype=np.uint8), []
    detector = peak.astype(np.float64)
    if post.confidence_mass_voxels > 0:
        mass = np.bincount(flat, weights=fracture.ravel()[voxels], minlength=count + 1)
        detector = detector * (1 - np.exp(-mass / post.confidence_mass_voxels))
    coords = np.unravel_index(voxels, fracture.shape)
    centres = np.stack([np.bincount(flat, weights=c, minlength=count + 1) for c in coords], axis=1)
    centres = centres[candidates] / sizes[candidates, None]
    probabilities = np.asarray(classify(centres), dtype=np.float64).reshape(len(candidates), 1 + len(APPEARANCE_CODES))
    fracture_probability = 1 - probabilities[:, 0]
    w = post.classifier_weight
    confidence, codes = {}, {}
    for k, p_fracture, p in zip(candidates, fracture_probability, probabilities):
        if p_fracture >= post.min_fracture_probability:
            confidence[k] = float(detector[k]) ** (1 - w) * float(p_fracture) ** w
            typed = p_fracture >= post.min_typed_probability
            codes[k] = APPEARANCE_CODES[int(np.argmax(p[1:]))] if typed else UNCERTAIN_TYPE_CODE
    found = sorted(confidence, key=lambda k: -confidence[k])[:MAX_INSTANCES]
    _mark_segmental(components, found, codes, bone, post, spacing_mm)
    lookup = np.zeros(count + 1, dtype=np.uint8)
    detections = []
    for label, k in enumerate(found, start=1):
        lookup[k] = label
        detections.append(Detection(label, round(confidence[k], 6), codes[k]))
    return lookup[components], detections


def _mark_segmental(components: np.ndarray, found: list[int], codes: dict[int, int], bone: np.ndarray,
                    post: Postprocessing, spacing_mm: float) -> None:
    """Two complete fractures joined by bone (with both instances) within their bounding box: both segmental."""
    import cc3d
    from scipy import ndimage

    complete = [k for k in found if codes[k] in COMPLETE_CODES]
    if len(complete) < 2:
        return
    boxes = dict(zip(range(1, components.max() + 1), ndimage.find_objects(components)))
    centres = {k: np.array([(s.start + s.stop) / 2 for s in boxes[k]]) * spacing_mm for k in complete}
    lo_mm, hi_mm = post.segmental_distance_mm
    for i, a in enumerate(complete):
        for b in complete[i + 1:]:
            distance = float(np.linalg.norm(centres[a] - centres[b]))
            if not lo_mm <= distance <= hi_mm:
                continue
            box = tuple(slice(max(min(p.start, q.start) - 3, 0), max(p.stop, q.stop) + 3)
                        for p, q in zip(boxes[a], boxes[b]))
            region = components[box]
            joined = cc3d.connected_components((bone[box] | (region == a) | (region == b)).view(np.uint8),
                                               connectivity=26)
            first, second = joined[region == a], joined[region == b]
            if np.intersect1d(first[first > 0], second[second > 0]).size:
                codes[a] = codes[b] = SEGMENTAL_CODE


class FractureDetector:
    """The ONNX model (detector and classifier graphs) with its pre- and post-processing parameters."""

    def __init__(self, model_path: Path, device: str = "auto"):
        from ..onnx_session import create_session, processing_parameters

        self.session = create_session(model_path, device)
        self.pre, self.post = processing_parameters(self.session, model_path, Preprocessing, Postprocessing)
        names = {i.name for i in (*self.session.get_inputs(), *self.session.get_overridable_initializers())}
        if not {DETECTOR_INPUT, CLASSIFIER_INPUT} <= names:
            raise InputError(f"{model_path}: model lacks the inputs {DETECTOR_INPUT!r} and {CLASSIFIER_INPUT!r} "
                             f"(detector and classifier)")
        self.provider = self.session.get_providers()[0]

    def run(self, batch: np.ndarray) -> np.ndarray:
        """Fracture probability of CT patches (n, 1, p, p, p)."""
        return self.session.run([DETECTOR_OUTPUT], {DETECTOR_INPUT: batch})[0]

    def classify(self, crops: np.ndarray, batch: int = 32) -> np.ndarray:
        """Class probabilities (n, 4) of crops (n, s, s, s)."""
        out = [self.session.run([CLASSIFIER_OUTPUT], {CLASSIFIER_INPUT: crops[i:i + batch, None]})[0]
               for i in range(0, len(crops), batch)]
        return np.concatenate(out) if out else np.zeros((0, 1 + len(APPEARANCE_CODES)), dtype=np.float32)

    def predict_array(self, hu_zyx: np.ndarray, classify: Callable[[np.ndarray], np.ndarray], where: str
                      ) -> tuple[np.ndarray, list[Detection]]:
        """Instances and detections of a CT already on the model grid (HU, float); `classify` as `find_instances`
        calls it."""
        bone = hu_zyx >= self.pre.bone_hu
        if int(bone.sum()) < self.pre.min_bone_voxels:
            log.warning("%s: almost no bone (%d voxels above %.0f HU): no ribs, empty prediction", where,
                        int(bone.sum()), self.pre.bone_hu)
            return np.zeros(hu_zyx.shape, dtype=np.uint8), []
        mask = work_mask(hu_zyx, self.pre)
        fracture = sliding_window(self.run, normalise(hu_zyx, self.pre), mask, self.pre)
        return find_instances(fracture, bone, self.post, self.pre.spacing_mm, classify)

    def classifier_on(self, image, grid) -> Callable[[np.ndarray], np.ndarray]:
        """`classify` for `find_instances`: centroids on `grid` (the model grid's image) -> crops of `image` -> the
        classifier."""
        def classify(centres_zyx: np.ndarray) -> np.ndarray:
            points = np.array([grid.TransformContinuousIndexToPhysicalPoint([float(v) for v in c[::-1]])
                               for c in centres_zyx]).reshape(-1, 3)
            return self.classify(instance_crops(image, points, self.pre))
        return classify

    def predict(self, case: Case) -> CasePrediction:
        import SimpleITK as sitk

        path = case.inputs[CT_IMAGE.slug]
        image, array = read_ct(path, case.read_image(CT_IMAGE.slug, "CT image"))
        check_hu_like(array, path, self.pre)
        resampled = resample_isotropic(image, self.pre.spacing_mm, where=path)
        labels, detections = self.predict_array(sitk.GetArrayViewFromImage(resampled),
                                                self.classifier_on(image, resampled), str(path))
        label_image = sitk.GetImageFromArray(labels)
        label_image.CopyInformation(resampled)
        return CasePrediction(case_id_from_gc_image_name(case.name), to_ct_grid(label_image, image), detections)


def to_ct_grid(label_image, ct_image):
    """The instance labels (model grid) on the CT's voxel grid, nearest neighbour; only the instances' bounding
    box is resampled, the rest is background."""
    import SimpleITK as sitk

    labels = sitk.GetArrayViewFromImage(label_image)
    out = np.zeros(sitk.GetArrayViewFromImage(ct_image).shape, dtype=np.uint8)
    if labels.any():
        occupied = [np.nonzero(labels.any(axis=tuple(a for a in range(3) if a != k)))[0] for k in range(3)]
        lo_zyx, hi_zyx = [int(i[0]) for i in occupied], [int(i[-1]) for i in occupied]
        corners = [ct_image.TransformPhysicalPointToContinuousIndex(label_image.TransformContinuousIndexToPhysicalPoint(
            (float(x), float(y), float(z)))) for z in (lo_zyx[0] - 1, hi_zyx[0] + 1)
            for y in (lo_zyx[1] - 1, hi_zyx[1] + 1) for x in (lo_zyx[2] - 1, hi_zyx[2] + 1)]
        size_xyz = ct_image.GetSize()
        start = [max(int(np.floor(min(c[i] for c in corners))), 0) for i in range(3)]
        stop = [min(int(np.ceil(max(c[i] for c in corners))) + 1, size_xyz[i]) for i in range(3)]
        if all(a < b for a, b in zip(start, stop)):
            reference = sitk.Image([b - a for a, b in zip(start, stop)], sitk.sitkUInt8)
            reference.SetSpacing(ct_image.GetSpacing())
            reference.SetDirection(ct_image.GetDirection())
            reference.SetOrigin(ct_image.TransformIndexToPhysicalPoint(start))
            part = sitk.Resample(label_image, reference, sitk.Transform(), sitk.sitkNearestNeighbor, 0)
            out[start[2]:stop[2], start[1]:stop[1], start[0]:stop[0]] = sitk.GetArrayViewFromImage(part)
    instances = sitk.GetImageFromArray(out)
    instances.CopyInformation(ct_image)
    return instances


def check_hu_like(array: np.ndarray, path: Path, pre: Preprocessing) -> None:
    """Refuse a volume that cannot be a CT in Hounsfield units (no air at all, or no contrast)."""
    if array.size == 0 or min(array.shape) < 2:
        raise InputError(f"{path}: CT of shape {array.shape[::-1]} (x, y, z): too small to hold ribs")
    sample = array[:: max(1, array.shape[0] // 16)]
    if int(sample.min()) >= pre.air_below_hu or int(sample.max()) - int(sample.min()) < 500:
        raise InputError(f"{path}: intensities {int(sample.min())}..{int(sample.max())} do not look like a CT in "
                         f"Hounsfield units (expected air below {pre.air_below_hu:.0f} HU and bone above)")


def detections_json(prediction: CasePrediction) -> dict:
    return {"version": OUTPUT_VERSION, "detections": [
        {"label_id": d.label_id, "confidence": d.confidence, "label_code": d.label_code}
        for d in prediction.detections]}


def gc_outputs(prediction: CasePrediction) -> dict[str, object]:
    """GC mode: the instance image and the detections JSON."""
    return {RIB_FRACTURE_INSTANCES.slug: ImageOutput(prediction.instances),
            RIB_FRACTURE_DETECTIONS.slug: detections_json(prediction)}


def case_outputs(case: Case, prediction: CasePrediction) -> dict[str, object]:
    """Batch mode: the instance map as `RibFracNNN.nii.gz`, as the official submission names it."""
    return {f"{prediction.public_id}.nii.gz": ImageOutput(prediction.instances)}


def run_files(results: list[tuple[Case, CasePrediction]]) -> dict[str, str]:
    """The official submission CSV: per case its background row, then its detections."""
    lines = ["public_id,label_id,confidence,label_code"]
    for _, prediction in results:
        lines.append(f"{prediction.public_id},0,1,0")
        lines += [f"{prediction.public_id},{d.label_id},{d.confidence!r},{d.label_code}"
                  for d in prediction.detections]
    return {PREDICTIONS_CSV: "\n".join(lines) + "\n"}


def describe(prediction: CasePrediction) -> str:
    codes = [d.label_code for d in prediction.detections]
    return f"{len(codes)} fracture(s)" + (f" (codes {codes})" if codes else "")


ALGORITHM = Algorithm(
    description=__doc__.split("\n\n")[0],
    interfaces=(RIBFRAC_INTERFACE,),
    model_file=MODEL_FILENAME,
    load_model=FractureDetector,
    case_patterns=("*.nii.gz", "*.nii", "*.mha"),
    gc_outputs=gc_outputs,
    case_outputs=case_outputs,
    run_files=run_files,
    describe=describe,
    name_forbidden=',"',
    dicom=DicomContract(modalities=("CT",), write_results=rib_fracture_results),
)
