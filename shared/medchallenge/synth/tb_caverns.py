"""Synthetic chest CT cohort with TB caverns, in the ImageCLEF 2022 TB caverns detection layout.

`python -m medchallenge.synth tb-caverns --out DIR --cases N --seed S [--shape X Y Z] [--format nifti|dicom]` writes
`DIR/input/TST_001.nii.gz ...` (int16 HU CT; with `--format dicom` a CT series `DIR/input/TST_001/*.dcm` per case,
one study each, geometry from the NIfTI affine: `medchallenge.dicom.synthetic`), `DIR/lung_masks/v1|v2/TST_001.nii.gz` and
`DIR/ground_truth/gt_boxes.csv` + `DIR/ground_truth/all_ids.csv` (the evaluator's ground-truth folder).

Anatomy is drawn in millimetres: a body outline, two lungs (about -860 HU with noise and vessels), mediastinum,
spine, trachea and main bronchi. Caverns are air cavities (about -1000 HU) with irregular thick walls; look-alikes
are thin-walled bronchi, wall-less emphysema spots and bullae, and solid nodules. Arrays are in (x, y, z) order, as
nibabel indexes the NIfTI (= ITK index i, j, k). A cavern's box is the min and max voxel index of its mask on each
axis (both inclusive).
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..io import user_path

log = logging.getLogger("medchallenge.synth.tb_caverns")

DEFAULT_SHAPE = (512, 512, 100)
DEFAULT_SPACING = (0.7, 0.7, 2.5)
GT_HEADER = "id,bbox_X1,bbox_Y1,bbox_Z1,bbox_X2,bbox_Y2,bbox_Z2,centroid_X,centroid_Y,centroid_Z"
# Probability of 0, 1, 2, 3, 4 caverns in a case.
CAVERN_COUNT_PROBABILITIES = (0.25, 0.35, 0.2, 0.12, 0.08)
CAVERN_RADIUS_MM = (7.0, 28.0)  # mean outer radius (wall included)

HU_AIR = -1000.0
HU_SOFT_TISSUE = 40.0
HU_FAT = -100.0
HU_PARENCHYMA = -860.0
NOISE_SIGMA_HU = 25.0


@dataclass
class CavernBox:
    """One cavern's box: inclusive voxel index corners and the centroid of its mask."""

    x1: int
    y1: int
    z1: int
    x2: int
    y2: int
    z2: int
    centroid: tuple[float, float, float]

    def corners(self) -> tuple[int, int, int, int, int, int]:
        return (self.x1, self.y1, self.z1, self.x2, self.y2, self.z2)


@dataclass
class SyntheticCase:
    """One synthetic CT with its masks; all arrays in (x, y, z) order."""

    ct: np.ndarray  # int16 HU; all arrays are Fortran-ordered, so `.T` is a C-contiguous (z, y, x) view
    affine: np.ndarray  # 4x4 voxel -> RAS mm (nibabel convention)
    lung_mask_v1: np.ndarray  # uint8, 1 / 2 per lung; accurate, but excludes caverns and big lesions
    lung_mask_v2: np.ndarray  # uint8, 1 / 2 per lung; rough, dilated, includes lesions
    cavern_labels: np.ndarray  # uint8, 0 background, k = cavern k (1-based, same order as boxes)
    boxes: list[CavernBox] = field(default_factory=list)


class _Canvas:
    """The CT being drawn, with voxel <-> millimetre helpers (mm relative to the volume centre)."""

    def __init__(self, shape: tuple[int, int, int], spacing: tuple[float, float, float]):
        self.shape = tuple(int(s) for s in shape)
        self.spacing = np.asarray(spacing, dtype=np.float64)
        self.centre = (np.asarray(self.shape, dtype=np.float64) - 1) / 2
        self.extent_mm = np.asarray(self.shape) * self.spacing

    def axis_mm(self, axis: int) -> np.ndarray:
        return ((np.arange(self.shape[axis]) - self.centre[axis]) * self.spacing[axis]).astype(np.float32)

    def window(self, centre_mm: np.ndarray, radius_mm: np.ndarray):
        """Slices of the sub-box around `centre_mm` +- `radius_mm` and its mm coordinates (broadcastable), or None."""
        lo = np.floor((centre_mm - radius_mm) / self.spacing + self.centre).astype(int)
        hi = np.ceil((centre_mm + radius_mm) / self.spacing + self.centre).astype(int) + 1
        lo = np.maximum(lo, 0)
        hi = np.minimum(hi, self.shape)
        if np.any(hi <= lo):
            return None
        slices = tuple(slice(int(a), int(b)) for a, b in zip(lo, hi))
        coords = []
        for axis in range(3):
            values = ((np.arange(lo[axis], hi[axis]) - self.centre[axis]) * self.spacing[axis] - centre_mm[axis])
            shape = [1, 1, 1]
            shape[axis] = -1
            coords.append(values.astype(np.float32).reshape(shape))
        return slices, coords


