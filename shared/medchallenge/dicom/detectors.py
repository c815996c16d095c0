"""The DICOM result objects of the RibFrac and object-CXR detectors: their `DicomContract.write_results` hooks.

RibFrac -> a DICOM SEG of the instance map (`seg.py`): segmented property type SNOMED CT `Fracture` (72704001) of
the `Rib` (113197003), each fracture's RibFrac type as a modifier in a private scheme (`99MEDCHALLENGE`, code value
`RIBFRAC-<label code>`: no DICOM context group names buckle, nondisplaced, displaced and segmental rib fractures;
`RIBFRAC--1` a fracture of uncertain type),
its confidence in the segment description. A CT without fractures gets an SR (TID 1500) saying so: a SEG needs a
segment. object-CXR -> an SR (TID 1500, `sr.point_report`): finding type SNOMED CT `Foreign body` (19227008) on the
`Chest` (816094009), the image-level probability and one SCOORD POINT per point.

Each applies an operating point per output (`sr.OperatingPoint`; by default its model card's, `model_card_point`):
findings under it are not findings (kept, where asked, marked below threshold: the algorithm's own DICOM output keeps
them, as its CSVs do; a gateway route keeps them only with keep_below_threshold), and the study is called present or
absent at it (the SR's study group; the SEG's Content Description).

The predictions are read by their attributes (RibFrac: `instances`, a SimpleITK label image on the CT's grid, and
`detections` with `label_id`, `confidence`, `label_code`; object-CXR: `probability` and `points` as (probability,
x, y)), so that the plug-ins import this module and not the other way round.
"""

from __future__ import annotations

from .series import DicomSeries
from .seg import SegmentFinding, label_segmentation
from .sr import PRIVATE_SCHEME, FindingKind, OperatingPoint, PointFinding, StudyCall, box_report, point_report

RIB_FRACTURE_TYPES = {1: "Displaced rib fracture", 2: "Nondisplaced rib fracture", 3: "Buckle rib fracture",
                      4: "Segmental rib fracture", -1: "Rib fracture of uncertain type"}
RIB_FRACTURE = FindingKind(finding_type=("72704001", "SCT", "Fracture"), finding_site=("113197003", "SCT", "Rib"),
                           algorithm_name="medchallenge ribfrac", algorithm_version="1",
                           series_description="Rib fracture segmentation (AI)")
# TB caverns: the finding of the tb-caverns detector's SR (its algorithm name and version set by who writes it)
TB_CAVERN = FindingKind(finding_type=("tb-cavern", PRIVATE_SCHEME, "Tuberculous lung cavern"),
                        finding_site=("39607008", "SCT", "Lung"), algorithm_name="", algorithm_version="",
                        series_description="TB cavern detection (AI)")
FOREIGN_OBJECT = FindingKind(finding_type=("19227008", "SCT", "Foreign body"),
                             finding_site=("816094009", "SCT", "Chest"), algorithm_name="medchallenge object-cxr",
                             algorithm_version="1", series_description="Foreign object detection (AI)",
                             procedure=("43468-8", "LN", "XR unspecified body region"))


def rib_fracture_type(label_code: int) -> tuple[str, str, str]:
    """The coded concept of a RibFrac label code."""
    return f"RIBFRAC-{label_code}", PRIVATE_SCHEME, RIB_FRACTURE_TYPES[label_code]


def model_card_point(challenge: str, slug: str) -> OperatingPoint:
    """The operating point of output `slug` of the project's `challenge` algorithm, as its model card names it, the
    findings under it kept, marked (the algorithm's own DICOM output)."""
    from ..registry import CHALLENGES

    return OperatingPoint(dict(CHALLENGES[challenge].algorithm.operating_points)[slug], keep_below=True)


def rib_fracture_results(series: DicomSeries, prediction, kind: FindingKind = RIB_FRACTURE,
                         point: OperatingPoint | None = None) -> list:
    """RibFrac on a CT series at `point` (default: the model card's): the SEG of its fractures at or above it (and,
    keep_below, those under it, marked), the study's call in its Content Description; or, no fracture reported, an
    SR saying there is none, with the call."""
    import SimpleITK as sitk

    point = point or model_card_point("ribfrac", "rib-fracture-detections")
    found = [SegmentFinding(d.label_id, rib_fracture_type(d.label_code), d.confidence) for d in prediction.detections]
    segments = point.reported(found)
    strongest = max((s.confidence for s in found), default=None)
    if not segments:
        return [box_report(series, [], kind, point, strongest)]
    call = StudyCall(strongest is not None and strongest >= point.threshold, strongest, point.threshold)
    return [label_segmentation(series, sitk.GetArrayFromImage(prediction.instances), segments, kind, call)]


def foreign_object_results(series: DicomSeries, prediction) -> list:
    """object-CXR on one radiograph: its probability and points as an SR, at the model card's operating points."""
    points = [PointFinding(x, y, score) for score, x, y, *_ in prediction.points]
    return [point_report(series, prediction.probability, points, FOREIGN_OBJECT,
                         model_card_point("object-cxr", "foreign-object-likelihood"),
                         model_card_point("object-cxr", "foreign-objects"))]
