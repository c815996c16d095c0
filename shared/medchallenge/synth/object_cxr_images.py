"""object-CXR radiographs: synthetic chest X-rays with foreign objects, for the algorithm image.

`python -m medchallenge.synth object-cxr-images --out DIR --images N --seed S [--size PX] [--format jpeg|dicom]`
writes `DIR/input/08001.jpg ...` (8-bit grey JPEG, longer side 1,500-3,000 px, or PX; with `--format dicom`
`08001.dcm`, a CR chest radiograph in a study of its own: `medchallenge.dicom.synthetic`) and
`DIR/ground_truth/annotations.csv` in the official format (`image_name,annotation`; objects `0 x1 y1 x2 y2`
rectangle, `1 x1 y1 x2 y2` ellipse in its box, `2 x1 y1 ... xn yn` polygon, integer pixels, joined by `;`), the
image names being the file names under `DIR/input`. Half of the images (`--positive-fraction`) hold foreign objects.

Each radiograph is a projection of a synthetic 3-D thorax through an attenuation model. Every structure is a solid
whose chord length along the beam is closed-form (ellipsoids: body, lungs, heart, aortic knob, breasts, vertebrae)
or a tube around a 3-D curve projected on the detector (ribs with cortex and marrow, clavicles, trachea, pulmonary
vessels, wires): line integral P = sum of attenuation x chord, transmitted intensity exp(-P) inside the collimated
field, scatter (a wide blur added back), detector blur, quantum noise (counts per pixel from a dose in quanta per
mm^2, so smaller images are less noisy per pixel, as a down-sampled radiograph is), log transform, automatic range
from the exposed field's percentiles, a film-like sigmoid contrast curve and CR-like unsharp masking. Patients vary
in size, inspiration, rotation about the vertical axis (posterior structures shift against anterior ones) and
in-plane tilt; PA and AP views differ (AP: larger heart, higher and more horizontal clavicles, scapulae over the
lungs, shallower inspiration, support devices more often).

Foreign objects (annotated, centred over the lung fields): buttons (discs with 2-4 holes, ellipse), coins (dense
discs with a rim, possibly tilted, ellipse), necklaces and chains (beads along a hanging curve with an optional
pendant, polygon around it), hair clips (bobby pins, rectangle), safety pins (rectangle), underwires (arcs under the
breasts, polygon). Support devices, which the challenge does not count as foreign objects, are drawn unannotated:
ECG electrodes (a metal snap in a pad, with its lead wire to the edge of the image), central venous lines,
endotracheal tubes (with their radiopaque stripe) and nasogastric tubes.
"""

from __future__ import annotations

import argparse
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..io import atomic_output, user_path, write_text_atomic
from .object_cxr import FIRST_IMAGE_NUMBER

log = logging.getLogger("medchallenge.synth.object_cxr_images")

GT_HEADER = "image_name,annotation"
SIZE_RANGE = (1500, 3000)  # longer side in pixels when --size is not given
ANATOMY_PITCH_MM = 0.6  # the anatomy is drawn no finer than this and interpolated (it has no finer detail)
OBJECT_PITCH_MM = 0.2  # foreign objects and wires are drawn at least this fine, then averaged onto the pixels

# Linear attenuation coefficients (1/mm, effective energy of a chest exposure)
MU_TISSUE = 0.020
MU_LUNG = 0.005
MU_AIR = 0.0
MU_CORTEX = 0.060  # cortical bone
MU_MARROW = 0.028  # cancellous bone
METAL_WIRE_MU = 1.4  # steel wire

OBJECT_KINDS = ("button", "coin", "necklace", "hair_clip", "safety_pin", "underwire")
OBJECT_KIND_WEIGHTS = (0.28, 0.18, 0.16, 0.13, 0.13, 0.12)
DEVICE_KINDS = ("ecg", "central_line", "endotracheal_tube", "nasogastric_tube")
ANNOTATION_TYPE = {"button": 1, "coin": 1, "necklace": 2, "hair_clip": 0, "safety_pin": 0, "underwire": 2}


@dataclass
class ForeignObject:
    """One annotated object: its kind and its annotation in the official syntax (pixels of the image)."""

    kind: str
    annotation: str
    centre_px: tuple[float, float]


@dataclass
class Radiograph:
    """One synthetic radiograph with what was drawn on it."""

    pixels: np.ndarray  # uint8 (rows, columns)
    view: str  # "PA" or "AP"
    objects: list[ForeignObject] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)  # support devices drawn (unannotated)
    device_points_px: list[tuple[float, float]] = field(default_factory=list)  # e.g. ECG snap centres (x, y)

    @property
    def annotation(self) -> str:
        return ";".join(o.annotation for o in self.objects)