def _random_rotation(rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    return (q * np.sign(np.diag(r))).astype(np.float32)


def _blob_surface(rng: np.random.Generator, roughness: float, terms: int = 5):
    """A random smooth radial perturbation f(direction) with |f| <~ roughness."""
    freqs = rng.normal(size=(terms, 3)) * 2.2
    phases = rng.uniform(0, 2 * np.pi, size=terms)
    amps = rng.uniform(0.3, 1.0, size=terms)
    amps *= roughness / amps.sum() * 1.6

    def f(ux, uy, uz):
        out = 0.0
        for (fx, fy, fz), ph, a in zip(freqs, phases, amps):
            out = out + a * np.sin(fx * ux + fy * uy + fz * uz + ph)
        return out

    return f


def _blob_distance(coords, axes_mm, rotation, surface):
    """Approximate signed distance (mm) to a perturbed rotated ellipsoid's surface, and the direction field."""
    dx, dy, dz = coords
    rx = (rotation[0, 0] * dx + rotation[0, 1] * dy + rotation[0, 2] * dz) / axes_mm[0]
    ry = (rotation[1, 0] * dx + rotation[1, 1] * dy + rotation[1, 2] * dz) / axes_mm[1]
    rz = (rotation[2, 0] * dx + rotation[2, 1] * dy + rotation[2, 2] * dz) / axes_mm[2]
    rho = np.sqrt(rx * rx + ry * ry + rz * rz) + 1e-6
    radius = 1.0 + surface(rx / rho, ry / rho, rz / rho)
    mean_axis = float(np.mean(axes_mm))
    return (rho - radius) * mean_axis, (rx / rho, ry / rho, rz / rho), rho, radius


def _coverage(signed_mm: np.ndarray, edge_mm: float = 0.8) -> np.ndarray:
    """Partial-volume fraction of an object from its signed distance (negative inside)."""
    return np.clip(0.5 - signed_mm / edge_mm, 0.0, 1.0)


def _blend(view: np.ndarray, alpha: np.ndarray, value, where: np.ndarray | None = None) -> None:
    if where is not None:
        alpha = alpha * where
    view += alpha * (value - view)


def _segment_distance(coords, start, end):
    """Distance (mm) from each point to the segment start-end (coords relative to the window centre)."""
    dx, dy, dz = coords
    d = end - start
    length2 = float(d @ d) + 1e-9
    px, py, pz = dx - start[0], dy - start[1], dz - start[2]
    t = np.clip((px * d[0] + py * d[1] + pz * d[2]) / length2, 0.0, 1.0)
    ex, ey, ez = px - t * d[0], py - t * d[1], pz - t * d[2]
    return np.sqrt(ex * ex + ey * ey + ez * ez), t


class _Anatomy:
    """Body and lung geometry of one case."""

    def __init__(self, rng: np.random.Generator, canvas: _Canvas):
        self.canvas = canvas
        ext = canvas.extent_mm
        self.body_axes = np.array([min(0.46 * ext[0], 175.0), min(0.40 * ext[1], 130.0)]) * rng.uniform(0.9, 1.0, 2)
        self.body_centre_y = rng.uniform(-0.02, 0.04) * ext[1]
        bx, by = self.body_axes
        self.lungs = []
        for side in (-1, 1):
            self.lungs.append(
                {
                    "cx": side * 0.5 * bx * rng.uniform(0.95, 1.05),
                    "cy": self.body_centre_y - 0.08 * by + rng.uniform(-0.03, 0.03) * by,
                    "ax": 0.38 * bx * rng.uniform(0.9, 1.05),
                    "ay": 0.72 * by * rng.uniform(0.9, 1.05),
                    "harm": rng.normal(scale=0.035, size=(3, 2)),
                    "phase": rng.uniform(0, 2 * np.pi, size=3),
                }
            )
        self.z_bottom = rng.uniform(0.02, 0.1)
        self.z_top = rng.uniform(0.9, 0.99)
        self.dome = rng.uniform(0.12, 0.22)

    def lung_fields(self, lung: dict):
        """2-D normalised radius and diaphragm height of one lung."""
        x = self.canvas.axis_mm(0)[:, None]
        y = self.canvas.axis_mm(1)[None, :]
        dx = (x - lung["cx"]) / lung["ax"]
        dy = (y - lung["cy"]) / lung["ay"]
        theta = np.arctan2(dy, dx)
        wobble = 1.0
        for k, ((a, b), ph) in enumerate(zip(lung["harm"], lung["phase"]), start=2):
            wobble = wobble + a * np.cos(k * theta + ph) + b * np.sin(k * theta)
        # the medial side is flatter: a mild superellipse
        rn = (np.abs(dx) ** 2.3 + np.abs(dy) ** 2.3) ** (1 / 2.3) / wobble
        dome = self.dome * (1.0 - np.clip(rn, 0, 1) ** 2)
        return rn.astype(np.float32), dome.astype(np.float32)

    def heights(self) -> np.ndarray:
        z = np.arange(self.canvas.shape[2], dtype=np.float32) / max(self.canvas.shape[2] - 1, 1)
        return (z - self.z_bottom) / (self.z_top - self.z_bottom)

    def lung_masks(self) -> list[np.ndarray]:
        """One boolean 3-D mask per lung."""
        h = self.heights()
        scale = np.sqrt(np.clip((1.0 - h) / 0.3, 0.0, 1.0))
        masks = []
        for lung in self.lungs:
            rn, dome = self.lung_fields(lung)
            # built as a C-ordered (z, y, x) array whose transpose is the Fortran-ordered (x, y, z) mask
            rn_yx, dome_yx = np.ascontiguousarray(rn.T), np.ascontiguousarray(dome.T)
            inside_zyx = (rn_yx[None, :, :] < scale[:, None, None]) & (h[:, None, None] > dome_yx[None, :, :])
            masks.append(inside_zyx.T)
        return masks


def _draw_anatomy(rng: np.random.Generator, canvas: _Canvas, anatomy: _Anatomy) -> tuple[np.ndarray, list[np.ndarray]]:
    x = canvas.axis_mm(0)[:, None]
    y = canvas.axis_mm(1)[None, :]
    bx, by = anatomy.body_axes
    body_r = np.sqrt((x / bx) ** 2 + ((y - anatomy.body_centre_y) / by) ** 2)
    slice2d = np.full(canvas.shape[:2], HU_AIR, dtype=np.float32)
    slice2d[body_r < 1.0] = HU_FAT
    slice2d[body_r < 0.9 - rng.uniform(0, 0.04)] = HU_SOFT_TISSUE
    # spine (posterior = larger y index) and sternum
    spine_r = np.sqrt((x / (0.13 * by)) ** 2 + ((y - anatomy.body_centre_y - 0.72 * by) / (0.13 * by)) ** 2)
    slice2d[spine_r < 1.0] = 700.0
    slice2d[spine_r < 0.8] = 250.0
    sternum = (np.abs(x) < 0.06 * bx) & (np.abs(y - anatomy.body_centre_y + 0.88 * by) < 0.04 * by)
    slice2d[sternum] = 400.0
    # soft-tissue texture (fat streaks) in the body wall
    slice2d += (body_r < 1.0) * rng.normal(0, 8, size=canvas.shape[:2]).astype(np.float32)
    ct = np.empty(canvas.shape, dtype=np.float32, order="F")
    ct[...] = slice2d[:, :, None]
    lungs = anatomy.lung_masks()
    # gravity-dependent density: posterior parenchyma is denser
    gradient = (HU_PARENCHYMA + rng.uniform(-20, 20) + 35.0 * (y - anatomy.body_centre_y) / by).astype(np.float32)
    parenchyma = np.broadcast_to(gradient, canvas.shape[:2])[:, :, None]
    for mask in lungs:
        np.copyto(ct, np.broadcast_to(parenchyma, canvas.shape), where=mask)
    return ct, lungs


def _random_point_in(rng: np.random.Generator, mask: np.ndarray, canvas: _Canvas, tries: int = 200):
    """A random point (mm) at a voxel of `mask`, or None."""
    for _ in range(tries):
        index = tuple(int(rng.integers(0, s)) for s in canvas.shape)
        if mask[index]:
            return (np.asarray(index) - canvas.centre) * canvas.spacing + rng.uniform(-0.5, 0.5, 3) * canvas.spacing
    return None


def _inside(mask: np.ndarray, canvas: _Canvas, points_mm: np.ndarray) -> bool:
    idx = np.round(points_mm / canvas.spacing + canvas.centre).astype(int)
    if np.any(idx < 0) or np.any(idx >= np.asarray(canvas.shape)):
        return False
    return bool(np.all(mask[idx[:, 0], idx[:, 1], idx[:, 2]]))


def _probe_points(centre: np.ndarray, radius: float) -> np.ndarray:
    dirs = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]]
                    + [[a, b, c] for a in (-1, 1) for b in (-1, 1) for c in (-1, 1)], dtype=np.float64)
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    return centre + radius * dirs


