"""Synthetic rib-fracture chest CTs in the public RibFrac layout, for the RibFrac algorithm (model input).

`python -m medchallenge.synth ribfrac-ct --out DIR --cases N --seed S [--shape X Y Z]` writes
`DIR/input/RibFracNNN-image.nii.gz` (int16 HU), `DIR/ground_truth/RibFracNNN-label.nii.gz` (uint8 instance masks)
and `DIR/ground_truth/ribfrac-info.csv` (`public_id,label_id,label_code`, background row included): the RibFrac
evaluator's ground-truth folder as is.

Anatomy is drawn in millimetres around the body axis: body outline (fat, muscle), lungs, mediastinum, spine
(vertebral bodies with discs), sternum, scapulae, and 12 rib pairs as curved tubes following the chest wall
(cortex about +700 HU around marrow about +250 HU, height and thickness varying along each rib), descending
towards the front and ending in costal cartilage. A rib voxel is located by its elliptic angle around the body
(`theta`: 0 at the spine, pi at the sternum), its depth under the skin and the nearest rib level, so every rib,
fracture and mask is computed in the rib's own frame (arc length, height, depth).

Fractures (0-8 per case, about 20% of cases without), in the seed's four clinical types, each visibly different:
buckle (local cortical bulge, no gap), nondisplaced (thin lucent line through the rib, ends aligned), displaced
(gap and offset of the ends), segmental (two complete fractures of one rib, both labelled segmental). Their masks
are loose, noisy regions around the fracture, as the real ones are; a few are labelled Ignore (-1).
Scanner variety per case: in-plane spacing 0.6-0.9 mm, slice thickness 0.625-2.5 mm, noise 10-60 HU, a smoothing
kernel, a small HU offset. A volume smaller than the chest (`--shape`, for tests) is a field of view on the lateral
chest wall at the same scale, so it still shows ribs and fractures.
"""

from __future__ import annotations

import argparse
import csv
import io
import logging
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..io import user_path

log = logging.getLogger("medchallenge.synth.ribfrac_ct")

CODES = {"displaced": 1, "nondisplaced": 2, "buckle": 3, "segmental": 4}
IGNORE_CODE = -1
# Appearance of a fracture site (a segmental fracture's two sites each look displaced or nondisplaced).
APPEARANCES = ("buckle", "nondisplaced", "displaced")
TYPE_PROBABILITIES = {"displaced": 0.3, "nondisplaced": 0.3, "buckle": 0.25, "segmental": 0.15}
IGNORE_PROBABILITY = 0.06
NO_FRACTURE_PROBABILITY = 0.2
MAX_FRACTURES = 8
RIBS_PER_SIDE = 12
SLICE_THICKNESSES_MM = (0.625, 1.0, 1.25, 1.5, 2.0, 2.5)
INFO_CSV = "ribfrac-info.csv"
SCALE_STEP = 0.004  # body scale steps at which the slice geometry is recomputed

HU_AIR, HU_FAT, HU_MUSCLE, HU_LUNG, HU_BLOOD = -1000.0, -100.0, 45.0, -850.0, 40.0
HU_CORTEX, HU_MARROW, HU_CARTILAGE, HU_DISC = 700.0, 250.0, 120.0, 80.0


@dataclass
class FractureSite:
    """One fracture instance: where it is on which rib, how it looks, its label and code."""

    side: int  # -1 right (smaller x), +1 left
    rib: int  # 0 (top) .. 11
    theta: float  # elliptic angle around the body, 0 at the spine, pi at the sternum
    appearance: str  # buckle | nondisplaced | displaced
    code: int  # label code of the ground truth (1..4, -1 Ignore)
    label: int = 0  # instance label in the mask
    gap_mm: float = 0.0  # displaced: gap between the ends; nondisplaced: width of the lucent line
    offset_mm: tuple[float, float] = (0.0, 0.0)  # displaced: shift of the anterior end (height, depth)
    tilt: float = 0.0  # obliquity of the fracture line (mm along the rib per mm of height)
    bulge: float = 0.0  # buckle: relative thickening of the rib
    mask_radii_mm: tuple[float, float, float] = (8.0, 7.0, 7.0)  # along, height, depth
    mask_wobble: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    centre_voxel: tuple[int, int, int] = (0, 0, 0)  # (x, y, z) index of the site's rib centre point, once drawn
    voxels: int = 0


