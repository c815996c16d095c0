"""Synthetic ROCO-like radiology figures with UMLS concepts and captions (ImageCLEFmed Caption 2021 or 2022).

`python -m medchallenge.synth imageclef-caption-images --edition 2021|2022 --out DIR --images N --seed S
[--split train|valid|test] [--secondary] [--contact-sheet]` writes `DIR/input/<figure id>.jpg` (2022 ids
`ImageCLEFmedCaption_2022_test_000001`, 2021 ids `synpic60001`) and the evaluator's ground-truth folder
`DIR/ground_truth/` (`concepts.tsv`, `captions.csv` in the edition's formats, read as is by
`evaluate.py --edition E`).

A figure is one scene (modality, body region, 0-2 findings with the organ they sit in) drawn as a tissue label map,
turned into CT, MRI, radiograph, ultrasound (sector, speckle), angiogram (vessel tree) or PET (blurred uptake, hot
colour map or inverted grey) intensities, in 1 to 4 panels, with journal habits: arrows and arrowheads at the
finding, panel letters, scale bars, crops, white or black gutters, varied sizes and aspect ratios. Its concepts are
the real UMLS CUIs of the modality, the region, each finding and each organ a finding sits in (when it is not the
region), from `medchallenge/data/imageclef-caption-umls.tsv`; its caption comes from a grammar over the same
concepts (paraphrases, abbreviations, measurements, Unicode dashes, quotes and multiplication signs), so that the
caption names every concept and no other concept of the vocabulary. 2022 figures are PubMed Central-like (many
multi-panel, long captions); 2021 figures are mostly single clinical images with short captions.
"""

from __future__ import annotations

import argparse
import logging
import math
import random
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..io import user_path
from .imageclef_caption import write_ground_truth

log = logging.getLogger("medchallenge.synth.imageclef_caption_images")

VOCABULARY_FILE = Path(__file__).resolve().parents[1] / "data" / "imageclef-caption-umls.tsv"
SPLITS = ("train", "valid", "test")
SYNPIC_BASE = {"train": 10001, "valid": 50001, "test": 60001}  # 2021 ids: synpicNNNNN, one range per split

# Modalities, regions, organs and findings by CUI (names in the vocabulary file).
CT, MRI, XRAY, US, ANGIO, PET = "C0040405", "C0024485", "C1306645", "C0041618", "C0002978", "C0032743"
CHEST, ABDOMEN, BRAIN, PELVIS, SPINE, LEG = "C0817096", "C0000726", "C0006104", "C0030797", "C0037949", "C0023216"
LUNG, HEART, AORTA, LIVER, KIDNEY = "C0024109", "C0018787", "C0003483", "C0023884", "C0022646"
(MASS, CYST, EFFUSION, FRACTURE, STENT, CALCIFICATION, NODULE, CARDIOMEGALY, HEMORRHAGE, ABSCESS, ANEURYSM,
 HYDROCEPHALUS, PNEUMOTHORAX, CALCULUS, ASCITES, METASTASIS) = (
    "C0577559", "C0010709", "C0032227", "C0016658", "C0038257", "C0006660", "C0034079", "C0018800", "C0019080",
    "C0000833", "C0002940", "C0020255", "C0032326", "C0022650", "C0003962", "C0027627")

# Which regions each modality shows (relative weights).
REGIONS_BY_MODALITY = {
    CT: {CHEST: 3, ABDOMEN: 3, BRAIN: 2, PELVIS: 1, SPINE: 1, LEG: 1},
    MRI: {BRAIN: 3, SPINE: 2, ABDOMEN: 2, PELVIS: 1, LEG: 1},
    XRAY: {CHEST: 3, SPINE: 1, PELVIS: 1, LEG: 2},
    US: {ABDOMEN: 3, PELVIS: 1},
    ANGIO: {BRAIN: 2, ABDOMEN: 2, LEG: 1},
    PET: {CHEST: 2, ABDOMEN: 1, BRAIN: 1},
}
MODALITY_WEIGHTS = {CT: 4, MRI: 3, XRAY: 3, US: 2, ANGIO: 1.5, PET: 1.5}
# Findings a region can show, each with the organs it may sit in (None: the region itself).
FINDINGS_BY_REGION = {
    CHEST: {NODULE: (LUNG,), MASS: (LUNG,), EFFUSION: (None,), PNEUMOTHORAX: (None,), CARDIOMEGALY: (None,),
            METASTASIS: (LUNG,), CALCIFICATION: (AORTA,), ANEURYSM: (AORTA,), STENT: (AORTA,)},
    ABDOMEN: {MASS: (LIVER, KIDNEY), CYST: (LIVER, KIDNEY), ABSCESS: (LIVER,), CALCULUS: (KIDNEY,), ASCITES: (None,),
              METASTASIS: (LIVER,), ANEURYSM: (AORTA,), STENT: (AORTA,), CALCIFICATION: (AORTA,)},
    BRAIN: {MASS: (None,), HEMORRHAGE: (None,), HYDROCEPHALUS: (None,), ABSCESS: (None,), CYST: (None,),
            METASTASIS: (None,), CALCIFICATION: (None,), ANEURYSM: (None,), STENT: (None,)},
    PELVIS: {FRACTURE: (None,), MASS: (None,), CYST: (None,)},
    SPINE: {FRACTURE: (None,), METASTASIS: (None,)},
    LEG: {FRACTURE: (None,), ANEURYSM: (None,), STENT: (None,)},
}
# What each modality can depict (findings outside these sets are not drawn with it).
FINDINGS_BY_MODALITY = {
    CT: None,  # all
    MRI: {MASS, CYST, HEMORRHAGE, HYDROCEPHALUS, ABSCESS, METASTASIS, FRACTURE, ANEURYSM, ASCITES},
    XRAY: {NODULE, MASS, EFFUSION, PNEUMOTHORAX, CARDIOMEGALY, FRACTURE},
    US: {MASS, CYST, CALCULUS, ASCITES, ABSCESS},
    ANGIO: {ANEURYSM, STENT},
    PET: {MASS, METASTASIS, NODULE},
}