def _draw_tube(ct, canvas, start, end, radius, wall, lumen_hu, wall_hu, restrict=None):
    centre = (start + end) / 2
    half = np.abs(end - start) / 2 + radius + wall + 2
    window = canvas.window(centre, half)
    if window is None:
        return
    slices, coords = window
    dist, _ = _segment_distance(coords, start - centre, end - centre)
    view = ct[slices]
    where = None if restrict is None else restrict[slices]
    if wall > 0:
        _blend(view, _coverage(dist - radius - wall), wall_hu, where)
    if lumen_hu is not None:
        _blend(view, _coverage(dist - radius), lumen_hu, where)


def _draw_vessels(rng, ct, canvas, anatomy, lung_union):
    volume_scale = np.prod(canvas.extent_mm) / (358.0 * 358.0 * 250.0)
    for lung in anatomy.lungs:
        hilum = np.array([lung["cx"] * 0.55, lung["cy"] + 0.1 * lung["ay"], 0.0])
        for _ in range(int(160 * max(volume_scale, 0.1))):
            start = _random_point_in(rng, lung_union, canvas)
            if start is None:
                return
            direction = start - hilum
            direction = direction / (np.linalg.norm(direction) + 1e-6) + rng.normal(scale=0.4, size=3)
            direction /= np.linalg.norm(direction)
            length = rng.uniform(15, 60)
            radius = rng.uniform(0.7, 3.0)
            # a vessel is a tube without lumen: its "wall" around a zero radius
            _draw_tube(ct, canvas, start, start + direction * length, 0.0, radius, None, HU_SOFT_TISSUE - 10,
                       lung_union)