@dataclass
class RibCase:
    """One synthetic CT: arrays in (z, y, x) order (SimpleITK's), spacing and origin in (x, y, z) mm."""

    ct: np.ndarray  # int16 HU
    labels: np.ndarray  # uint8 instance labels 1..n (n = number of sites)
    spacing: tuple[float, float, float]
    origin: tuple[float, float, float]
    fractures: list[FractureSite] = field(default_factory=list)

    @property
    def rows(self) -> list[tuple[int, int]]:
        """(label_id, label_code) rows of the info CSV, background row first."""
        return [(0, 0)] + [(f.label, f.code) for f in self.fractures]


class Chest:
    """The per-case geometry: body ellipse per height, rib levels, rib shapes, in millimetres.

    Coordinates: x (patient left +), y (posterior +), z (superior +), relative to the body axis at mid-cage height.
    """

    def __init__(self, rng: np.random.Generator):
        self.a = rng.uniform(140, 175)  # half width of the body at mid cage
        self.b = self.a * rng.uniform(0.66, 0.78)  # half depth
        self.pitch = rng.uniform(21, 26)  # vertical distance of consecutive ribs
        self.drop = rng.uniform(55, 85)  # how much a rib descends from the spine to its front end
        self.rise = rng.uniform(4, 10)  # how much it first rises behind
        self.z_top = 6.0 * self.pitch  # rib 0's head: the cage is centred on z = 0
        self.fat = rng.uniform(6, 18)  # subcutaneous fat
        self.wall = self.fat + rng.uniform(8, 14)  # depth of the rib centres laterally
        self.back = rng.uniform(12, 22)  # extra depth behind (back muscles)
        shape = (2, RIBS_PER_SIDE)
        self.theta_start = rng.uniform(0.13, 0.17, shape) * np.pi
        ribs = np.arange(RIBS_PER_SIDE)
        bone_end = np.where(ribs < 7, 0.72, np.where(ribs < 10, 0.68 - 0.02 * (ribs - 7), 0.5 + 0.03 * (ribs - 10)))
        self.theta_bone_end = (bone_end + rng.uniform(-0.03, 0.03, shape)) * np.pi
        cartilage_end = np.where(ribs < 7, 0.93, np.where(ribs < 10, 0.86, 0.0))
        self.theta_cartilage_end = np.maximum(cartilage_end * np.pi, self.theta_bone_end)
        self.height = rng.uniform(9, 12, shape) * np.where(ribs < 2, 0.8, 1.0)  # rib height (mostly along z)
        self.thickness = rng.uniform(5.0, 6.5, shape)  # rib thickness (along the depth)
        self.cortex = rng.uniform(1.0, 1.5)
        self.phases = rng.uniform(0, 2 * np.pi, (2, 2, RIBS_PER_SIDE))
        for name in ("theta_start", "theta_bone_end", "theta_cartilage_end", "height", "thickness", "phases"):
            setattr(self, name, getattr(self, name).astype(np.float32))
        self.spine_y = self.b - self.back - rng.uniform(18, 24)  # vertebral body centre
        self.spine_radius = rng.uniform(16, 20)
        self.scapula = rng.uniform(0.22, 0.3) * np.pi, rng.uniform(0.45, 0.52) * np.pi  # theta range
        self.lung_gradient = rng.uniform(20, 50)
        self.diaphragm = -6.5 * self.pitch + rng.uniform(-10, 10)  # dome height (mm)

    def scale(self, z: float) -> float:
        """Body size at height z relative to mid cage (narrower towards the shoulders' inside and the neck)."""
        top = self.z_top + 20
        if z > top:
            return max(0.55, 0.85 - (z - top) / 300)
        return 1.0 - 0.15 * max(0.0, z / top) ** 2

    def rib_centre_z(self, rib: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """Height of the rib's centreline at angle theta."""
        t = theta / np.pi
        return self.z_top - rib * self.pitch + self.rise * np.sin(np.pi * np.clip(t * 2, 0, 1)) - self.drop * t ** 1.5

    def rib_depth(self, theta: np.ndarray) -> np.ndarray:
        """Depth under the skin of the rib centrelines."""
        return self.wall + self.back * np.maximum(np.cos(theta), 0.0) ** 2

    def rib_size(self, side: np.ndarray, rib: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Height and thickness (mm) along the rib: flatter and taller in front, varying smoothly."""
        s = (side > 0).astype(np.intp)
        wave_h = np.sin(3.1 * theta + self.phases[0, s, rib])
        wave_t = np.sin(4.3 * theta + self.phases[1, s, rib])
        front = theta / np.pi
        height = self.height[s, rib] * (0.9 + 0.25 * front) * (1 + 0.12 * wave_h)
        thickness = self.thickness[s, rib] * (1.15 - 0.35 * front) * (1 + 0.15 * wave_t)
        return height, thickness

    def arc_per_radian(self, theta: float, z: float) -> float:
        """mm of rib length per radian of theta at that angle and height."""
        s = self.scale(z)
        return float(np.hypot(self.a * s * np.cos(theta), self.b * s * np.sin(theta)))


def _coverage(signed_mm: np.ndarray, edge_mm: float) -> np.ndarray:
    """Partial-volume fraction from a signed distance (negative inside)."""
    return np.clip(0.5 - signed_mm / edge_mm, 0.0, 1.0)


def _choose_fractures(rng: np.random.Generator, chest: Chest, visible) -> list[FractureSite]:
    """0-8 fracture sites on visible bony rib parts, segmental ones as two sites of one rib."""
    if rng.random() < NO_FRACTURE_PROBABILITY:
        return []
    wanted = int(rng.integers(1, MAX_FRACTURES + 1))
    types, weights = list(TYPE_PROBABILITIES), np.array(list(TYPE_PROBABILITIES.values()))
    sites: list[FractureSite] = []
    for _ in range(wanted * 40):
        if len(sites) >= wanted:
            break
        kind = str(rng.choice(types, p=weights / weights.sum()))
        if kind == "segmental" and len(sites) + 2 > wanted:
            continue
        side, rib = int(rng.choice((-1, 1))), int(rng.integers(RIBS_PER_SIDE))
        s = int(side > 0)
        lo, hi = chest.theta_start[s, rib] + 0.08 * np.pi, chest.theta_bone_end[s, rib] - 0.04 * np.pi
        if hi <= lo:
            continue
        thetas = [float(rng.uniform(lo, hi))]
        if kind == "segmental":
            spacing_mm = rng.uniform(30, 70)
            second = thetas[0] + spacing_mm / chest.arc_per_radian(thetas[0], 0.0)
            if second > hi:
                continue
            thetas.append(second)
        candidates = []
        for theta in thetas:
            appearance = kind if kind != "segmental" else str(rng.choice(("nondisplaced", "displaced")))
            candidates.append(_new_site(rng, side, rib, theta, appearance, CODES[kind]))
        if not all(visible(c) for c in candidates):
            continue
        if any(c.side == o.side and c.rib == o.rib and abs(c.theta - o.theta) * chest.arc_per_radian(c.theta, 0.0)
               < 22 for c in candidates for o in sites):
            continue
        if rng.random() < IGNORE_PROBABILITY:
            for c in candidates:
                c.code = IGNORE_CODE
        sites.extend(candidates)
    for label, site in enumerate(sites, start=1):
        site.label = label
    return sites


def _new_site(rng: np.random.Generator, side: int, rib: int, theta: float, appearance: str, code: int
              ) -> FractureSite:
    site = FractureSite(side, rib, theta, appearance, code)
    if appearance == "nondisplaced":
        site.gap_mm = rng.uniform(1.3, 2.0)
        site.tilt = rng.uniform(-0.4, 0.4)
    elif appearance == "displaced":
        site.gap_mm = rng.uniform(2.0, 4.5)
        site.tilt = rng.uniform(-0.4, 0.4)
        site.offset_mm = (float(rng.uniform(2.5, 5.0) * rng.choice((-1, 1))), float(rng.uniform(-4.0, 4.0)))
    else:
        site.bulge = rng.uniform(0.5, 0.8)
    site.mask_radii_mm = (rng.uniform(7, 12), rng.uniform(6.5, 9), rng.uniform(6.5, 9))
    site.mask_wobble = tuple(float(v) for v in (*rng.normal(0, 0.35, 3), rng.uniform(0, 2 * np.pi)))
    return site


class _Grid:
    """Voxel <-> millimetre mapping of the field of view (mm in the chest's frame)."""

    def __init__(self, shape_xyz: tuple[int, int, int], spacing: tuple[float, float, float],
                 centre_mm: tuple[float, float, float]):
        self.shape = shape_xyz
        self.spacing = spacing
        self.centre = np.asarray(centre_mm)
        self.x = ((np.arange(shape_xyz[0]) - (shape_xyz[0] - 1) / 2) * spacing[0] + centre_mm[0]).astype(np.float32)
        self.y = ((np.arange(shape_xyz[1]) - (shape_xyz[1] - 1) / 2) * spacing[1] + centre_mm[1]).astype(np.float32)
        self.z = (np.arange(shape_xyz[2]) - (shape_xyz[2] - 1) / 2) * spacing[2] + centre_mm[2]

    def voxel(self, point_mm: np.ndarray) -> np.ndarray:
        shape = np.asarray(self.shape)
        return np.round((point_mm - self.centre) / np.asarray(self.spacing) + (shape - 1) / 2).astype(int)

    def inside(self, point_mm: np.ndarray, margin_mm: float) -> bool:
        shape = np.asarray(self.shape)
        lo = self.centre - (shape - 1) / 2 * np.asarray(self.spacing) + margin_mm
        hi = self.centre + (shape - 1) / 2 * np.asarray(self.spacing) - margin_mm
        return bool(np.all(point_mm >= lo) and np.all(point_mm <= hi))


def _site_point(chest: Chest, site: FractureSite) -> np.ndarray:
    """The rib centre point of a site in mm (x, y, z)."""
    z = float(chest.rib_centre_z(np.asarray(site.rib), np.asarray(site.theta)))
    s = chest.scale(z)
    radius = np.hypot(chest.a * s * np.sin(site.theta), chest.b * s * np.cos(site.theta))
    r = 1 - float(chest.rib_depth(np.asarray(site.theta))) / radius
    return np.array([site.side * chest.a * s * r * np.sin(site.theta), chest.b * s * r * np.cos(site.theta), z])


class _SliceGeometry:
    """The 2-D fields of an axial slice at one body scale (cached while the scale stays the same)."""

    def __init__(self, chest: Chest, scale: float, xx: np.ndarray, yy: np.ndarray):
        a, b = chest.a * scale, chest.b * scale
        nx, ny = xx / a, yy / b
        r = np.sqrt(nx * nx + ny * ny)
        theta = np.arctan2(np.abs(nx), ny)  # 0 posterior (spine), pi anterior (sternum)
        radius = np.hypot(a * np.sin(theta), b * np.cos(theta))
        depth = (1 - r) * radius
        rib_depth = chest.rib_depth(theta)
        self.base = np.full(xx.shape, HU_AIR, dtype=np.float32)
        self.base[depth > 0] = HU_FAT
        self.base[depth > chest.fat * (1 - 0.3 * np.cos(theta))] = HU_MUSCLE
        inner = depth > rib_depth + 7  # inside the rib cage
        mediastinum = (np.abs(xx) < 0.22 * a * (1 + 0.4 * (yy < 0))) & (yy < chest.spine_y - chest.spine_radius)
        self.lung_candidate = inner & (depth > rib_depth + 12) & ~mediastinum & (np.abs(xx) > 0.12 * a)
        self.lung_hu = (HU_LUNG + chest.lung_gradient * yy / b).astype(np.float32)
        self.dome = (chest.diaphragm + 40 * (1 - np.clip((np.abs(xx) / a - 0.45) / 0.35, 0, 1) ** 2)
                     ).astype(np.float32)
        self.apex = (25 * np.abs(np.sin(theta))).astype(np.float32)
        self.heart = mediastinum & inner & (yy < 0.1 * b)
        self.inner = inner
        band = np.nonzero((np.abs(depth - rib_depth) < 16) & (r < 1))
        self.band = band
        self.theta, self.depth, self.radius = theta[band], depth[band], radius[band]
        self.rib_depth = rib_depth[band]
        self.side = np.where(xx[band] >= 0, 1, -1)
        t = self.theta / np.pi
        self.level = (chest.z_top - chest.drop * t ** 1.5 + chest.rise * np.sin(np.pi * np.clip(t * 2, 0, 1))
                      ) / chest.pitch
        sternum_depth = float(chest.rib_depth(np.asarray(np.pi)))
        self.sternum = np.where(self.theta > 0.85 * np.pi,
                                np.maximum(np.abs(xx[band]) - 14, np.abs(self.depth - sternum_depth) - 5), 99.0)
        lo, hi = chest.scapula
        self.scapula = np.maximum(np.abs(self.depth - (self.rib_depth - 13)) - 2.5,
                                  np.maximum(lo - self.theta, self.theta - hi) * self.radius)


def _draw_slice(chest: Chest, geometry: _SliceGeometry, spine: tuple, z: float, sites: list[FractureSite],
                edge_mm: float, ct_slice: np.ndarray, label_slice: np.ndarray) -> None:
    """Draw one axial slice (y, x) at height z: soft tissue, lungs, spine, sternum, scapulae, ribs, masks."""
    g = geometry
    ct_slice[...] = g.base
    cage_top, cage_bottom = chest.z_top + 15, chest.diaphragm - 4.5 * chest.pitch
    if cage_bottom < z < cage_top:
        above = g.dome < z
        np.copyto(ct_slice, g.lung_hu, where=g.lung_candidate & above & (g.apex < cage_top - z))
        if z < chest.diaphragm + 90:
            ct_slice[g.heart & above] = HU_BLOOD
        ct_slice[g.inner & ~above] = HU_MUSCLE + 12  # liver
    # spine: vertebral body (cortex, cancellous bone), discs, spinal canal, spinous process (in its box)
    box, dist_body, process, canal = spine
    view = ct_slice[box]
    if (z % chest.pitch) < 0.2 * chest.pitch:
        view += _coverage(dist_body, edge_mm) * (HU_DISC - view)
    else:
        _draw_bone(view, np.minimum(dist_body, process), chest.cortex + 0.3, edge_mm)
    view += _coverage(canal, edge_mm) * (20 - view)
    values = ct_slice[g.band]
    if chest.z_top - 9 * chest.pitch < z < chest.z_top - 1.5 * chest.pitch:
        _draw_bone(values, g.sternum, chest.cortex, edge_mm)
    if chest.z_top - 6 * chest.pitch < z < chest.z_top + 10:
        _draw_bone(values, g.scapula, 1.2, edge_mm)
    labels = label_slice[g.band]
    _draw_ribs(chest, g, z, sites, edge_mm, values, labels)
    ct_slice[g.band] = values
    label_slice[g.band] = labels


def _spine_fields(chest: Chest, x: np.ndarray, y: np.ndarray) -> tuple:
    """The box of the spine in a slice and its signed distance fields there (the same at every height)."""
    reach = chest.spine_radius + 40
    ix = np.nonzero(np.abs(x) < reach)[0]
    iy = np.nonzero(np.abs(y - chest.spine_y - 15) < reach)[0]
    if ix.size == 0 or iy.size == 0:
        box = (slice(0, 0), slice(0, 0))
    else:
        box = (slice(int(iy[0]), int(iy[-1]) + 1), slice(int(ix[0]), int(ix[-1]) + 1))
    xx, yy = np.meshgrid(x[box[1]], y[box[0]])
    dist_body = np.hypot(xx, yy - chest.spine_y) - chest.spine_radius
    process = np.maximum(np.abs(xx) - 4, np.abs(yy - chest.spine_y - chest.spine_radius - 26) - 10)
    canal = np.hypot(xx, yy - chest.spine_y - chest.spine_radius - 9) - 7
    return box, dist_body, process, canal


def _draw_bone(ct_slice: np.ndarray, signed_mm: np.ndarray, cortex_mm: float, edge_mm: float,
               where: np.ndarray | None = None) -> None:
    """Blend cortical bone inside `signed_mm` < 0 and marrow deeper than `cortex_mm`."""
    outer = _coverage(signed_mm, edge_mm)
    marrow = _coverage(signed_mm + cortex_mm, edge_mm)
    if where is not None:
        outer, marrow = outer * where, marrow * where
    ct_slice += outer * (HU_CORTEX - ct_slice)
    ct_slice += marrow * (HU_MARROW - ct_slice)


def _draw_ribs(chest: Chest, g: _SliceGeometry, z: float, sites: list[FractureSite], edge_mm: float,
               values: np.ndarray, labels: np.ndarray) -> None:
    """Ribs (bone and cartilage) and fracture masks in the chest-wall band of one slice (`values`, `labels`)."""
    th, dep, rad, side = g.theta, g.depth, g.radius, g.side
    rib = np.clip(np.rint(g.level - z / chest.pitch), 0, RIBS_PER_SIDE - 1).astype(np.intp)
    s = (side > 0).astype(np.intp)
    centre_z = rib_centre_z = chest.rib_centre_z(rib, th)
    centre_d = g.rib_depth
    height, thickness = chest.rib_size(side, rib, th)
    start, bone_end, cart_end = chest.theta_start[s, rib], chest.theta_bone_end[s, rib], chest.theta_cartilage_end[s, rib]
    cortex_hu = np.full(th.shape, HU_CORTEX, dtype=np.float32)
    gap = np.zeros(th.shape, dtype=np.float32)
    near = [f for f in sites if abs(float(chest.rib_centre_z(np.asarray(f.rib), np.asarray(f.theta))) - z) < 60]
    along_of = {}
    for f in near:
        mine = (side == f.side) & (rib == f.rib)
        along = (th - f.theta) * rad  # mm along the rib from the site
        along_of[f.label] = (mine, along)
        u_rel = z - centre_z
        if f.appearance == "buckle":
            bump = np.exp(-(along / 3.5) ** 2) * mine
            thickness = thickness * (1 + f.bulge * bump)
            height = height * (1 + 0.35 * f.bulge * bump)
            centre_d = centre_d - 0.35 * f.bulge * bump * thickness / 2
            cortex_hu = cortex_hu + 250 * bump
        else:
            line = along - f.tilt * u_rel
            gap = np.maximum(gap, mine * np.clip(0.5 - (np.abs(line) - f.gap_mm / 2) / 0.5, 0, 1))
            if f.appearance == "displaced":
                shift = mine * (line > 0) * np.exp(-np.maximum(line, 0) / 35.0)
                centre_z = centre_z + f.offset_mm[0] * shift
                centre_d = centre_d + f.offset_mm[1] * shift
    u = (z - centre_z) / (height / 2)
    v = (dep - centre_d) / (thickness / 2)
    grad = 2 * np.sqrt((u / (height / 2)) ** 2 + (v / (thickness / 2)) ** 2) + 1e-6
    signed = (u * u + v * v - 1) / grad
    # along the rib: from its head to the end of the cartilage, round ends
    signed = np.maximum(signed, np.maximum(start - th, th - cart_end) * rad)
    outer = _coverage(signed, edge_mm) * (1 - gap)
    bone = th <= bone_end
    cartilage = outer * ~bone
    values += cartilage * (HU_CARTILAGE - values)
    bone_outer = outer * bone
    values += bone_outer * (cortex_hu - values)
    values += _coverage(signed + chest.cortex, edge_mm) * (1 - gap) * bone * (HU_MARROW - values)
    for f in near:
        mine, along = along_of[f.label]
        ra, rh, rd = f.mask_radii_mm
        wa, wh, wd, phase = f.mask_wobble
        du, dd = z - rib_centre_z, dep - g.rib_depth  # in the site's own rib (`mine`), before displacement
        q = (along / ra) ** 2 + (du / rh) ** 2 + (dd / rd) ** 2
        q += 0.3 * np.sin(wa * along / 3 + wh * du / 3 + wd * dd / 3 + phase)
        labels[mine & (q < 1)] = f.label


def generate_case(rng: np.random.Generator, shape_xyz: tuple[int, int, int] | None = None,
                  spacing: tuple[float, float, float] | None = None, drawn: Collection[int] | None = None
                  ) -> RibCase:
    """One synthetic rib CT; `shape_xyz` default 512 x 512 x (250-350), `spacing` default drawn per case.

    `drawn`: the labels of the fractures to draw (default all); the others are left out of the volume and the masks
    but still listed, and anatomy and noise stay the same, so that a pair of calls shows what a fracture changes."""
    chest = Chest(rng)
    if spacing is None:
        spacing = (float(rng.uniform(0.6, 0.9)),) * 2 + (float(rng.choice(SLICE_THICKNESSES_MM)),)
    if shape_xyz is None:
        shape_xyz = (512, 512, int(rng.integers(250, 351)))
    fov = np.asarray(shape_xyz) * np.asarray(spacing)
    # a field of view narrower than the body looks at the lateral chest wall
    centre_x = 0.0 if fov[0] >= 2 * chest.a + 20 else float(rng.choice((-1, 1))) * (chest.a - fov[0] / 2 + 8)
    centre_z = float(rng.uniform(-0.15, 0.15) * max(fov[2] - 12 * chest.pitch, 0.0)) - 1.5 * chest.pitch
    grid = _Grid(tuple(int(v) for v in shape_xyz), spacing, (centre_x, rng.uniform(-10, 10), centre_z))

    def visible(site: FractureSite) -> bool:
        return grid.inside(_site_point(chest, site), margin_mm=12.0)

    sites = _choose_fractures(rng, chest, visible)
    drawn_sites = [f for f in sites if drawn is None or f.label in drawn]
    nx, ny, nz = grid.shape
    ct = np.empty((nz, ny, nx), dtype=np.float32)
    labels = np.zeros((nz, ny, nx), dtype=np.uint8)
    xx, yy = np.meshgrid(grid.x, grid.y)  # (y, x)
    edge_mm = float(rng.uniform(0.6, 1.4))
    spine = _spine_fields(chest, grid.x, grid.y)
    geometry, geometry_scale = None, None
    for k, z in enumerate(grid.z):
        scale = round(chest.scale(float(z)) / SCALE_STEP) * SCALE_STEP
        if scale != geometry_scale:
            geometry, geometry_scale = _SliceGeometry(chest, scale, xx, yy), scale
        _draw_slice(chest, geometry, spine, float(z), drawn_sites, edge_mm, ct[k], labels[k])
    _add_scanner_noise(rng, ct)
    for site in sites:
        site.centre_voxel = tuple(int(v) for v in grid.voxel(_site_point(chest, site)))
    counts = np.bincount(labels.ravel(), minlength=len(sites) + 1)
    for site in sites:
        site.voxels = int(counts[site.label])
    origin = (float(rng.uniform(-200, -150)), float(rng.uniform(-200, -150)), float(rng.uniform(-400, -100)))
    return RibCase(np.rint(ct, out=ct).astype(np.int16), labels, spacing, origin, sites)


def _add_scanner_noise(rng: np.random.Generator, ct: np.ndarray, bank_size: int = 24) -> None:
    """In-plane correlated noise (the reconstruction kernel), an HU offset, clipping to the CT range.

    The noise slices are drawn from a bank of smoothed noise slices, flipped at random (fast for 300 slices).
    """
    from scipy import ndimage

    sigma_hu = rng.uniform(10, 60)
    kernel = rng.uniform(0.4, 1.0)  # voxels
    bank = rng.standard_normal(size=(min(bank_size, ct.shape[0]), *ct.shape[1:]), dtype=np.float32)
    ndimage.gaussian_filter(bank, sigma=(0, kernel, kernel), output=bank, truncate=2.5)
    bank *= sigma_hu / max(float(bank.std()), 1e-6)
    bank += rng.uniform(-15, 15)
    picks = rng.integers(0, bank.shape[0], ct.shape[0])
    flips = rng.integers(0, 2, (ct.shape[0], 2)) * -2 + 1
    for k in range(ct.shape[0]):
        ct[k] += bank[picks[k], ::flips[k, 0], ::flips[k, 1]]
    np.clip(ct, -1024, 3071, out=ct)


def case_rng(seed: int, index: int) -> np.random.Generator:
    """The random generator of case `index` of a cohort: independent of the cohort size."""
    return np.random.default_rng([int(seed), int(index), 11])


def write_image(path: Path, array_zyx: np.ndarray, spacing, origin) -> None:
    """Write a (z, y, x) array as NIfTI (zlib level 1) atomically."""
    import SimpleITK as sitk

    from ..io import write_image_atomic

    image = sitk.GetImageFromArray(array_zyx)
    image.SetSpacing(tuple(float(v) for v in spacing))
    image.SetOrigin(tuple(float(v) for v in origin))
    write_image_atomic(path, image)


def write_cohort(out: Path, cases: int, seed: int, shape_xyz: tuple[int, int, int] | None = None,
                 first_id: int = 501) -> list[RibCase]:
    """Generate and write `cases` cases (RibFrac<first_id>...); return them without their arrays."""
    from ..io import write_text_atomic

    rows, written = [], []
    for index in range(cases):
        public_id = f"RibFrac{first_id + index}"
        case = generate_case(case_rng(seed, index), shape_xyz)
        write_image(out / "input" / f"{public_id}-image.nii.gz", case.ct, case.spacing, case.origin)
        write_image(out / "ground_truth" / f"{public_id}-label.nii.gz", case.labels, case.spacing, case.origin)
        rows += [(public_id, label, code) for label, code in case.rows]
        log.info("%s: %s, spacing %s mm, %s", public_id, "x".join(map(str, case.ct.shape[::-1])),
                 "/".join(f"{v:.2f}" for v in case.spacing),
                 ", ".join(f"{f.appearance}({f.code})" for f in case.fractures) or "no fracture")
        case.ct = case.labels = None
        written.append(case)
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(("public_id", "label_id", "label_code"))
    writer.writerows(rows)
    write_text_atomic(out / "ground_truth" / INFO_CSV, text.getvalue())
    return written


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=user_path, required=True, help="output folder (input/ and ground_truth/)")
    parser.add_argument("--cases", type=int, default=10, help="number of cases (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--shape", type=int, nargs=3, default=None, metavar=("X", "Y", "Z"),
                        help="voxels per case (default 512 512 and 250-350 slices)")
    parser.add_argument("--first-id", type=int, default=501, help="number of the first case id (RibFracNNN)")


def run(args: argparse.Namespace) -> int:
    if args.cases < 1:
        raise SystemExit("--cases must be at least 1")
    if args.shape is not None and min(args.shape) < 8:
        raise SystemExit("--shape: at least 8 voxels per axis")
    write_cohort(args.out, args.cases, args.seed, tuple(args.shape) if args.shape else None, args.first_id)
    log.info("wrote %d cases to %s", args.cases, args.out)
    return 0