# Tissue labels of a panel's label map and their intensity per modality.
BG, AIR, SOFT, ORGAN, FLUID, BONE, VESSEL, CALC, LESION, BLOOD, RIM = range(11)
INTENSITY = {
    CT: (0.0, 0.04, 0.36, 0.50, 0.30, 0.92, 0.72, 1.0, 0.43, 0.66, 0.74),
    MRI: (0.0, 0.03, 0.58, 0.40, 0.95, 0.14, 0.06, 0.04, 0.72, 0.30, 0.62),
    XRAY: (0.0, 0.14, 0.42, 0.50, 0.47, 0.88, 0.50, 1.0, 0.62, 0.50, 0.52),
    US: (0.0, 0.85, 0.58, 0.42, 0.02, 0.95, 0.04, 1.0, 0.72, 0.30, 0.80),
    PET: (0.0, 0.0, 0.06, 0.22, 0.03, 0.05, 0.25, 0.05, 0.95, 0.20, 0.90),
}
SIZED_FINDINGS = {MASS, CYST, NODULE, ABSCESS, ANEURYSM, CALCULUS}
PLURAL_FINDINGS = {CALCIFICATION, METASTASIS}
# How many captions keep to the house style (first phrase of every concept, no optional measurement); the others
# paraphrase freely.
HOUSE_STYLE = {"2022": 0.7, "2021": 0.75}


@dataclass(frozen=True)
class Concept:
    cui: str
    kind: str  # modality, region, organ or finding
    name: str
    phrases: tuple[str, ...]


@lru_cache(maxsize=1)
def vocabulary() -> dict[str, Concept]:
    """The vocabulary file's concepts by CUI, in file order."""
    concepts = {}
    lines = [line for line in VOCABULARY_FILE.read_text(encoding="utf-8").splitlines()
             if line and not line.startswith("#")]
    for line in lines[1:]:
        cui, kind, name, phrases = line.split("\t")
        concepts[cui] = Concept(cui, kind, name, tuple(phrases.split(";")))
    return concepts


@dataclass
class Figure:
    """One figure's scene and how it is laid out."""

    figure_id: str
    modality: str
    region: str
    findings: list[tuple[str, str | None]]  # (finding CUI, organ CUI or None)
    panels: int = 1
    arrows: str = ""  # "", "arrow", "arrows" or "arrowhead": what the figure points at its finding with
    sizes: dict[str, str] = field(default_factory=dict)  # finding CUI -> measurement text

    @property
    def concepts(self) -> list[str]:
        """Modality, region, organs (other than the region), findings: each CUI once."""
        organs = [organ for _, organ in self.findings if organ and organ != self.region]
        return list(dict.fromkeys([self.modality, self.region, *organs, *(f for f, _ in self.findings)]))


def _weighted(rng: random.Random, weights: dict):
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def figure_ids(edition: str, split: str, count: int) -> list[str]:
    """The edition's ids: `ImageCLEFmedCaption_2022_<split>_000001` or `synpic<number>` (2021, MedPix-style)."""
    if edition == "2022":
        return [f"ImageCLEFmedCaption_2022_{split}_{n:06d}" for n in range(1, count + 1)]
    return [f"synpic{SYNPIC_BASE[split] + n}" for n in range(count)]


def sample_figure(rng: random.Random, figure_id: str, edition: str) -> Figure:
    """A random scene: modality, a region it shows, 0-2 findings it can depict there, panels and arrows."""
    modality = _weighted(rng, MODALITY_WEIGHTS)
    region = _weighted(rng, REGIONS_BY_MODALITY[modality])
    allowed = FINDINGS_BY_MODALITY[modality]
    options = [f for f in FINDINGS_BY_REGION[region] if allowed is None or f in allowed]
    count = rng.choices((0, 1, 2), weights=(0.12, 0.6, 0.28))[0] if modality != ANGIO else rng.choice((1, 1, 2))
    chosen = rng.sample(options, min(count, len(options)))
    findings = [(f, rng.choice(FINDINGS_BY_REGION[region][f])) for f in chosen]
    multi = 0.35 if edition == "2022" else 0.08
    panels = rng.choice((2, 2, 3, 4)) if rng.random() < multi else 1
    arrows = ""
    if findings and rng.random() < (0.55 if edition == "2022" else 0.3):
        arrows = rng.choices(("arrow", "arrows", "arrowhead"), weights=(0.6, 0.2, 0.2))[0]
    sizes = {f: _measurement(rng) for f, _ in findings if f in SIZED_FINDINGS}
    return Figure(figure_id, modality, region, findings, panels, arrows, sizes)