def _draw_airways(rng, ct, canvas, anatomy, lung_union):
    """Trachea, main bronchi, and thin-walled intrapulmonary bronchi (look-alikes)."""
    ext = canvas.extent_mm
    bx, by = anatomy.body_axes
    top = ext[2] / 2 + 5
    carina_h = anatomy.z_bottom + 0.55 * (anatomy.z_top - anatomy.z_bottom)
    carina = np.array([0.0, anatomy.body_centre_y + 0.25 * by, (carina_h - 0.5) * ext[2]])
    scale = min(1.0, bx / 160.0)
    _draw_tube(ct, canvas, np.array([0.0, carina[1], top]), carina, 8.0 * scale, 2.0, HU_AIR, HU_SOFT_TISSUE)
    for lung in anatomy.lungs:
        hilum = np.array([lung["cx"] * 0.6, lung["cy"] + 0.15 * lung["ay"], carina[2] - 0.06 * ext[2]])
        _draw_tube(ct, canvas, carina, hilum, 5.0 * scale, 1.5, HU_AIR, HU_SOFT_TISSUE)
    for _ in range(int(rng.integers(6, 16))):
        start = _random_point_in(rng, lung_union, canvas)
        if start is None:
            return
        direction = rng.normal(size=3)
        direction /= np.linalg.norm(direction)
        radius = rng.uniform(1.2, 5.0)
        length = rng.uniform(15, 55)
        _draw_tube(ct, canvas, start, start + direction * length, radius, rng.uniform(0.6, 1.5), HU_AIR,
                   rng.uniform(-150, 30), lung_union)