class Detector:
    """The detector grid: pixel pitch and the mm <-> pixel mapping (x right, y down, mm from the image centre)."""

    def __init__(self, rows: int, columns: int, pitch_mm: float):
        self.rows, self.columns, self.pitch = rows, columns, pitch_mm

    def to_px(self, xy_mm: np.ndarray) -> np.ndarray:
        return np.asarray(xy_mm, float) / self.pitch + np.array([(self.columns - 1) / 2, (self.rows - 1) / 2])

    def grid_mm(self, pitch: float, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """Centres (x, y) in mm of a grid of `shape` covering the detector with another pitch."""
        ys = (np.arange(shape[0]) + 0.5) * (self.rows * self.pitch / shape[0]) - self.rows * self.pitch / 2
        xs = (np.arange(shape[1]) + 0.5) * (self.columns * self.pitch / shape[1]) - self.columns * self.pitch / 2
        return np.meshgrid(xs.astype(np.float32), ys.astype(np.float32), sparse=True)


# ---------------------------------------------------------------------------------------------------- primitives

def ellipsoid_chord(x, y, centre, semi, angle: float = 0.0):
    """Chord length (mm) along the beam through an ellipsoid: centre (x, y), semi-axes (a, b, c), in-plane angle."""
    dx, dy = x - centre[0], y - centre[1]
    if angle:
        cos, sin = math.cos(angle), math.sin(angle)
        dx, dy = cos * dx + sin * dy, -sin * dx + cos * dy
    q = 1.0 - (dx / semi[0]) ** 2 - (dy / semi[1]) ** 2
    return 2.0 * semi[2] * np.sqrt(np.maximum(q, 0.0))


def sample_curve(nodes: np.ndarray, step: float) -> np.ndarray:
    """Points every `step` along the polyline through `nodes` (n, 2), Catmull-Rom smoothed."""
    nodes = np.asarray(nodes, float)
    if len(nodes) > 2:
        padded = np.vstack([2 * nodes[0] - nodes[1], nodes, 2 * nodes[-1] - nodes[-2]])
        t = np.linspace(0, 1, 12)[:-1, None]
        pieces = []
        for i in range(1, len(padded) - 2):
            p0, p1, p2, p3 = padded[i - 1:i + 3]
            pieces.append(0.5 * (2 * p1 + (-p0 + p2) * t + (2 * p0 - 5 * p1 + 4 * p2 - p3) * t ** 2
                                 + (-p0 + 3 * p1 - 3 * p2 + p3) * t ** 3))
        nodes = np.vstack(pieces + [nodes[-1:]])
    seg = np.diff(nodes, axis=0)
    lengths = np.hypot(seg[:, 0], seg[:, 1])
    cumulative = np.concatenate([[0], np.cumsum(lengths)])
    targets = np.arange(0, cumulative[-1] + step * 0.5, step)
    return np.column_stack([np.interp(targets, cumulative, nodes[:, k]) for k in range(2)])


class Canvas:
    """A line-integral image (P, attenuation x mm) on a grid, with tube and disc painters in grid pixels."""

    def __init__(self, shape: tuple[int, int], detector: Detector, scale: float):
        self.p = np.zeros(shape, np.float32)
        self.detector = detector
        self.scale = scale  # grid pixels per detector pixel
        self.pitch = detector.pitch / scale  # mm per pixel of this grid
        self.origin_px = np.full(2, -0.5 + 0.5 / scale)  # detector pixel coordinates of this grid's first centre

    def to_grid(self, xy_px: np.ndarray) -> np.ndarray:
        return (np.asarray(xy_px, float) - self.origin_px) * self.scale

    def tube(self, points_grid: np.ndarray, radius_mm: float, mu: float, inner_mm: float = 0.0,
             inner_mu: float = 0.0) -> None:
        """Add mu x chord of balls of `radius_mm` around `points_grid` (dense: a tube; sparse: beads)."""
        from scipy.spatial import cKDTree

        r = radius_mm / self.pitch
        step = max(1.0, r / 2)  # candidate cells: disks around every point `step` cells apart
        reach = int(math.ceil(r + 1.5 + step))
        gaps = np.hypot(*np.diff(points_grid, axis=0).T) if len(points_grid) > 1 else np.ones(1)
        stride = max(1, int(step / max(float(np.median(gaps)), 1e-3)))
        centres = np.rint(points_grid[::stride]).astype(np.int64)
        h, w = self.p.shape
        lo = np.maximum(centres.min(axis=0) - reach, 0)
        hi = np.minimum(centres.max(axis=0) + reach + 1, [w, h])
        if np.any(hi <= lo):
            return
        oy, ox = np.mgrid[-reach:reach + 1, -reach:reach + 1]
        inside = (ox ** 2 + oy ** 2) <= reach ** 2
        ox, oy = ox[inside], oy[inside]
        mask = np.zeros((hi[1] - lo[1], hi[0] - lo[0]), bool)
        cx = np.clip(centres[:, 0:1] + ox[None] - lo[0], 0, mask.shape[1] - 1)
        cy = np.clip(centres[:, 1:2] + oy[None] - lo[1], 0, mask.shape[0] - 1)
        mask[cy, cx] = True
        rows, cols = np.nonzero(mask)
        rows, cols = rows + lo[1], cols + lo[0]
        if not len(rows):
            return
        distance, _ = cKDTree(points_grid).query(np.column_stack([cols, rows]), distance_upper_bound=r + 1)
        distance_mm = np.minimum(distance, r + 1) * self.pitch
        value = mu * 2 * np.sqrt(np.maximum(radius_mm ** 2 - distance_mm ** 2, 0))
        if inner_mm > 0:
            value += (inner_mu - mu) * 2 * np.sqrt(np.maximum(inner_mm ** 2 - distance_mm ** 2, 0))
        self.p[rows, cols] += value.astype(np.float32)

    def ellipsoid(self, x, y, centre, semi, mu: float, angle: float = 0.0, to_grid=None) -> None:
        """Add mu x chord of an ellipsoid, computed in its bounding box only (x, y: this grid in the anatomy frame)."""
        reach = max(semi[0], semi[1])
        corners = to_grid(np.array([[centre[0] + dx, centre[1] + dy] for dx in (-reach, reach)
                                    for dy in (-reach, reach)]))
        lo = np.maximum(np.floor(corners.min(axis=0)).astype(int) - 1, 0)
        hi = np.minimum(np.ceil(corners.max(axis=0)).astype(int) + 2, [self.p.shape[1], self.p.shape[0]])
        if np.any(hi <= lo):
            return
        box = (slice(lo[1], hi[1]), slice(lo[0], hi[0]))
        self.p[box] += (mu * ellipsoid_chord(x[box], y[box], centre, semi, angle)).astype(np.float32)


# ------------------------------------------------------------------------------------------------------ anatomy

@dataclass
class Patient:
    """Random anatomy parameters (mm, relative to the thorax centre; +x is the patient's left, image right)."""

    view: str
    size: float
    half_width: float
    depth: float
    shoulder_y: float
    apex_y: float
    diaphragm_y: float
    rotation: float  # about the vertical axis (radians): x shift = z * sin(rotation)
    tilt: float  # in-plane (radians)
    offset: tuple[float, float]
    heart_scale: float
    female: bool

    @classmethod
    def random(cls, rng: np.random.Generator) -> "Patient":
        view = "AP" if rng.random() < 0.35 else "PA"
        s = rng.uniform(0.85, 1.12)
        inspiration = rng.uniform(0.85, 1.05) * (0.92 if view == "AP" else 1.0)
        shoulder = -175 * s
        return cls(view=view, size=s, half_width=148 * s * rng.uniform(0.93, 1.07), depth=105 * s,
                   shoulder_y=shoulder, apex_y=shoulder + 22 * s, diaphragm_y=shoulder + 22 * s + 255 * s * inspiration,
                   rotation=float(rng.normal(0, 0.06)), tilt=float(rng.normal(0, 0.03)),
                   offset=(float(rng.normal(0, 12)), float(rng.normal(12, 12))),
                   heart_scale=rng.uniform(0.9, 1.1) * (1.15 if view == "AP" else 1.0), female=bool(rng.random() < 0.5))

    def shift(self, z: float) -> float:
        """x shift of a structure at depth z (mm, + posterior) from the patient's rotation."""
        return z * math.sin(self.rotation)


def _smoothstep(t):
    t = np.clip(t, 0.0, 1.0)
    return t * t * (3 - 2 * t)


def lung_chords(pt: Patient, x, y) -> np.ndarray:
    """Path length through both lungs (heart and diaphragm domes cut out)."""
    total = 0
    for side in (-1, 1):
        cx = side * pt.half_width * 0.47 + pt.shift(-10)
        height = pt.diaphragm_y - pt.apex_y
        semi = (pt.half_width * 0.43, height * 0.56, pt.depth * 0.78)
        chord = ellipsoid_chord(x, y, (cx, pt.apex_y + height * 0.55), semi, angle=side * 0.05)
        dome_top = pt.diaphragm_y - (12 if side < 0 else 0) - 32 * pt.size
        dome = dome_top + 32 * pt.size * ((x - cx) / semi[0]) ** 2
        chord = chord * _smoothstep((dome - y) / 10.0) * _smoothstep((y - pt.apex_y + 4) / 22.0)
        total = total + chord
    heart = heart_chord(pt, x, y)
    return np.maximum(total - 0.95 * heart, 0)


def heart_chord(pt: Patient, x, y) -> np.ndarray:
    h = pt.heart_scale * pt.size
    centre = (pt.half_width * 0.16 + pt.shift(-40), pt.diaphragm_y - 62 * h)
    return ellipsoid_chord(x, y, centre, (pt.half_width * 0.40 * h, 62 * h, 55 * h), angle=-0.45)


def body_chord(pt: Patient, x, y) -> np.ndarray:
    """Path length through the soft tissue of neck, thorax, abdomen, shoulders and arms."""
    neck = 52 * pt.size
    width = neck + (pt.half_width + 25 * pt.size - neck) * _smoothstep((y - pt.shoulder_y + 30) / 60.0)
    outline = np.sqrt(np.maximum(1 - (x / width) ** 2, 0))
    chord = 2 * pt.depth * outline ** 0.7 * _smoothstep((y - pt.shoulder_y + 140) / 30)
    for side in (-1, 1):  # the arms beside the chest, overlapping its edge
        arm_x = side * (pt.half_width + 55 * pt.size)
        arm = 2 * 42 * pt.size * np.sqrt(np.maximum(1 - ((x - arm_x) / (45 * pt.size)) ** 2, 0))
        chord = chord + arm * _smoothstep((y - pt.shoulder_y + 10) / 40)
    return chord


def rib_curves(pt: Patient, rng: np.random.Generator) -> list[tuple[np.ndarray, float]]:
    """Projected centre lines (mm, anatomy frame) and radii of the ribs (posterior and anterior arcs)."""
    curves = []
    spacing = (pt.diaphragm_y - pt.apex_y) / 9.2
    for k in range(12):
        y0 = pt.apex_y - 6 * pt.size + k * spacing
        if y0 > pt.diaphragm_y + 40:
            break
        reach = pt.half_width * (0.55 + 0.45 * _smoothstep(k / 4.0)) * rng.uniform(0.95, 1.02)
        radius = (3.8 + 1.6 * min(k, 5) / 5) * pt.size
        for side in (-1, 1):
            spine = np.array([side * 16 * pt.size + pt.shift(70), y0])
            lateral = np.array([side * reach + pt.shift(0), y0 + (18 + 3 * k) * pt.size])
            top = np.array([side * reach * 0.55 + pt.shift(50), y0 - (6 - 0.3 * k) * pt.size])
            posterior = np.array([spine, top, lateral * [0.92, 1] + [pt.shift(20) * 0.08, -4], lateral])
            front = np.array([side * (34 + 6 * k) * pt.size + pt.shift(-90), y0 + (62 + 5 * k) * pt.size])
            anterior = np.array([lateral, lateral * [0.85, 1] + [0, 22 * pt.size], front])
            curves.append((posterior, radius))
            if k < 9:
                curves.append((anterior, radius * 1.2))
    return curves


def draw_anatomy(pt: Patient, rng: np.random.Generator, canvas: Canvas, x, y) -> np.ndarray:
    """Add the patient's line integral to `canvas` (x, y: the grid in the anatomy frame); return the lung chords."""
    from scipy.ndimage import gaussian_filter

    to_grid = _anatomy_to_grid(pt, canvas)
    lungs = lung_chords(pt, x, y)
    # parenchyma: the lungs' density varies smoothly (perfusion, overlapping vessels too small to draw)
    texture = gaussian_filter(rng.standard_normal(lungs.shape).astype(np.float32), 3.0 / canvas.pitch)
    texture *= 0.08 / max(float(texture.std()), 1e-6)
    canvas.p += (MU_TISSUE * body_chord(pt, x, y) - (MU_TISSUE - MU_LUNG) * lungs * (1 - texture)).astype(np.float32)
    canvas.p += (0.003 * heart_chord(pt, x, y)).astype(np.float32)  # blood is a little denser than fat
    ell = lambda centre, semi, mu, angle=0.0: canvas.ellipsoid(x, y, centre, semi, mu, angle, to_grid)  # noqa: E731
    s = pt.size
    ell((pt.half_width * 0.2 + pt.shift(-10), pt.apex_y + 75 * s), (19 * s, 17 * s, 20 * s), 0.3 * MU_TISSUE)
    if pt.female:
        for side in (-1, 1):
            ell((side * pt.half_width * 0.55 + pt.shift(-120), pt.diaphragm_y - 25 * s), (85, 65, 12), MU_TISSUE)
    for k in range(19):  # vertebrae (body, pedicles) and the discs between them (lower density)
        yk, xk = pt.shoulder_y - 60 + k * 24 * s, pt.shift(60)
        ell((xk, yk), (22 * s, 10.5 * s, 17 * s), MU_MARROW - MU_TISSUE)
        for side in (-1, 1):
            ell((xk + side * 15 * s, yk - 2), (4.5 * s, 7 * s, 4 * s), MU_CORTEX - MU_TISSUE)
    for nodes, radius in rib_curves(pt, rng):
        anterior = nodes[-1][1] > nodes[0][1] + 40 * s
        strength = 0.6 if anterior else 1.0
        canvas.tube(to_grid(sample_curve(nodes, canvas.pitch * 0.7)), radius, strength * (MU_CORTEX - MU_TISSUE),
                    inner_mm=radius - 1.3, inner_mu=strength * (MU_MARROW - MU_TISSUE))
    clavicle_y = pt.shoulder_y + (18 if pt.view == "PA" else 4) * s
    for side in (-1, 1):
        lift = 10 if pt.view == "PA" else 2
        nodes = np.array([[side * 24 * s, clavicle_y + 22], [side * 60 * s, clavicle_y + 8],
                          [side * pt.half_width * 0.75, clavicle_y - lift],
                          [side * pt.half_width * 1.02, clavicle_y - lift + 4]]) + [pt.shift(-60), 0]
        canvas.tube(to_grid(sample_curve(nodes, canvas.pitch * 0.7)), 7 * s, MU_CORTEX - MU_TISSUE,
                    inner_mm=5.5 * s, inner_mu=MU_MARROW - MU_TISSUE)
        # scapula: over the lateral lung in AP, mostly outside it in PA
        sx = side * pt.half_width * (0.8 if pt.view == "AP" else 1.0) + pt.shift(80)
        border = np.array([[sx, pt.shoulder_y + 25], [sx + side * 8, pt.shoulder_y + 90],
                           [sx - side * 18, pt.shoulder_y + 150]])
        canvas.tube(to_grid(sample_curve(border, canvas.pitch * 0.7)), 4 * s, 0.6 * (MU_CORTEX - MU_TISSUE))
        ell((sx - side * 28, pt.shoulder_y + 85), (42, 72, 3), MU_CORTEX - MU_TISSUE, side * 0.2)
        # humeral head and shaft
        hx = side * (pt.half_width + 40 * s)
        ell((hx, pt.shoulder_y + 28), (24 * s, 26 * s, 24 * s), MU_MARROW - MU_TISSUE)
        shaft = np.array([[hx, pt.shoulder_y + 40], [hx + side * 4, pt.shoulder_y + 140]])
        canvas.tube(to_grid(sample_curve(shaft, canvas.pitch * 0.7)), 11 * s, MU_CORTEX - MU_TISSUE,
                    inner_mm=8 * s, inner_mu=MU_MARROW - MU_TISSUE)
    # trachea and main bronchi (air in soft tissue), pulmonary vessels (tissue in lung)
    carina = np.array([pt.shift(-20), pt.apex_y + 95 * s])
    trachea = np.array([[pt.shift(-20), pt.shoulder_y - 150], [pt.shift(-20) + 2, pt.apex_y], carina])
    canvas.tube(to_grid(sample_curve(trachea, canvas.pitch * 0.7)), 8 * s, -(MU_TISSUE - MU_AIR))
    for side in (-1, 1):
        hilum = carina + [side * 45 * s, 30 * s]
        canvas.tube(to_grid(sample_curve(np.array([carina, hilum]), canvas.pitch * 0.7)), 5 * s,
                    -(MU_TISSUE - MU_AIR) * 0.8)
        _vessel_tree(canvas, to_grid, rng, hilum + [side * 8, 8], side, depth=0, radius=5.5 * s)
    return lungs


def _vessel_tree(canvas: Canvas, to_grid, rng, start, side: int, depth: int, radius: float) -> None:
    """Branching pulmonary vessels from a hilum, outward and downward."""
    angle = rng.uniform(-1.0, 1.3) if depth == 0 else None
    for _ in range(3 if depth == 0 else 2):
        direction = (angle if angle is not None else 0) + rng.uniform(-0.9, 0.9)
        length = rng.uniform(30, 55) / (1 + 0.25 * depth)
        end = start + length * np.array([side * math.cos(direction), math.sin(direction)])
        mid = (start + end) / 2 + rng.normal(0, 5, 2)
        canvas.tube(to_grid(sample_curve(np.array([start, mid, end]), canvas.pitch * 0.7)), radius,
                    MU_TISSUE - MU_LUNG)
        if depth < 3:
            _vessel_tree(canvas, to_grid, rng, end, side, depth + 1, radius * 0.7)


def _anatomy_to_grid(pt: Patient, canvas: Canvas):
    """Anatomy-frame mm -> canvas grid pixels (tilt and offset applied), for the tube painter."""
    cos, sin = math.cos(pt.tilt), math.sin(pt.tilt)
    d = canvas.detector
    detector_centre, pitch_px = np.array([(d.columns - 1) / 2, (d.rows - 1) / 2]), d.pitch

    def to_grid(points: np.ndarray) -> np.ndarray:
        x, y = points[:, 0], points[:, 1]
        xd, yd = cos * x - sin * y + pt.offset[0], sin * x + cos * y + pt.offset[1]
        return canvas.to_grid(np.column_stack([xd, yd]) / pitch_px + detector_centre)

    return to_grid


# -------------------------------------------------------------------------------------- objects and devices

def _rotate(points: np.ndarray, angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return points @ np.array([[c, s], [-s, c]])


def _disc_p(xx, yy, radius, thickness, mu, squash=1.0, angle=0.0):
    c, s = math.cos(angle), math.sin(angle)
    u, v = c * xx + s * yy, -s * xx + c * yy
    r = np.hypot(u / squash, v)
    edge = np.clip((radius - r) / 0.3 + 0.5, 0, 1)  # a soft, anti-aliased edge
    return mu * thickness / squash * edge, (u, v)


def render_object(kind: str, rng: np.random.Generator, pt: Patient, centre_mm: np.ndarray, scale: float
                  ) -> tuple[list[tuple[str, np.ndarray, float, float]], list[tuple[np.ndarray, float, float, float]]]:
    """The object's parts in detector mm: tubes/beads (points, radius, mu) and discs (params)."""
    angle = rng.uniform(0, 2 * math.pi)
    tubes: list[tuple[np.ndarray, float, float]] = []
    discs: list[tuple] = []
    if kind == "button":
        radius, thickness, mu = rng.uniform(5, 12), rng.uniform(2, 3.2), rng.uniform(0.12, 0.6)
        holes = int(rng.choice([2, 4]))
        discs.append(("disc", centre_mm, radius, thickness, mu, 1.0, angle, holes))
    elif kind == "coin":
        radius, thickness, mu = rng.uniform(8, 14), rng.uniform(1.4, 2.2), rng.uniform(0.6, 1.0)
        discs.append(("disc", centre_mm, radius, thickness, mu, rng.uniform(0.55, 1.0), angle, 0))
    elif kind == "necklace":
        half = rng.uniform(40, 85)
        drop = rng.uniform(60, 150)
        t = np.linspace(-1, 1, 40)
        points = np.column_stack([t * half, drop * (1 - t ** 2) ** 1.3 - drop]) + centre_mm + [0, drop * 0.5]
        points = _wobble(points, rng, 2.0)
        spacing, bead = rng.uniform(2.0, 7.0), rng.uniform(0.8, 2.6)
        tubes.append((sample_curve(points, spacing), bead, rng.uniform(0.4, 1.0)))
        if rng.random() < 0.5:
            low = points[np.argmax(points[:, 1])]
            discs.append(("disc", low + [0, rng.uniform(6, 12)], rng.uniform(4, 9), 2.0, 0.8, 1.0, angle, 0))
    elif kind == "hair_clip":
        length, gap = rng.uniform(35, 55), rng.uniform(2.0, 4.0)
        s = np.linspace(0, length, 30)
        straight = np.column_stack([s, np.full_like(s, -gap / 2)])
        wavy = np.column_stack([s, gap / 2 + 1.2 * np.abs(np.sin(s / length * 5 * math.pi))])
        half_turn = np.linspace(0, math.pi, 8)
        bend = np.column_stack([-gap / 2 * np.sin(half_turn), -gap / 2 * np.cos(half_turn)])
        points = np.vstack([straight[::-1], bend, wavy]) - [length / 2, 0]
        tubes.append((_rotate(points, angle) + centre_mm, rng.uniform(0.5, 0.8), METAL_WIRE_MU))
    elif kind == "safety_pin":
        length, width = rng.uniform(25, 50), rng.uniform(5, 9)
        turn = np.linspace(0, 2 * math.pi, 16)
        coil = np.column_stack([2.5 * np.cos(turn), 2.5 * np.sin(turn)])
        arm_a = np.array([[0, -2.5], [length, -width / 2]])
        arm_b = np.array([[0, 2.5], [length, width / 2]])
        for part in (coil, arm_a, arm_b):
            tubes.append((_rotate(part - [length / 2, 0], angle) + centre_mm, rng.uniform(0.45, 0.7), METAL_WIRE_MU))
        head = np.array([[length - 2, -width / 2 - 1], [length + 3, -width / 2 - 1], [length + 3, width / 2 + 1],
                         [length - 2, width / 2 + 1]])
        tubes.append((_rotate(head - [length / 2, 0], angle) + centre_mm, 1.1, METAL_WIRE_MU))
    elif kind == "underwire":
        radius, span = rng.uniform(45, 70), rng.uniform(2.0, 2.8)
        start = math.pi / 2 - span / 2 + rng.normal(0, 0.2)
        a = np.linspace(start, start + span, 40)
        points = np.column_stack([radius * np.cos(a), radius * np.sin(a)]) + centre_mm - [0, radius * 0.7]
        tubes.append((points, rng.uniform(0.7, 1.2), METAL_WIRE_MU))
    return tubes, discs


def _wobble(points: np.ndarray, rng, amount: float) -> np.ndarray:
    return points + np.cumsum(rng.normal(0, amount / 4, points.shape), axis=0) * 0.3


def object_outline_mm(kind: str, tubes, discs) -> np.ndarray:
    """Points (mm) covering the object, for its bounding box or polygon."""
    points = [p for p, *_ in tubes]
    for _, centre, radius, thickness, mu, squash, angle, holes in discs:
        a = np.linspace(0, 2 * math.pi, 48, endpoint=False)
        ring = np.column_stack([squash * radius * np.cos(a), radius * np.sin(a)])
        points.append(_rotate(ring, -angle) + centre)
    return np.vstack(points)


def buffered_polygon(points_px: np.ndarray, width_px: float, vertices: int = 14) -> np.ndarray:
    """A closed polygon around a polyline: one side forward, the other back (the annotators' outline)."""
    path = points_px[np.linspace(0, len(points_px) - 1, vertices).round().astype(int)]
    tangent = np.gradient(path, axis=0)
    normal = np.column_stack([-tangent[:, 1], tangent[:, 0]])
    normal /= np.maximum(np.hypot(normal[:, 0], normal[:, 1]), 1e-9)[:, None]
    return np.vstack([path + width_px * normal, (path - width_px * normal)[::-1]])


def paint_parts(canvas: Canvas, tubes, discs, to_grid) -> None:
    """Add an object's or device's parts to a (fine) canvas."""
    for points, radius, mu in tubes:
        grid = to_grid(points)
        step = np.hypot(*np.diff(grid, axis=0).T).max(initial=0) if len(grid) > 1 else 0
        dense = grid if step * canvas.pitch > 1.5 * radius else sample_curve(grid, 0.5)  # beads stay beads
        canvas.tube(dense, radius, mu)
    for _, centre, radius, thickness, mu, squash, angle, holes in discs:
        g = to_grid(np.asarray(centre, float)[None])[0]
        r = (radius + 1) / canvas.pitch
        y0, y1 = max(int(g[1] - r), 0), min(int(g[1] + r) + 2, canvas.p.shape[0])
        x0, x1 = max(int(g[0] - r), 0), min(int(g[0] + r) + 2, canvas.p.shape[1])
        if y1 <= y0 or x1 <= x0:
            continue
        yy, xx = np.mgrid[y0:y1, x0:x1].astype(np.float32)
        xx, yy = (xx - g[0]) * canvas.pitch, (yy - g[1]) * canvas.pitch
        value, (u, v) = _disc_p(xx, yy, radius, thickness, mu, squash, angle)
        if holes:  # a button's holes and a raised rim
            for k in range(holes):
                a = 2 * math.pi * k / holes + math.pi / 4
                hole_r = radius * 0.13
                d = np.hypot(u - 0.3 * radius * math.cos(a), v - 0.3 * radius * math.sin(a))
                value = value * np.clip((d - hole_r) / 0.3 + 0.5, 0, 1)
            value = value * (1 + 0.35 * (np.hypot(u, v) > radius * 0.75))
        elif squash > 0:  # a coin's rim
            value = value * (1 + 0.25 * (np.hypot(u / squash, v) > radius * 0.85))
        canvas.p[y0:y1, x0:x1] += value.astype(np.float32)


def device_parts(kind: str, rng, pt: Patient, field_mm: tuple[float, float]):
    """A support device's parts in anatomy-frame mm, and its marker points (ECG snaps)."""
    tubes, discs, markers = [], [], []
    half_w, half_h = field_mm
    if kind == "ecg":
        for _ in range(int(rng.integers(2, 6))):
            snap = np.array([rng.uniform(-1, 1) * pt.half_width * 0.95, rng.uniform(pt.shoulder_y + 20,
                                                                                     pt.diaphragm_y + 40)])
            discs.append(("disc", snap, rng.uniform(3.0, 4.5), 1.6, 0.9, 1.0, 0.0, 0))
            discs.append(("disc", snap, rng.uniform(14, 20), 1.0, 0.01, 1.0, 0.0, 0))  # the foam pad
            target = np.array([rng.choice([-1, 1]) * (half_w + 30), rng.uniform(-half_h, half_h)])
            if rng.random() < 0.5:
                target = np.array([rng.uniform(-half_w, half_w), -half_h - 30])
            mid = (snap + target) / 2 + rng.normal(0, 40, 2)
            tubes.append((np.array([snap, mid, target]), rng.uniform(0.6, 1.0), rng.uniform(0.2, 0.5)))
            markers.append(snap)
    elif kind == "central_line":
        entry = np.array([-pt.half_width * rng.uniform(0.45, 0.7), pt.shoulder_y + rng.uniform(5, 30)])
        tip = np.array([pt.shift(-20) - 18, pt.apex_y + rng.uniform(90, 130)])
        outside = entry + [-rng.uniform(40, 120), -rng.uniform(10, 80)]
        tubes.append((np.array([outside, entry, (entry + tip) / 2 + [0, -10], tip]), 1.0, rng.uniform(0.1, 0.2)))
    elif kind == "endotracheal_tube":
        x0 = pt.shift(-20)
        path = np.array([[x0 + 2, -half_h - 20], [x0 + 1, pt.shoulder_y], [x0, pt.apex_y + rng.uniform(40, 70)]])
        tubes.append((path, 4.5, 0.01))
        tubes.append((path + [2.5, 0], 0.6, 0.3))
    elif kind == "nasogastric_tube":
        x0 = pt.shift(0) + 6
        path = np.array([[x0, -half_h - 20], [x0 + 3, pt.apex_y + 60], [x0 + 12, pt.diaphragm_y - 20],
                         [x0 + 45, pt.diaphragm_y + 35], [x0 + 70, pt.diaphragm_y + 50]])
        tubes.append((path, 1.6, rng.uniform(0.12, 0.25)))
    return tubes, discs, markers


# ------------------------------------------------------------------------------------------------- the image

def _zoom_to(array: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    from scipy.ndimage import zoom

    factors = (shape[0] / array.shape[0], shape[1] / array.shape[1])
    out = zoom(array, factors, order=1, mode="nearest", grid_mode=True)
    return out[:shape[0], :shape[1]]


def _blur_mm(array: np.ndarray, sigma_mm: float, pitch: float, max_px: float = 6.0) -> np.ndarray:
    """Gaussian blur of `sigma_mm`, computed on a down-sampled copy when it would be wide in pixels."""
    from scipy.ndimage import gaussian_filter

    sigma = sigma_mm / pitch
    factor = max(1, int(sigma / max_px))
    if factor == 1:
        return gaussian_filter(array, sigma, mode="nearest")
    h, w = array.shape
    small = array[:h - h % factor, :w - w % factor].reshape(h // factor, factor, w // factor, factor).mean(axis=(1, 3))
    return _zoom_to(gaussian_filter(small, sigma / factor, mode="nearest"), (h, w))


def render_radiograph(rng: np.random.Generator, longer_side: int, positive: bool) -> Radiograph:
    """One radiograph: anatomy, support devices, foreign objects (when `positive`) and the imaging chain."""
    from scipy.ndimage import gaussian_filter

    pt = Patient.random(rng)
    aspect = rng.uniform(0.86, 1.08)  # columns / rows
    rows, columns = (longer_side, int(round(longer_side * aspect))) if aspect < 1 else \
        (int(round(longer_side / aspect)), longer_side)
    field_h = rng.uniform(390, 440) * pt.size ** 0.5  # mm covered by the rows
    detector = Detector(rows, columns, field_h / rows)
    pitch = detector.pitch

    # anatomy on a coarse grid, interpolated to the pixels
    a_scale = min(1.0, pitch / ANATOMY_PITCH_MM)
    a_shape = (max(8, int(round(rows * a_scale))), max(8, int(round(columns * a_scale))))
    a_scale = a_shape[0] / rows
    anatomy = Canvas(a_shape, detector, a_scale)
    gx, gy = detector.grid_mm(anatomy.pitch, a_shape)
    cos, sin = math.cos(pt.tilt), math.sin(pt.tilt)
    dx, dy = gx - pt.offset[0], gy - pt.offset[1]
    ax, ay = cos * dx + sin * dy, -sin * dx + cos * dy  # detector mm -> anatomy frame
    lungs = draw_anatomy(pt, rng, anatomy, ax, ay)
    p = _zoom_to(anatomy.p, (rows, columns)) if a_scale < 1 else anatomy.p

    # objects and devices on a fine canvas per part group, averaged onto the pixels
    fine = max(1, int(math.ceil(pitch / OBJECT_PITCH_MM)))
    overlay = Canvas((rows * fine, columns * fine), detector, fine)
    to_grid = _anatomy_to_grid(pt, overlay)
    radiograph = Radiograph(np.zeros(0, np.uint8), pt.view)
    field_mm = (columns * pitch / 2, rows * pitch / 2)
    device_probability = 0.45 if pt.view == "AP" else 0.2
    for kind in DEVICE_KINDS:
        if rng.random() < (device_probability * 1.4 if kind == "ecg" else device_probability):
            tubes, discs, markers = device_parts(kind, rng, pt, field_mm)
            paint_parts(overlay, tubes, discs, to_grid)
            radiograph.devices.append(kind)
            radiograph.device_points_px += [tuple(to_grid(np.asarray(m)[None])[0] / fine) for m in markers]
    if positive:
        lung_cells = np.argwhere(lungs > 25)
        count = 1 + int(rng.geometric(0.55)) - 1
        for _ in range(min(count, 5)):
            kind = str(rng.choice(OBJECT_KINDS, p=OBJECT_KIND_WEIGHTS))
            row, col = lung_cells[rng.integers(len(lung_cells))]
            centre = _cell_to_anatomy(pt, gx, gy, row, col)
            if kind == "underwire":
                centre = np.array([rng.choice([-1, 1]) * pt.half_width * rng.uniform(0.4, 0.6),
                                   pt.diaphragm_y - rng.uniform(10, 60)])
            elif kind == "necklace":
                centre = np.array([pt.shift(-100) + rng.normal(0, 10), pt.apex_y + rng.uniform(30, 100)])
            tubes, discs = render_object(kind, rng, pt, centre, pitch)
            paint_parts(overlay, tubes, discs, to_grid)
            outline = to_grid(object_outline_mm(kind, tubes, discs)) / fine
            annotation = _annotation(kind, outline, tubes, to_grid, fine, pitch, rows, columns)
            if annotation:
                radiograph.objects.append(ForeignObject(kind, annotation, tuple(outline.mean(axis=0))))
    p = p + overlay.p.reshape(rows, fine, columns, fine).mean(axis=(1, 3))

    # the imaging chain
    left, right, top, bottom = (rng.uniform(0, 0.07, 4) * (rng.random() < 0.6))
    yy, xx = np.ogrid[:rows, :columns]
    exposed = ((xx >= left * columns) & (xx < columns * (1 - right)) & (yy >= top * rows)
               & (yy < rows * (1 - bottom))).astype(np.float32)
    exposed = gaussian_filter(exposed, 1.5 / pitch * 0.5)
    intensity = np.exp(-p) * (0.02 + 0.98 * exposed)
    intensity = intensity + rng.uniform(0.15, 0.45) * _blur_mm(intensity, rng.uniform(20, 40), pitch)
    intensity = _blur_mm(intensity, rng.uniform(0.08, 0.18), pitch)
    quanta = rng.uniform(1.2e4, 4e4) * pitch ** 2  # counts per pixel for unattenuated beam
    counts = intensity * quanta
    counts = counts + np.sqrt(np.maximum(counts, 1)) * rng.standard_normal(counts.shape).astype(np.float32)
    density = -np.log(np.maximum(counts / quanta, 1e-4))
    inside = exposed > 0.5
    lo, hi = np.percentile(density[inside] if inside.any() else density, [rng.uniform(0.5, 3), rng.uniform(99, 99.9)])
    t = (density - lo) / max(hi - lo, 1e-6)
    t = t + rng.uniform(0.4, 1.2) * (t - _blur_mm(t, rng.uniform(6, 14), pitch))  # CR unsharp masking
    gamma = rng.uniform(2.5, 4.5)
    centre = rng.uniform(0.42, 0.55)
    film = 1 / (1 + np.exp(-gamma * (t - centre)))
    f0, f1 = 1 / (1 + math.exp(gamma * centre)), 1 / (1 + math.exp(-gamma * (1 - centre)))
    display = np.clip((film - f0) / (f1 - f0), 0, 1)
    radiograph.pixels = np.rint(display * 255).astype(np.uint8)
    return radiograph


def _cell_to_anatomy(pt: Patient, gx, gy, row: int, col: int) -> np.ndarray:
    cos, sin = math.cos(pt.tilt), math.sin(pt.tilt)
    dx, dy = float(gx[0, col]) - pt.offset[0], float(gy[row, 0]) - pt.offset[1]
    return np.array([cos * dx + sin * dy, -sin * dx + cos * dy])


def _annotation(kind: str, outline_px: np.ndarray, tubes, to_grid, fine: int, pitch: float, rows: int,
                columns: int) -> str:
    """The object's annotation in the official syntax, clipped to the image; "" if it lies outside."""
    margin = 1.5 / pitch  # annotators draw a little outside the object
    lo = np.maximum(np.floor(outline_px.min(axis=0) - margin), 0).astype(int)
    hi = np.minimum(np.ceil(outline_px.max(axis=0) + margin), [columns - 1, rows - 1]).astype(int)
    if np.any(hi - lo < 2):
        return ""
    kind_type = ANNOTATION_TYPE[kind]
    if kind_type in (0, 1):
        return f"{kind_type} {lo[0]} {lo[1]} {hi[0]} {hi[1]}"
    path = to_grid(tubes[0][0]) / fine
    width = tubes[0][1] / pitch + 3.0 / pitch
    polygon = buffered_polygon(path, width)
    polygon[:, 0] = np.clip(polygon[:, 0], 0, columns - 1)
    polygon[:, 1] = np.clip(polygon[:, 1], 0, rows - 1)
    return "2 " + " ".join(str(int(v)) for v in np.rint(polygon).ravel())


# ------------------------------------------------------------------------------------------------- the cohort

def image_rng(seed: int, index: int) -> np.random.Generator:
    """Each image's own stream: an image does not depend on how many come before it."""
    return np.random.default_rng([seed, index])


def image_name(index: int, suffix: str = ".jpg") -> str:
    return f"{FIRST_IMAGE_NUMBER + index:05d}{suffix}"


def generate_image(seed: int, index: int, size: int | None, positive_fraction: float) -> Radiograph:
    rng = image_rng(seed, index)
    positive = bool(rng.random() < positive_fraction)
    longer = size if size else int(rng.integers(SIZE_RANGE[0], SIZE_RANGE[1] + 1))
    return render_radiograph(rng, longer, positive)


def write_jpeg(path: Path, pixels: np.ndarray, quality: int = 92) -> None:
    from PIL import Image

    with atomic_output(path, "wb") as handle:
        Image.fromarray(pixels, mode="L").save(handle, format="JPEG", quality=quality)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=user_path, required=True, help="output folder (input/ and ground_truth/)")
    parser.add_argument("--images", type=int, default=100, help="number of radiographs (default %(default)s)")
    parser.add_argument("--size", type=int, default=None,
                        help=f"longer side in pixels (default: random, {SIZE_RANGE[0]}-{SIZE_RANGE[1]})")
    parser.add_argument("--positive-fraction", type=float, default=0.5,
                        help="fraction of images with foreign objects (default %(default)s)")
    parser.add_argument("--first", type=int, default=0, help="index of the first image (to split a cohort)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--format", choices=("jpeg", "dicom"), default="jpeg",
                        help="jpeg (the challenge's files) or dicom: one CR study per radiograph, `08001.dcm`")


def write_dicom_radiograph(path: Path, radiograph: Radiograph, seed: int, index: int) -> None:
    """The radiograph as a CR chest X-ray, its own study (UIDs from the seed and index)."""
    from ..dicom.synthetic import SyntheticStudy, radiograph_dataset
    from ..io import write_dicom_atomic

    stem = path.name.split(".")[0]
    study = SyntheticStudy(f"object-cxr-{seed}-{index}", stem, study_description="XR CHEST (synthetic)")
    write_dicom_atomic(path, radiograph_dataset(radiograph.pixels, study, radiograph.view))


def run(args: argparse.Namespace) -> int:
    rows = []
    n_objects = 0
    for index in range(args.first, args.first + args.images):
        radiograph = generate_image(args.seed, index, args.size, args.positive_fraction)
        name = image_name(index, ".dcm" if args.format == "dicom" else ".jpg")
        if args.format == "dicom":
            write_dicom_radiograph(args.out / "input" / name, radiograph, args.seed, index)
        else:
            write_jpeg(args.out / "input" / name, radiograph.pixels)
        rows.append(f"{name},{radiograph.annotation}")
        n_objects += len(radiograph.objects)
    write_text_atomic(args.out / "ground_truth" / "annotations.csv", GT_HEADER + "\n" + "\n".join(rows) + "\n")
    log.info("object-cxr-images: %d radiographs, %d foreign objects -> %s", args.images, n_objects, args.out)
    return 0