def _measurement(rng: random.Random) -> str:
    style = rng.random()
    if style < 0.5:
        return f"{rng.randint(10, 80) / 10:g} cm"
    if style < 0.8:
        return f"{rng.randint(5, 60)} × {rng.randint(5, 60)} mm"
    low = rng.randint(1, 5)
    return f"{low}–{low + rng.randint(1, 3)} cm"


# ---------------------------------------------------------------------------------------------------------------
# Captions
# ---------------------------------------------------------------------------------------------------------------


class Writer:
    """An author's wording: a house style (every choice its first, most common option) for most figures, free
    paraphrase for the others; one random stream for the caption."""

    def __init__(self, rng: random.Random, house_style: float):
        self.rng, self.plain = rng, rng.random() < house_style

    def pick(self, options: tuple[str, ...] | list[str]) -> str:
        return options[0] if self.plain else self.rng.choice(options)

    def maybe(self, probability: float) -> bool:
        """An optional habit (a measurement, a laterality): never in the house style."""
        return not self.plain and self.rng.random() < probability

    def phrase(self, cui: str) -> str:
        return self.pick(vocabulary()[cui].phrases)


def _article(words: str) -> str:
    return ("an " if words[0].lower() in "aeiou" else "a ") + words


def _finding_text(writer: Writer, figure: Figure, finding: str, organ: str | None) -> str:
    rng = writer.rng
    words = writer.phrase(finding)
    if finding == FRACTURE and figure.region == SPINE:
        level = rng.choice("TL")
        words += f" of the {level}{rng.randint(1, 12 if level == 'T' else 5)} vertebral body"
    elif finding in (EFFUSION, PNEUMOTHORAX) and writer.maybe(0.5):
        words = f"{rng.choice(('right', 'left', 'bilateral'))} {words}"
    if finding in figure.sizes and writer.maybe(0.6):
        words = f"{figure.sizes[finding]} {words}"
    if finding not in PLURAL_FINDINGS:
        words = _article(words)
    if organ and organ != figure.region:
        words += f" {writer.pick(('in', 'in', 'of', 'within'))} the {writer.phrase(organ)}"
    return words