def _draw_blob(rng, ct, canvas, centre, axes, roughness, value, restrict=None, edge_mm=1.0):
    rotation = _random_rotation(rng)
    surface = _blob_surface(rng, roughness)
    window = canvas.window(centre, np.full(3, axes.max() * (1 + 2 * roughness) + 2))
    if window is None:
        return
    slices, coords = window
    signed, _, _, _ = _blob_distance(coords, axes, rotation, surface)
    _blend(ct[slices], _coverage(signed, edge_mm), value, None if restrict is None else restrict[slices])


def _draw_emphysema_and_nodules(rng, ct, canvas, lung_union, lesion_mask):
    n_emphysema = int(rng.choice([0, 2, 5, 10, 20], p=[0.25, 0.25, 0.2, 0.2, 0.1]))
    for _ in range(n_emphysema):
        centre = _random_point_in(rng, lung_union, canvas)
        if centre is None:
            break
        radius = rng.uniform(3, 10) if rng.random() < 0.8 else rng.uniform(10, 22)  # spots, sometimes a bulla
        axes = radius * rng.uniform(0.7, 1.3, 3)
        _draw_blob(rng, ct, canvas, centre, axes, 0.12, rng.uniform(-995, -955), lung_union, edge_mm=2.0)
    for _ in range(int(rng.choice([0, 1, 3, 6], p=[0.3, 0.3, 0.25, 0.15]))):
        centre = _random_point_in(rng, lung_union, canvas)
        if centre is None:
            break
        radius = rng.uniform(3, 14)
        axes = radius * rng.uniform(0.7, 1.3, 3)
        _draw_blob(rng, ct, canvas, centre, axes, 0.15, rng.uniform(-50, 45), lung_union, edge_mm=1.0)
        if radius > 8:
            window = canvas.window(centre, axes * 0.8)
            if window is not None:
                lesion_mask[window[0]] = True


def _draw_caverns(rng, ct, canvas, lung_union, count, radius_mm):
    """Draw `count` caverns (fewer if they do not fit); return the instance label volume."""
    labels = np.zeros(canvas.shape, dtype=np.uint8, order="F")
    placed: list[tuple[np.ndarray, float]] = []
    for _ in range(count * 30):
        if len(placed) == count:
            break
        radius = rng.uniform(*radius_mm)
        centre = _random_point_in(rng, lung_union, canvas)
        if centre is None:
            break
        axes = radius * rng.uniform(0.75, 1.25, 3)
        reach = float(axes.max()) * 1.25
        if not _inside(lung_union, canvas, _probe_points(centre, reach)) or not _inside(
                lung_union, canvas, centre[None]):
            continue
        if any(np.linalg.norm(centre - c) < reach + r + 6 for c, r in placed):
            continue
        rotation = _random_rotation(rng)
        surface = _blob_surface(rng, rng.uniform(0.06, 0.16))
        window = canvas.window(centre, np.full(3, reach + 2))
        slices, coords = window
        signed, (ux, uy, uz), rho, radius_field = _blob_distance(coords, axes, rotation, surface)
        inside = signed < 0
        if inside.sum() < 8 or any(np.ptp(np.nonzero(inside)[a]) < 1 for a in range(3)):
            continue
        mean_axis = float(np.mean(axes))
        wall_mm = min(rng.uniform(2.5, 7.0), 0.45 * float(axes.min()))
        wall_surface = _blob_surface(rng, 0.35)
        wall_field = wall_mm * (1.0 + wall_surface(ux, uy, uz))
        inner_signed = (rho - radius_field) * mean_axis + np.maximum(wall_field, 1.2)
        view = ct[slices]
        wall_hu = rng.uniform(0, 45)
        _blend(view, _coverage(signed), wall_hu + rng.normal(0, 12, size=view.shape).astype(np.float32))
        _blend(view, _coverage(inner_signed), HU_AIR)
        if rng.random() < 0.2:  # air-fluid level: fluid settles posteriorly (larger y)
            level = rng.uniform(0.2, 0.6) * axes[1]
            fluid = (inner_signed < 0) & (coords[1] > axes[1] - 2 * level)
            _blend(view, fluid.astype(np.float32), rng.uniform(5, 25))
        label_view = labels[slices]
        label_view[inside] = len(placed) + 1
        placed.append((centre, reach))
    return labels


