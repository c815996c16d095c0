"""Grand-challenge sockets (component interfaces) of every challenge: what an organiser requests on grand-challenge,
what the algorithms read and write there, and what the evaluators find in `predictions.json`.

Slugs, kinds and relative paths follow the per-challenge design of the grand-challenge notes (RibFrac, object-CXR,
TB caverns, ImageCLEFmed caption): images under `images/<slug>`, JSON values at `<slug>.json`. Which challenge
has which interface is in the registry (medchallenge.registry).
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Socket:
    """A GC socket (ComponentInterface); `kind` and `super_kind` are GC's display labels."""

    slug: str
    kind: str
    super_kind: str  # "Image" | "File" | "Value"
    relative_path: str
    title: str = ""

    @property
    def pk(self) -> int:
        return zlib.crc32(self.slug.encode()) % 100_000

    def serialize(self) -> dict:
        """ComponentInterfaceSerializer's fields, as in GC's inputs.json and predictions.json."""
        return {"title": self.title or self.slug.replace("-", " ").title(), "description": "", "slug": self.slug,
                "kind": self.kind, "pk": self.pk, "default_value": None, "super_kind": self.super_kind,
                "relative_path": self.relative_path, "overlay_segments": [], "look_up_table": None}


@dataclass(frozen=True)
class Interface:
    """One algorithm interface: its input and output sockets, and the ground-truth files the evaluator reads."""

    inputs: tuple[Socket, ...]
    outputs: tuple[Socket, ...]
    ground_truth: tuple[str, ...]  # glob patterns, each of which must match at least one file

    def as_json(self) -> dict:
        return {"inputs": [asdict(x) for x in self.inputs], "outputs": [asdict(x) for x in self.outputs],
                "ground_truth_files": list(self.ground_truth)}


CT_IMAGE = Socket("ct-image", "Image", "Image", "images/ct", "CT Image")
TB_CAVERN_BOXES = Socket("tb-cavern-boxes", "Anything", "Value", "tb-cavern-boxes.json", "TB Cavern Boxes")
RIB_FRACTURE_INSTANCES = Socket("rib-fracture-instances", "Image", "Image", "images/rib-fracture-instances")
RIB_FRACTURE_DETECTIONS = Socket("rib-fracture-detections", "Anything", "Value", "rib-fracture-detections.json")
CHEST_X_RAY = Socket("chest-x-ray", "Image", "Image", "images/chest-x-ray")
FOREIGN_OBJECT_LIKELIHOOD = Socket("foreign-object-likelihood", "Float", "Value", "foreign-object-likelihood.json")
FOREIGN_OBJECTS = Socket("foreign-objects", "Multiple points", "File", "foreign-objects.json")
MEDICAL_IMAGE = Socket("medical-image", "Image", "Image", "images/medical-image")
UMLS_CONCEPTS = Socket("umls-concepts", "Anything", "File", "umls-concepts.json")
CAPTION = Socket("caption", "String", "Value", "caption.json")

TB_CAVERNS_INTERFACE = Interface((CT_IMAGE,), (TB_CAVERN_BOXES,), ("gt_boxes.csv", "all_ids.csv"))
RIBFRAC_INTERFACE = Interface((CT_IMAGE,), (RIB_FRACTURE_INSTANCES, RIB_FRACTURE_DETECTIONS),
                              ("*-label.nii.gz", "*.csv"))
OBJECT_CXR_INTERFACE = Interface((CHEST_X_RAY,), (FOREIGN_OBJECT_LIKELIHOOD, FOREIGN_OBJECTS), ("annotations.csv",))
CAPTION_INTERFACE = Interface((MEDICAL_IMAGE,), (UMLS_CONCEPTS, CAPTION), ("concepts.tsv", "captions.csv"))