def _joined(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def caption(rng: random.Random, figure: Figure, edition: str) -> str:
    """The figure's caption, naming each of its concepts (2022: PMC style; 2021: short clinical style)."""
    writer = Writer(rng, HOUSE_STYLE[edition])
    modality = writer.phrase(figure.modality)
    if modality in ("computed tomography", "magnetic resonance imaging") and writer.maybe(0.5):
        modality += f" ({vocabulary()[figure.modality].phrases[0]})"  # spelled out, then abbreviated
    region = writer.phrase(figure.region)
    findings = [_finding_text(writer, figure, f, o) for f, o in figure.findings]
    if not findings:
        findings = [writer.pick(("no acute abnormality", "normal findings", "no focal lesion"))]
    marker = f" ({figure.arrows})" if figure.arrows else ""
    if edition == "2021":
        template = writer.pick(("{m} of the {r} shows {f}{a}.", "{F}{a} in the {r} on {m}.", "{m} {r}: {f}{a}."))
        text = template.format(m=modality, r=region, f=_joined(findings), F=_joined(findings), a=marker)
        return text[0].upper() + text[1:]
    view = writer.pick(_VIEWS[figure.modality])
    if view and not modality[:2].isupper():
        modality = modality[0].lower() + modality[1:]
    verb = writer.pick(("shows", "showing", "demonstrates", "reveals", "with"))
    prefix = ""
    if figure.panels > 1:
        letters = "ABCD"[:figure.panels]
        prefix = writer.pick((f"({letters[0]}–{letters[-1]}) ", f"({', '.join(letters)}) ",
                              f"{letters[0]}–{letters[-1]}: ", ""))
    tail = writer.pick((".", "; “follow-up” was advised.", ", cannot exclude malignancy.", " (scale bar, 1 cm)."))
    text = f"{view}{modality} of the {region} {verb} {_joined(findings)}{marker}{tail}"
    return prefix + text[0].upper() + text[1:]


_VIEWS = {
    CT: ("axial ", "", "coronal ", "sagittal ", "contrast-enhanced "),
    MRI: ("axial T2-weighted ", "", "T1-weighted ", "sagittal ", "coronal "),
    XRAY: ("frontal ", "", "anteroposterior ", "lateral "),
    US: ("transverse ", "", "longitudinal "),
    ANGIO: ("selective ", "", "lateral "),
    PET: ("whole-body ", "", "axial fused "),
}


# ---------------------------------------------------------------------------------------------------------------
# Drawing
# ---------------------------------------------------------------------------------------------------------------


class Canvas:
    """A panel's label map with the coordinate grids to draw ellipses, bands and discs in it."""

    def __init__(self, height: int, width: int, rng: random.Random):
        self.h, self.w, self.rng = height, width, rng
        self.labels = np.zeros((height, width), np.uint8)
        self.yy, self.xx = np.mgrid[0:height, 0:width].astype(np.float32)
        self.organs: dict[str, tuple[float, float, float, float]] = {}  # organ -> (cy, cx, ry, rx) in pixels
        self.bones: list[tuple[float, float, float, float]] = []

    def jitter(self, value: float, spread: float = 0.04) -> float:
        return value + self.rng.uniform(-spread, spread)

    def ellipse_mask(self, cy: float, cx: float, ry: float, rx: float, angle: float = 0.0) -> np.ndarray:
        """Fractions of the panel (cy, ry of the height; cx, rx of the width)."""
        y, x = (self.yy - cy * self.h) / max(ry * self.h, 1), (self.xx - cx * self.w) / max(rx * self.w, 1)
        if angle:
            c, s = math.cos(angle), math.sin(angle)
            y, x = c * y - s * x, s * y + c * x
        return y * y + x * x <= 1.0

    def ellipse(self, label: int, cy: float, cx: float, ry: float, rx: float, angle: float = 0.0,
                organ: str | None = None, inside: int | None = None) -> None:
        mask = self.ellipse_mask(cy, cx, ry, rx, angle)
        if inside is not None:
            mask &= self.labels == inside
        self.labels[mask] = label
        if organ:
            self.organs[organ] = (cy * self.h, cx * self.w, ry * self.h, rx * self.w)
        if label == BONE:
            self.bones.append((cy * self.h, cx * self.w, ry * self.h, rx * self.w))

    def disc(self, label: int, y: float, x: float, radius: float, inside: np.ndarray | None = None) -> None:
        """A disc in pixels."""
        mask = (self.yy - y) ** 2 + (self.xx - x) ** 2 <= radius * radius
        if inside is not None:
            mask &= inside
        self.labels[mask] = label

    def point_in(self, organ: str, spread: float = 0.55) -> tuple[float, float, float]:
        """A random point inside an organ (pixels) and the organ's smaller radius."""
        cy, cx, ry, rx = self.organs[organ]
        angle, radius = self.rng.uniform(0, 2 * math.pi), spread * math.sqrt(self.rng.random())
        return cy + radius * ry * math.sin(angle), cx + radius * rx * math.cos(angle), min(ry, rx)


def _layout(canvas: Canvas, figure: Figure) -> None:
    """Draw the region's anatomy (axial sections for CT/MRI/PET/US, projections for radiographs)."""
    c, region, j = canvas, figure.region, canvas.jitter
    found = {f for f, _ in figure.findings}
    projection = figure.modality == XRAY
    if figure.modality == US:
        c.labels[:] = SOFT  # the sector is filled with tissue
    if region == CHEST:
        heart = 1.45 if CARDIOMEGALY in found else 1.0
        if projection:
            c.ellipse(SOFT, 0.56, 0.5, 0.5, j(0.44))
            for side in (0.3, 0.7):
                c.ellipse(AIR, j(0.45, 0.02), j(side, 0.02), 0.3, 0.15, organ=LUNG if side < 0.5 else None)
            for k in range(6):  # ribs: thin bony arcs across the lungs
                y = 0.2 + 0.09 * k
                for side in (0.3, 0.7):
                    c.ellipse(BONE, y, side, 0.012, 0.17, angle=0.25 if side < 0.5 else -0.25)
            c.ellipse(ORGAN, j(0.63, 0.02), 0.54, 0.14 * heart, 0.15 * heart, organ=HEART)
            c.ellipse(BONE, 0.5, 0.5, 0.5, 0.025)
        else:
            c.ellipse(SOFT, 0.5, 0.5, j(0.36), j(0.46))
            for side in (0.29, 0.71):
                c.ellipse(AIR, j(0.46, 0.02), side, j(0.26, 0.02), j(0.16, 0.02), organ=LUNG if side < 0.5 else None)
            lung = c.labels == AIR
            for _ in range(40):  # vessel markings in the lungs
                c.disc(VESSEL, c.rng.uniform(0, c.h), c.rng.uniform(0, c.w), 1.2 + c.rng.random(), lung)
            c.ellipse(ORGAN, j(0.52, 0.02), 0.46, 0.13 * heart, 0.12 * heart, organ=HEART)
            aorta = 2.2 if ANEURYSM in found else 1.0
            c.ellipse(VESSEL, 0.62, 0.55, 0.04 * aorta, 0.03 * aorta, organ=AORTA)
            c.ellipse(BONE, 0.8, 0.5, 0.06, 0.05)
    elif region == ABDOMEN:
        if figure.modality == US:
            c.ellipse(ORGAN, 0.55, 0.45, 0.45, 0.5, organ=LIVER)
            c.ellipse(ORGAN, j(0.7), j(0.6), 0.14, 0.2, angle=0.4, organ=KIDNEY)
            c.ellipse(SOFT, 0.7 + 0.0, 0.6, 0.05, 0.09, angle=0.4, inside=ORGAN)
            return
        c.ellipse(SOFT, 0.5, 0.5, j(0.36), j(0.46))
        c.ellipse(ORGAN, j(0.44), j(0.31), 0.2, j(0.17), organ=LIVER)
        c.ellipse(ORGAN, 0.45, 0.76, 0.1, 0.07)  # spleen
        for side in (0.36, 0.64):
            c.ellipse(ORGAN, j(0.64, 0.02), side, 0.07, 0.05, organ=KIDNEY if side < 0.5 else None)
        aorta = 2.0 if ANEURYSM in found else 1.0
        c.ellipse(VESSEL, 0.6, 0.52, 0.035 * aorta, 0.03 * aorta, organ=AORTA)
        c.ellipse(BONE, 0.74, 0.5, 0.06, 0.05)
        for _ in range(5):  # bowel gas
            c.ellipse(AIR, c.rng.uniform(0.3, 0.6), c.rng.uniform(0.45, 0.65), 0.03, 0.03, inside=SOFT)
    elif region == BRAIN:
        c.ellipse(BONE, 0.5, 0.5, j(0.44, 0.02), j(0.37, 0.02))
        c.ellipse(ORGAN, 0.5, 0.5, 0.405, 0.335, organ=BRAIN)
        scale = 1.9 if HYDROCEPHALUS in found else 1.0
        for side in (0.45, 0.55):
            c.ellipse(FLUID, 0.48, side, 0.1 * scale, 0.025 * scale, angle=0.3 if side < 0.5 else -0.3)
        c.ellipse(FLUID, 0.5, 0.5, 0.38, 0.004)  # falx / interhemispheric fissure
    elif region == PELVIS:
        if figure.modality == US:
            c.ellipse(FLUID, 0.5, 0.5, 0.3, 0.32)  # bladder
            c.ellipse(ORGAN, 0.78, 0.5, 0.15, 0.2)
            return
        c.ellipse(SOFT, 0.5, 0.5, j(0.38), j(0.47))
        for side in (0.22, 0.78):
            c.ellipse(BONE, 0.4, side, 0.22, 0.08, angle=0.5 if side < 0.5 else -0.5)
            c.ellipse(BONE, 0.72, 0.25 if side < 0.5 else 0.75, 0.07, 0.06)
        c.ellipse(FLUID, 0.58, 0.5, 0.1, 0.12)
        c.ellipse(BONE, 0.32, 0.5, 0.08, 0.06)
    elif region == SPINE:
        c.labels[:, int(0.15 * c.w):int(0.9 * c.w)] = SOFT
        body_h = 0.12
        for k in range(-1, 9):
            y = 0.06 + k * (body_h + 0.02)
            c.ellipse(BONE, y, 0.42, body_h / 2, 0.14)
            c.ellipse(ORGAN, y + body_h / 2 + 0.01, 0.42, 0.008, 0.13)  # disc
        c.labels[:, int(0.6 * c.w):int(0.68 * c.w)] = FLUID  # spinal canal
    elif region == LEG:
        c.labels[:, int(0.25 * c.w):int(0.75 * c.w)] = SOFT
        c.ellipse(BONE, 0.22, 0.5, 0.26, 0.085)  # femur
        c.ellipse(BONE, 0.78, 0.49, 0.26, 0.075)  # tibia
        c.ellipse(BONE, 0.8, 0.64, 0.22, 0.025)  # fibula
        c.ellipse(BONE, 0.45, 0.56, 0.04, 0.05)  # patella


def _finding(canvas: Canvas, figure: Figure, finding: str, organ: str | None) -> list[tuple[float, float]]:
    """Draw one finding; returns the points an arrow may point at (pixels)."""
    c, rng = canvas, canvas.rng
    where = organ or figure.region
    if finding in (CARDIOMEGALY, HYDROCEPHALUS):  # drawn by the layout
        cy, cx, _, _ = c.organs.get(HEART if finding == CARDIOMEGALY else BRAIN)
        return [(cy, cx)]
    if finding == EFFUSION:
        mask = (c.labels == AIR) & (c.yy > (0.56 if figure.modality != XRAY else 0.62) * c.h)
        c.labels[mask] = FLUID
        ys, xs = np.nonzero(mask)
        return [(float(ys.mean()), float(xs.mean()))] if len(ys) else []
    if finding == PNEUMOTHORAX:
        cy, cx, ry, rx = c.organs[LUNG]
        rim = c.ellipse_mask(cy / c.h, cx / c.w, ry / c.h, rx / c.w) & ~c.ellipse_mask(
            cy / c.h, (cx + 0.35 * rx) / c.w, 0.6 * ry / c.h, 0.55 * rx / c.w)
        c.labels[rim] = BG if figure.modality == XRAY else AIR  # no lung markings at the periphery
        return [(cy, cx - 0.8 * rx)]
    if finding == ASCITES:
        body = c.ellipse_mask(0.5, 0.5, 0.36, 0.46) & ~c.ellipse_mask(0.5, 0.5, 0.3, 0.4)
        if figure.modality == US:
            body = c.ellipse_mask(0.2, 0.3, 0.08, 0.5)
        c.labels[body & (c.labels != BONE)] = FLUID
        ys, xs = np.nonzero(body)
        k = rng.randrange(len(ys))
        return [(float(ys[k]), float(xs[k]))]
    if finding == FRACTURE:
        by, bx, bry, brx = rng.choice(c.bones or [(c.h / 2, c.w / 2, c.h / 4, c.w / 8)])
        y = by + rng.uniform(-0.4, 0.4) * bry
        slope, width = rng.uniform(-0.4, 0.4), max(1.5, 0.006 * c.w)
        line = np.abs(c.yy - y - slope * (c.xx - bx)) <= width
        line &= np.abs(c.xx - bx) <= 1.2 * brx
        c.labels[line & (c.labels == BONE)] = SOFT
        return [(y, bx)]
    if finding == STENT and figure.region not in (CHEST, ABDOMEN):
        y, x, r = c.h * rng.uniform(0.3, 0.7), c.w * rng.uniform(0.35, 0.65), 0.05 * c.w
        c.disc(CALC, y, x, r)
        c.disc(VESSEL, y, x, 0.7 * r)
        return [(y, x)]
    if organ is None and finding in (MASS, CYST, ABSCESS, METASTASIS, CALCIFICATION, HEMORRHAGE, ANEURYSM):
        organ = where if where in c.organs else None
    if organ is None or organ not in c.organs:  # pelvis and spine: in the soft tissue / bone of the section
        c.organs.setdefault(where, (0.5 * c.h, 0.5 * c.w, 0.25 * c.h, 0.25 * c.w))
        organ = where
    cy, cx, ry, rx = c.organs[organ]
    inside = c.ellipse_mask(cy / c.h, cx / c.w, ry / c.h, rx / c.w)
    if finding in (STENT, ANEURYSM, CALCIFICATION) and organ == AORTA:
        if finding == STENT:
            c.disc(CALC, cy, cx, 0.9 * min(ry, rx), inside)
            c.disc(VESSEL, cy, cx, 0.75 * min(ry, rx), inside)
        elif finding == ANEURYSM:
            c.disc(BLOOD, cy, cx + 0.3 * rx, 0.6 * min(ry, rx), inside)  # mural thrombus
        else:
            for _ in range(3):
                angle = rng.uniform(0, 2 * math.pi)
                c.disc(CALC, cy + 0.9 * ry * math.sin(angle), cx + 0.9 * rx * math.cos(angle), max(1.5, 0.2 * rx))
        return [(cy, cx)]
    points = []
    count = {METASTASIS: rng.randint(3, 6), CALCIFICATION: rng.randint(3, 7)}.get(finding, 1)
    for _ in range(count):
        y, x, r = c.point_in(organ)
        size = {MASS: 0.35, CYST: 0.3, ABSCESS: 0.32, NODULE: 0.12, METASTASIS: 0.13, CALCIFICATION: 0.045,
                CALCULUS: 0.12, HEMORRHAGE: 0.3, ANEURYSM: 0.18}[finding] * r * rng.uniform(0.75, 1.3)
        size = max(size, 2.0)
        if finding == CYST:
            c.disc(RIM if figure.modality != US else SOFT, y, x, size * 1.08, inside)
            c.disc(FLUID, y, x, size, inside)
        elif finding == ABSCESS:
            c.disc(RIM, y, x, size, inside)
            c.disc(FLUID, y, x, size * 0.7, inside)
        elif finding in (CALCIFICATION, CALCULUS):
            c.disc(CALC, y, x, size, inside)
        elif finding == HEMORRHAGE:
            c.disc(BLOOD, y, x, size, inside)
        elif finding == ANEURYSM:
            c.disc(VESSEL, y, x, size, inside)
        else:
            c.labels[c.ellipse_mask(y / c.h, x / c.w, size / c.h, 1.2 * size / c.w, rng.uniform(0, 3)) & inside] = LESION
        points.append((y, x))
    return points


def _angiogram(canvas: Canvas, figure: Figure) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """A digital subtraction angiogram: dark contrast-filled vessel tree on a light background."""
    from PIL import Image, ImageDraw

    c, rng = canvas, canvas.rng
    image = Image.new("L", (c.w, c.h), int(rng.uniform(190, 225)))
    draw = ImageDraw.Draw(image)
    segments = []

    def branch(x: float, y: float, angle: float, length: float, width: float, depth: int) -> None:
        if depth == 0 or width < 1:
            return
        x2, y2 = x + length * math.cos(angle), y + length * math.sin(angle)
        draw.line((x, y, x2, y2), fill=int(rng.uniform(30, 70)), width=int(width))
        segments.append(((x + x2) / 2, (y + y2) / 2, width))
        for turn in (-1, 1):
            if rng.random() < 0.85:
                branch(x2, y2, angle + turn * rng.uniform(0.25, 0.7), length * rng.uniform(0.6, 0.8), width * 0.7,
                       depth - 1)

    scale = min(c.w, c.h)
    if figure.region == BRAIN:
        branch(c.w * 0.5, c.h * 0.98, -math.pi / 2, 0.3 * scale, 0.035 * scale, 6)
    elif figure.region == ABDOMEN:
        draw.line((c.w * 0.5, 0, c.w * 0.5, c.h), fill=50, width=int(0.07 * scale))
        for y in np.linspace(0.15, 0.85, 5):
            side = rng.choice((-1, 1))
            branch(c.w * 0.5, c.h * y, math.pi / 2 - side * math.pi / 2 + rng.uniform(-0.3, 0.3),
                   0.2 * scale, 0.03 * scale, 4)
    else:
        for x in (0.4, 0.62):
            draw.line((c.w * x, 0, c.w * (x + rng.uniform(-0.05, 0.05)), c.h), fill=55, width=int(0.04 * scale))
            for y in np.linspace(0.1, 0.8, 4):
                branch(c.w * x, c.h * y, math.pi / 2 + rng.choice((-1, 1)) * rng.uniform(0.4, 0.9), 0.2 * scale,
                       0.02 * scale, 3)
    points = []
    for finding, _ in figure.findings:
        x, y, width = max(segments, key=lambda s: s[2] * rng.random())
        if finding == ANEURYSM:
            r = width * rng.uniform(1.2, 2.0)
            draw.ellipse((x - r, y - r, x + r, y + r), fill=40)
        else:  # stent: a mesh over a vessel segment
            r = max(width * 0.9, 3)
            for k in np.linspace(-2.5 * r, 2.5 * r, 10):
                draw.line((x + k - r, y - r, x + k + r, y + r), fill=150, width=1)
                draw.line((x + k - r, y + r, x + k + r, y - r), fill=150, width=1)
        points.append((y, x))
    return np.asarray(image, np.float32) / 255.0, points


def _blur(values: np.ndarray, radius: float) -> np.ndarray:
    from PIL import Image, ImageFilter

    if radius <= 0:
        return values
    image = Image.fromarray(np.clip(values * 255, 0, 255).astype(np.uint8))
    return np.asarray(image.filter(ImageFilter.GaussianBlur(radius)), np.float32) / 255.0


def render_panel(figure: Figure, rng: random.Random, height: int, width: int) -> tuple[np.ndarray, list]:
    """One panel as uint8 (H, W) grey or (H, W, 3) colour, and the finding points (pixels) arrows may aim at."""
    canvas = Canvas(height, width, rng)
    nprng = np.random.default_rng(rng.randrange(2**32))
    if figure.modality == ANGIO:
        values, points = _angiogram(canvas, figure)
        values = _blur(values, 1.0) + nprng.normal(0, 0.02, values.shape).astype(np.float32)
        return np.clip(values * 255, 0, 255).astype(np.uint8), points
    _layout(canvas, figure)
    points = [p for f, o in figure.findings for p in _finding(canvas, figure, f, o)]
    table = np.asarray(INTENSITY[figure.modality], np.float32)
    values = table[canvas.labels]
    if figure.modality == CT and rng.random() < 0.3:  # another window
        values = np.clip((values - 0.25) * 1.6, 0, 1)
    if figure.modality == XRAY:
        values = _blur(values, 0.012 * min(height, width)) + nprng.normal(0, 0.015, values.shape).astype(np.float32)
    elif figure.modality == US:
        speckle = nprng.rayleigh(0.8, values.shape).astype(np.float32)
        values = _blur(values, 1.5) * speckle
        apex, radius = (-0.05 * height, width / 2), 1.0 * height
        distance = np.hypot(canvas.yy - apex[0], canvas.xx - apex[1])
        angle = np.arctan2(canvas.xx - apex[1], canvas.yy - apex[0])
        values[(distance > radius) | (np.abs(angle) > 0.62) | (distance < 0.1 * height)] = 0.0
    elif figure.modality == PET:
        values = _blur(values, 0.02 * min(height, width)) + nprng.normal(0, 0.02, values.shape).astype(np.float32)
    else:
        values = _blur(values, 0.8) + nprng.normal(0, 0.03, values.shape).astype(np.float32)
    values = np.clip(values, 0, 1)
    if figure.modality == PET:
        if rng.random() < 0.5:
            hot = np.stack([np.clip(3 * values, 0, 1), np.clip(3 * values - 1, 0, 1), np.clip(3 * values - 2, 0, 1)], -1)
            return (hot * 255).astype(np.uint8), points
        values = 1.0 - values  # black uptake on white, as PET is often shown
    return (values * 255).astype(np.uint8), points


def _draw_arrow(draw, tip: tuple[float, float], style: str, colour, length: float, rng: random.Random) -> None:
    """An arrow (shaft + head) or an arrowhead pointing at `tip` (x, y) from a random direction."""
    angle = rng.uniform(0, 2 * math.pi)
    dx, dy = math.cos(angle), math.sin(angle)
    x, y = tip[0] + 0.25 * length * dx, tip[1] + 0.25 * length * dy
    head = 0.4 * length
    left = (x + head * (dx * 0.87 - dy * 0.5), y + head * (dy * 0.87 + dx * 0.5))
    right = (x + head * (dx * 0.87 + dy * 0.5), y + head * (dy * 0.87 - dx * 0.5))
    draw.polygon([(x, y), left, right], fill=colour)
    if style != "arrowhead":
        draw.line((x + 0.5 * head * dx, y + 0.5 * head * dy, x + length * dx, y + length * dy), fill=colour,
                  width=max(2, int(length / 10)))


def render_figure(figure: Figure, rng: random.Random):
    """The whole figure as a PIL image: its panels with arrows, letters and scale bars, on a gutter."""
    from PIL import Image, ImageDraw

    colour_marks = rng.random() < 0.3
    columns = {1: 1, 2: 2, 3: 3, 4: 2}[figure.panels]
    rows = math.ceil(figure.panels / columns)
    base = rng.randint(260, 620) if figure.panels == 1 else rng.randint(180, 320)
    aspect = rng.uniform(0.75, 1.35)
    ph, pw = int(base), int(base * aspect)
    gutter = rng.choice((0, 4, 8))
    background = rng.choice((255, 0, 255))
    panels, hot = [], False
    for _ in range(figure.panels):
        pixels, points = render_panel(figure, rng, ph, pw)
        hot |= pixels.ndim == 3
        image = Image.fromarray(pixels).convert("RGB")
        if rng.random() < 0.3:  # a crop, scaled back to the panel size
            left, top = int(rng.uniform(0, 0.15) * pw), int(rng.uniform(0, 0.15) * ph)
            box = (left, top, left + int(0.85 * pw), top + int(0.85 * ph))
            image = image.crop(box).resize((pw, ph))
            points = [((y - top) / 0.85, (x - left) / 0.85) for y, x in points]
        draw = ImageDraw.Draw(image)
        if figure.arrows and points:
            colour = rng.choice(((255, 255, 0), (255, 40, 40))) if colour_marks else (255, 255, 255)
            aimed = points if figure.arrows == "arrows" else points[:1]
            for y, x in aimed[:3]:
                _draw_arrow(draw, (x, y), figure.arrows, colour, 0.12 * min(ph, pw), rng)
        if rng.random() < 0.3:  # scale bar
            bar = int(0.15 * pw)
            draw.rectangle((pw - bar - 10, ph - 14, pw - 10, ph - 10), fill=(255, 255, 255))
        panels.append(image)
    figure_image = Image.new("RGB", (columns * pw + (columns + 1) * gutter, rows * ph + (rows + 1) * gutter),
                             (background,) * 3)
    for index, panel in enumerate(panels):
        row, column = divmod(index, columns)
        x, y = gutter + column * (pw + gutter), gutter + row * (ph + gutter)
        if figure.panels > 1:  # panel letters
            draw = ImageDraw.Draw(panel)
            letter = "ABCD"[index] if rng.random() < 0.7 else "abcd"[index]
            draw.rectangle((2, 2, 16, 16), fill=(0, 0, 0))
            draw.text((5, 3), letter, fill=(255, 255, 255))
        figure_image.paste(panel, (x, y))
    coloured = colour_marks and bool(figure.arrows) or figure.modality == PET and hot
    return figure_image if coloured or rng.random() < 0.3 else figure_image.convert("L")


# ---------------------------------------------------------------------------------------------------------------
# Cohort
# ---------------------------------------------------------------------------------------------------------------


def figure_rng(seed: int, split: str, edition: str, index: int) -> random.Random:
    """Each figure's own random stream: the same figure for the same (seed, split, edition, index)."""
    return random.Random(f"{seed}/{split}/{edition}/{index}")


def generate_figure(edition: str, split: str, seed: int, index: int, figure_id: str):
    """(figure, PIL image, caption) of one figure."""
    rng = figure_rng(seed, split, edition, index)
    figure = sample_figure(rng, figure_id, edition)
    return figure, render_figure(figure, rng), caption(rng, figure, edition)


def contact_sheet(paths: list[Path], out: Path, tile: int = 192, columns: int = 8) -> None:
    """The first figures side by side (each fitted into a tile) as one PNG to look at."""
    from PIL import Image

    rows = math.ceil(len(paths) / columns)
    sheet = Image.new("RGB", (columns * tile, rows * tile), (128, 128, 128))
    for index, path in enumerate(paths):
        with Image.open(path) as image:
            image.thumbnail((tile - 4, tile - 4))
            sheet.paste(image.convert("RGB"), ((index % columns) * tile + 2, (index // columns) * tile + 2))
    sheet.save(out)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=user_path, required=True, help="output folder")
    parser.add_argument("--edition", choices=("2021", "2022"), default="2022")
    parser.add_argument("--images", type=int, default=200, help="number of figures")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", choices=SPLITS, default="test", help="names the ids (default test)")
    parser.add_argument("--secondary", action="store_true",
                        help="2022: also write concepts_manual.tsv and secondary_concepts.txt (modality and region "
                             "concepts of the organisers' manually validated list)")
    parser.add_argument("--contact-sheet", action="store_true", help="also write OUT/contact_sheet.png")


SECONDARY_CONCEPTS = (CT, MRI, XRAY, US, ANGIO, PET, CHEST, ABDOMEN, SPINE, PELVIS, LEG)  # of the organisers' 15


def run(args: argparse.Namespace) -> int:
    if args.images < 1:
        raise SystemExit("--images must be at least 1")
    inputs = args.out / "input"
    inputs.mkdir(parents=True, exist_ok=True)
    concepts, captions, paths = {}, {}, []
    for index, figure_id in enumerate(figure_ids(args.edition, args.split, args.images)):
        figure, image, text = generate_figure(args.edition, args.split, args.seed, index, figure_id)
        path = inputs / f"{figure_id}.jpg"
        image.save(path, quality=figure_rng(args.seed, args.split, "jpeg", index).randint(75, 95))
        concepts[figure_id], captions[figure_id] = figure.concepts, text
        paths.append(path)
    secondary = SECONDARY_CONCEPTS if args.secondary and args.edition == "2022" else None
    write_ground_truth(args.out / "ground_truth", args.edition, concepts, captions, secondary)
    if args.contact_sheet:
        contact_sheet(paths[:48], args.out / "contact_sheet.png")
    log.info("%d synthetic ImageCLEFmed Caption %s figures (%s split) in %s (input/, ground_truth/)", args.images,
             args.edition, args.split, args.out)
    return 0