def _boxes(labels: np.ndarray) -> list[CavernBox]:
    from scipy import ndimage

    boxes = []
    count = int(labels.max())
    found = ndimage.find_objects(labels, max_label=count)
    for k, sl in enumerate(found, start=1):
        sub = labels[sl] == k
        idx = np.nonzero(sub)
        centroid = tuple(float(np.mean(i) + s.start) for i, s in zip(idx, sl))
        lo = [s.start + int(i.min()) for i, s in zip(idx, sl)]
        hi = [s.start + int(i.max()) for i, s in zip(idx, sl)]
        boxes.append(CavernBox(lo[0], lo[1], lo[2], hi[0], hi[1], hi[2], centroid))
    return boxes


def _affine(canvas: _Canvas, rng: np.random.Generator) -> np.ndarray:
    sx, sy, sz = canvas.spacing
    affine = np.diag([-sx, -sy, sz, 1.0])
    affine[:3, 3] = [sx * canvas.centre[0], sy * canvas.centre[1] + rng.uniform(-30, 30),
                     -sz * canvas.centre[2] + rng.uniform(-100, 0)]
    return affine


def _rough_mask(masks: list[np.ndarray], step: int = 4) -> np.ndarray:
    """Version-2 style lung mask: computed on a coarse grid and dilated, so it is blocky and generous."""
    from scipy import ndimage

    out = np.zeros(masks[0].shape, dtype=np.uint8, order="F")
    out_zyx = out.T
    for value, mask in enumerate(masks, start=1):
        mask_zyx = mask.T
        coarse = mask_zyx[:, ::step, ::step]
        coarse = ndimage.binary_dilation(coarse, structure=np.ones((3, 3, 3), bool), iterations=1)
        full = np.repeat(np.repeat(coarse, step, axis=1), step, axis=2)[:, : mask_zyx.shape[1], : mask_zyx.shape[2]]
        out_zyx[full & (out_zyx == 0)] = value
    return out


def generate_case(
    rng: np.random.Generator,
    shape: tuple[int, int, int] = DEFAULT_SHAPE,
    spacing: tuple[float, float, float] = DEFAULT_SPACING,
    n_caverns: int | None = None,
    cavern_radius_mm: tuple[float, float] = CAVERN_RADIUS_MM,
) -> SyntheticCase:
    """Draw one synthetic chest CT; `n_caverns` forces the cavern count (fewer if they do not fit), and
    `cavern_radius_mm` the range of their mean outer radius."""
    canvas = _Canvas(shape, spacing)
    anatomy = _Anatomy(rng, canvas)
    ct, lungs = _draw_anatomy(rng, canvas, anatomy)
    lung_union = lungs[0] | lungs[1]
    _draw_vessels(rng, ct, canvas, anatomy, lung_union)
    _draw_airways(rng, ct, canvas, anatomy, lung_union)
    lesion_mask = np.zeros(canvas.shape, dtype=bool, order="F")
    _draw_emphysema_and_nodules(rng, ct, canvas, lung_union, lesion_mask)
    if n_caverns is None:
        n_caverns = int(rng.choice(len(CAVERN_COUNT_PROBABILITIES), p=CAVERN_COUNT_PROBABILITIES))
    labels = _draw_caverns(rng, ct, canvas, lung_union, n_caverns, cavern_radius_mm)
    ct += rng.standard_normal(size=canvas.shape[::-1], dtype=np.float32).T * NOISE_SIGMA_HU
    np.clip(ct, -1024, 3071, out=ct)
    ct_int = np.rint(ct).astype(np.int16)
    lesion_mask |= labels > 0
    v1 = np.zeros(canvas.shape, dtype=np.uint8, order="F")
    for value, mask in enumerate(lungs, start=1):
        v1[mask & ~lesion_mask] = value
    v2 = _rough_mask(lungs)
    return SyntheticCase(ct=ct_int, affine=_affine(canvas, rng), lung_mask_v1=v1, lung_mask_v2=v2,
                         cavern_labels=labels, boxes=_boxes(labels))


def case_rng(seed: int, index: int) -> np.random.Generator:
    """The random generator of case `index` (0-based) of a cohort: independent of the cohort size."""
    return np.random.default_rng([int(seed), int(index)])


def case_id(index: int) -> str:
    """`TST_001` for index 0."""
    return f"TST_{index + 1:03d}"


def save_nifti(path: Path, array: np.ndarray, affine: np.ndarray) -> None:
    """Write a NIfTI-1 (gzip level 1 for .nii.gz) atomically."""
    import nibabel as nib

    from ..io import atomic_path

    image = nib.Nifti1Image(array, affine)
    image.header.set_xyzt_units("mm", "sec")
    image.set_qform(affine, code=1)
    image.set_sform(affine, code=1)
    with atomic_path(path, ".nii.gz") as tmp:
        image.to_filename(tmp)  # nibabel compresses .nii.gz at level 1


def gt_rows(cid: str, boxes: list[CavernBox]) -> list[str]:
    """Rows of the official ground-truth CSV for one case."""
    return [
        f"{cid},{b.x1},{b.y1},{b.z1},{b.x2},{b.y2},{b.z2},"
        f"{b.centroid[0]:.0f},{b.centroid[1]:.0f},{b.centroid[2]:.0f}"
        for b in boxes
    ]


def write_cohort(out: Path, cases: int, seed: int, shape: tuple[int, int, int] = DEFAULT_SHAPE,
                 spacing: tuple[float, float, float] = DEFAULT_SPACING, image_format: str = "nifti") -> list[str]:
    """Generate and write `cases` cases (CTs as NIfTI or as DICOM series); return the case ids."""
    from ..dicom.synthetic import SyntheticStudy, write_ct_series
    from ..io import write_text_atomic

    out = Path(out)
    rows, ids = [], []
    for index in range(cases):
        cid = case_id(index)
        case = generate_case(case_rng(seed, index), shape, spacing)
        if image_format == "dicom":
            write_ct_series(out / "input" / cid, case.ct, case.affine, SyntheticStudy(f"tb-caverns-{seed}-{index}", cid))
        else:
            save_nifti(out / "input" / f"{cid}.nii.gz", case.ct, case.affine)
        save_nifti(out / "lung_masks" / "v1" / f"{cid}.nii.gz", case.lung_mask_v1, case.affine)
        save_nifti(out / "lung_masks" / "v2" / f"{cid}.nii.gz", case.lung_mask_v2, case.affine)
        rows += gt_rows(cid, case.boxes)
        ids.append(cid)
        log.info("%s: %d cavern(s)", cid, len(case.boxes))
    write_text_atomic(out / "ground_truth" / "gt_boxes.csv", "\n".join([GT_HEADER, *rows]) + "\n")
    write_text_atomic(out / "ground_truth" / "all_ids.csv", "".join(f"{cid}.nii.gz\n" for cid in ids))
    return ids


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=user_path, required=True, help="output folder")
    parser.add_argument("--cases", type=int, default=10, help="number of cases (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--shape", type=int, nargs=3, default=list(DEFAULT_SHAPE), metavar=("X", "Y", "Z"),
                        help="voxels per case (default 512 512 100)")
    parser.add_argument("--spacing", type=float, nargs=3, default=list(DEFAULT_SPACING), metavar=("SX", "SY", "SZ"),
                        help="voxel size in mm (default 0.7 0.7 2.5)")
    parser.add_argument("--format", choices=("nifti", "dicom"), default="nifti",
                        help="CT files: NIfTI (the challenge's) or a DICOM CT series per case (default nifti)")


def run(args: argparse.Namespace) -> int:
    if args.cases < 1:
        raise SystemExit("--cases must be at least 1")
    ids = write_cohort(args.out, args.cases, args.seed, tuple(args.shape), tuple(args.spacing), args.format)
    log.info("wrote %d cases to %s", len(ids), args.out)
    return 0
