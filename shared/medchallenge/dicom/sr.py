"""3-D boxes with probabilities as a DICOM Structured Report (TID 1500 Measurement Report, highdicom), and back.

Each box is one Volumetric ROI group (TID 1411): a tracking identifier, the finding type, the algorithm (TID 4019),
the finding site, one SCOORD POLYLINE per slice it spans (a closed rectangle in pixel coordinates, referencing that
slice's SOP instance) and its probability as a measurement (DCM `Probability`, UCUM unit `1`); a series without
findings gets one TID 1501 group saying the finding type is absent (SNOMED CT `Absent`). With an operating point
(`OperatingPoint`, the algorithm's model card's threshold or the route's), the document opens with a TID 1501 group
calling the study: the finding type present or absent at that point (SNOMED CT `Present` / `Absent`), the study's
probability and the threshold applied (DCM `Threshold Value`, 122411); only findings at or above the threshold are
findings, and those below it, where the site keeps them, follow as groups of their own marked `Below operating
threshold` (private scheme 99MEDCHALLENGE) and tracked as `below threshold ...`. The SR is a Comprehensive SR
in a new series of the source study, patient and study attributes copied from the source series, every source instance
listed as evidence. Its UIDs are derived from the source series, the algorithm and the findings: the same result of
the same series is the same object (a PACS keeps one copy), a different result a new one.

Voxel boxes are inclusive index corners (x = column, y = row, z = slice in position order); a box's rectangle covers
its pixels whole: corners (x1, y1) and (x2 + 1, y2 + 1) in DICOM pixel coordinates, where (0, 0) is the top-left
corner of the top-left pixel.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .series import DicomSeries

PROBABILITY_UNIT = ("1", "UCUM", "no units")
SR_SERIES_NUMBER = 901
SR_MANUFACTURER = "medchallenge"
PRIVATE_SCHEME = "99MEDCHALLENGE"
THRESHOLD_VALUE = ("122411", "DCM", "Threshold Value")
OPERATING_POINT = ("operating-point", PRIVATE_SCHEME, "Operating point")
BELOW_THRESHOLD = ("below-threshold", PRIVATE_SCHEME, "Below operating threshold")


@dataclass(frozen=True)
class OperatingPoint:
    """An output's operating point: a finding with a probability at or above `threshold` is reported as a finding,
    and a study is called positive when its probability reaches it; with `keep_below`, findings under it are kept
    as a separate list marked below threshold (else left out)."""

    threshold: float
    keep_below: bool = False

    def reported(self, findings: list) -> list:
        """`findings` (each with `probability`) as reported: those at or above the threshold, then (keep_below)
        those under it, marked `below_threshold`."""
        above = [f for f in findings if f.probability >= self.threshold]
        below = [replace(f, below_threshold=True) for f in findings if f.probability < self.threshold]
        return above + (below if self.keep_below else [])


@dataclass(frozen=True)
class StudyCall:
    """A report's study-level result: the finding type present or absent at the threshold, the study's probability
    (None: the algorithm found no candidate at all)."""

    present: bool
    probability: float | None
    threshold: float


@dataclass(frozen=True)
class BoxFinding:
    """One 3-D box: inclusive voxel corners (x1, y1, z1, x2, y2, z2), its probability, and whether it is reported
    below the operating threshold."""

    corners: tuple[int, int, int, int, int, int]
    probability: float
    below_threshold: bool = False


@dataclass(frozen=True)
class FindingKind:
    """What the boxes are: the finding type and site (coded), the algorithm's name and version."""

    finding_type: tuple[str, str, str]  # (code value, coding scheme designator, code meaning)
    finding_site: tuple[str, str, str]
    algorithm_name: str
    algorithm_version: str
    series_description: str
    procedure: tuple[str, str, str] = ("25045-6", "LN", "CT unspecified body region")  # TID 1500's procedure


def coded(triple: tuple[str, str, str]):
    from highdicom.sr import CodedConcept

    return CodedConcept(*triple)


def result_uid(series: DicomSeries, kind: FindingKind, content: object, what: str) -> str:
    """A UID that depends only on what the result was computed from (the study, the series and the set of its
    instances: a study sent again with more slices, or another study reusing the series UID, gets results of its
    own), the algorithm and its result (`content`, JSON-able)."""
    from pydicom.uid import generate_uid

    return generate_uid(entropy_srcs=[series.study_uid, series.series_uid, *sorted(series.sop_instance_uids),
                                      kind.algorithm_name, kind.algorithm_version, json.dumps(content), what])


# Patient and General Study attributes of type 2 (present, maybe empty) that highdicom copies from the source
PATIENT_STUDY_TYPE2 = ("PatientID", "PatientName", "PatientBirthDate", "PatientSex", "AccessionNumber", "StudyID",
                       "StudyDate", "StudyTime", "ReferringPhysicianName")


def evidence(series: DicomSeries) -> list:
    """The series' headers as the source of a result object: a type-2 patient or study attribute a source lacks
    (an image written by a careless exporter) is present and empty, as DICOM has it."""
    headers = []
    for header in series.headers:
        missing = [keyword for keyword in PATIENT_STUDY_TYPE2 if keyword not in header]
        if missing:
            header = copy.copy(header)
            for keyword in missing:
                setattr(header, keyword, "")
        headers.append(header)
    return headers


def _box_content(findings: list[BoxFinding]) -> list:
    return [[list(f.corners), round(f.probability, 6)] for f in findings]


def box_regions(series: DicomSeries, corners: tuple[int, ...]) -> list:
    """One closed SCOORD POLYLINE rectangle per slice of the box, each on its source instance."""
    from highdicom.sr import GraphicTypeValues, ImageRegion, SourceImageForRegion

    x1, y1, z1, x2, y2, z2 = corners
    rectangle = np.asarray([[x1, y1], [x2 + 1, y1], [x2 + 1, y2 + 1], [x1, y2 + 1], [x1, y1]], dtype=np.float32)
    return [ImageRegion(GraphicTypeValues.POLYLINE, rectangle,
                        SourceImageForRegion(str(series.headers[z].SOPClassUID), str(series.headers[z].SOPInstanceUID)))
            for z in range(z1, z2 + 1)]


def _no_finding_group(series: DicomSeries, kind: FindingKind, content: object, algorithm):
    """TID 1501 saying the finding type is absent (TID 1500 needs one group; a study without findings says so)."""
    import highdicom as hd
    from pydicom.sr.codedict import codes

    return hd.sr.MeasurementsAndQualitativeEvaluations(
        tracking_identifier=hd.sr.TrackingIdentifier(uid=result_uid(series, kind, content, "no-finding"),
                                                     identifier="no finding"),
        finding_type=coded(kind.finding_type), algorithm_id=algorithm,
        qualitative_evaluations=[hd.sr.QualitativeEvaluation(coded(kind.finding_type), codes.SCT.Absent)])


def _probability(value: float, algorithm):
    import highdicom as hd
    from pydicom.sr.codedict import codes

    return hd.sr.Measurement(name=codes.DCM.Probability, value=round(value, 6), unit=coded(PROBABILITY_UNIT),
                             algorithm_id=algorithm)


def _call_items(probability: float | None, point: OperatingPoint, kind: FindingKind, algorithm):
    """The measurements and qualitative evaluation of a study-level call at `point`: the probability (where there
    is one), the threshold applied, the finding type present or absent."""
    import highdicom as hd
    from pydicom.sr.codedict import codes

    present = probability is not None and probability >= point.threshold
    measurements = [] if probability is None else [_probability(probability, algorithm)]
    measurements.append(hd.sr.Measurement(name=coded(THRESHOLD_VALUE), value=round(point.threshold, 6),
                                          unit=coded(PROBABILITY_UNIT), algorithm_id=algorithm))
    evaluation = hd.sr.QualitativeEvaluation(coded(kind.finding_type),
                                             codes.SCT.Present if present else codes.SCT.Absent)
    return measurements, [evaluation]


def _study_call_group(series: DicomSeries, kind: FindingKind, content: object, algorithm, probability: float | None,
                      point: OperatingPoint):
    """TID 1501 calling the study at `point` (a volume's call: its strongest finding's probability)."""
    import highdicom as hd

    measurements, evaluations = _call_items(probability, point, kind, algorithm)
    return hd.sr.MeasurementsAndQualitativeEvaluations(
        tracking_identifier=hd.sr.TrackingIdentifier(uid=result_uid(series, kind, content, "study"),
                                                     identifier="study"),
        finding_type=coded(kind.finding_type), algorithm_id=algorithm,
        finding_sites=[hd.sr.FindingSite(coded(kind.finding_site))], measurements=measurements,
        qualitative_evaluations=evaluations)


def _below_mark(finding) -> list:
    """The qualitative evaluation marking a finding reported below the operating threshold (none for the others)."""
    import highdicom as hd

    if not finding.below_threshold:
        return []
    return [hd.sr.QualitativeEvaluation(coded(OPERATING_POINT), coded(BELOW_THRESHOLD))]


def _tracked(finding, name: str) -> str:
    return f"below threshold {name}" if finding.below_threshold else name


def _is_marked_below(group) -> bool:
    """Whether a measurement group read back (highdicom's) carries the below-threshold mark."""
    return any(evaluation.value.value == BELOW_THRESHOLD[0]
               for evaluation in group.get_qualitative_evaluations(name=coded(OPERATING_POINT)))


def _number(items: dict, code: str) -> float | None:
    item = items.get(code)
    return None if item is None else float(item.MeasuredValueSequence[0].NumericValue)


def read_study_call(path_or_dataset) -> StudyCall | None:
    """The study-level call of a report written with an operating point (None: written without one)."""
    import pydicom
    from pydicom.sr.codedict import codes

    sr = pydicom.dcmread(path_or_dataset) if isinstance(path_or_dataset, (str, Path)) else path_or_dataset
    calls = (codes.SCT.Present.value, codes.SCT.Absent.value)
    for container in sr.ContentSequence:
        if container.ConceptNameCodeSequence[0].CodeValue != codes.DCM.ImagingMeasurements.value:
            continue
        for group in container.ContentSequence:
            items = {item.ConceptNameCodeSequence[0].CodeValue: item for item in group.ContentSequence}
            if THRESHOLD_VALUE[0] in items:
                (call,) = [item for item in group.ContentSequence
                           if item.ValueType == "CODE" and item.ConceptCodeSequence[0].CodeValue in calls]
                return StudyCall(call.ConceptCodeSequence[0].CodeValue == codes.SCT.Present.value,
                                 _number(items, codes.DCM.Probability.value), _number(items, THRESHOLD_VALUE[0]))
    return None


def declare_private_schemes(dataset, triples) -> None:
    """Declare the private coding schemes (99 prefix) of `triples` in the object (C.12.1.1.2.1)."""
    from pydicom import Dataset

    private = sorted({c[1] for c in triples if c[1].startswith("99")})
    if private:
        dataset.CodingSchemeIdentificationSequence = []
        for scheme in private:
            item = Dataset()
            item.CodingSchemeDesignator = scheme
            item.CodingSchemeName = f"{SR_MANUFACTURER} private codes"
            item.CodingSchemeResponsibleOrganization = SR_MANUFACTURER
            dataset.CodingSchemeIdentificationSequence.append(item)


def measurement_report(series: DicomSeries, groups: list, kind: FindingKind, content: object,
                       marked_below: bool = False):
    """The Comprehensive SR (TID 1500) holding `groups` on `series`: a new series of the source study, every source
    instance as evidence, UIDs derived from the source series, the algorithm and `content` (the result).

    highdicom makes the document around the first group: making it, highdicom copies, parses and searches the whole
    content tree (most of an SR's CPU time, growing with its groups: 0.14 of 0.27 CPU s for 20 points), to check what
    its templates already made right. The other groups, each made by highdicom's templates on `series` (the
    evidence), then join the document's Imaging Measurements container in their order, as MeasurementReport puts
    them: the same document (tests/test_dicom_sr.py). highdicom's parsed view of the returned object (`.content`)
    holds the first group only: read a report back from its dataset or file (read_box_report, read_point_report)."""
    import highdicom as hd
    from pydicom.sr.codedict import codes

    observer = hd.sr.ObserverContext(observer_type=codes.DCM.Device,
                                     observer_identifying_attributes=hd.sr.DeviceObserverIdentifyingAttributes(
                                         uid=result_uid(series, kind, [], "device"), name=kind.algorithm_name,
                                         manufacturer_name=SR_MANUFACTURER))
    report = hd.sr.MeasurementReport(
        observation_context=hd.sr.ObservationContext(observer_device_context=observer),
        procedure_reported=coded(kind.procedure), imaging_measurements=groups[:1])
    sr = hd.sr.ComprehensiveSR(
        evidence=evidence(series), content=report[0],
        series_instance_uid=result_uid(series, kind, content, "series"), series_number=SR_SERIES_NUMBER,
        sop_instance_uid=result_uid(series, kind, content, "instance"), instance_number=1,
        manufacturer=SR_MANUFACTURER, is_complete=True, series_description=kind.series_description)
    (measurements,) = [item for item in sr.ContentSequence
                       if item.ConceptNameCodeSequence[0].CodeValue == codes.DCM.ImagingMeasurements.value]
    for group in groups[1:]:
        measurements.ContentSequence.extend(group)
    declare_private_schemes(sr, (kind.finding_type, kind.finding_site,
                                 *((OPERATING_POINT, BELOW_THRESHOLD) if marked_below else ())))
    return sr


def box_report(series: DicomSeries, findings: list[BoxFinding], kind: FindingKind,
               point: OperatingPoint | None = None, strongest: float | None = None):
    """The Comprehensive SR (TID 1500) of `findings` on `series` (ordered as read), as a pydicom Dataset; with an
    operating point, the study's call at it first (its probability: `strongest`, by default the strongest
    finding's), then the findings at or above it and (keep_below) those under it, marked."""
    import highdicom as hd

    algorithm = hd.sr.AlgorithmIdentification(name=kind.algorithm_name, version=kind.algorithm_version)
    reported = findings if point is None else point.reported(findings)
    content = _box_content(findings) if point is None else \
        [_box_content(reported), round(point.threshold, 6), strongest and round(strongest, 6)]
    groups = []
    if point is not None:
        strongest = max((f.probability for f in findings), default=strongest)
        groups.append(_study_call_group(series, kind, content, algorithm, strongest, point))
    for number, finding in enumerate(reported, start=1):
        tracking = hd.sr.TrackingIdentifier(uid=result_uid(series, kind, content, f"finding-{number}"),
                                            identifier=_tracked(finding, f"finding {number}"))
        groups.append(hd.sr.VolumetricROIMeasurementsAndQualitativeEvaluations(
            tracking_identifier=tracking, referenced_regions=box_regions(series, finding.corners),
            finding_type=coded(kind.finding_type), algorithm_id=algorithm,
            finding_sites=[hd.sr.FindingSite(coded(kind.finding_site))],
            measurements=[_probability(finding.probability, algorithm)],
            qualitative_evaluations=_below_mark(finding) or None))
    return measurement_report(series, groups or [_no_finding_group(series, kind, content, algorithm)], kind, content,
                              any(f.below_threshold for f in reported))


def read_box_report(path_or_dataset, series: DicomSeries) -> list[BoxFinding]:
    """The boxes of a box report on `series` (ordered as read), read back with highdicom."""
    import highdicom as hd
    from pydicom.sr.codedict import codes

    sr = hd.sr.srread(path_or_dataset) if isinstance(path_or_dataset, (str, Path)) else \
        hd.sr.ComprehensiveSR.from_dataset(path_or_dataset)
    slice_of = {uid: z for z, uid in enumerate(series.sop_instance_uids)}
    findings = []
    for group in sr.content.get_volumetric_roi_measurement_groups():
        regions = group.roi
        points = np.concatenate([region.value for region in regions])
        z = [slice_of[region.ContentSequence[0].ReferencedSOPSequence[0].ReferencedSOPInstanceUID]
             for region in regions]
        (x1, y1), (x2, y2) = points.min(axis=0), points.max(axis=0)
        corners = (int(round(x1)), int(round(y1)), min(z), int(round(x2)) - 1, int(round(y2)) - 1, max(z))
        (probability,) = group.get_measurements(name=codes.DCM.Probability)
        findings.append(BoxFinding(corners, float(probability.value), _is_marked_below(group)))
    return findings


@dataclass(frozen=True)
class PointFinding:
    """One point on an image of a series: x = column, y = row in pixels, origin at the top-left pixel's centre (the
    challenge's convention), its probability, the image's index in the series (a volume's slice in position
    order), and whether it is reported below the operating threshold."""

    x: float
    y: float
    probability: float
    image: int = 0
    below_threshold: bool = False


def point_report(series: DicomSeries, probability: float, points: list[PointFinding], kind: FindingKind,
                 call: OperatingPoint | None = None, point: OperatingPoint | None = None):
    """The Comprehensive SR (TID 1500) of one image's result (`series`: that image alone): the image-level
    probability (TID 1501, the image as its source; with `call`, the image called present or absent at it and the
    threshold applied) and one SCOORD POINT per point (TID 1410, with its probability: with `point`, those at or
    above it, then (keep_below) those under it, marked). DICOM pixel coordinates put (0, 0) at the top-left pixel's
    corner: a point is stored at (x + 0.5, y + 0.5)."""
    import highdicom as hd

    image = series.first
    algorithm = hd.sr.AlgorithmIdentification(name=kind.algorithm_name, version=kind.algorithm_version)
    reported = points if point is None else point.reported(points)
    content = [round(probability, 6), [[round(p.x, 3), round(p.y, 3), round(p.probability, 6)] for p in reported]]
    if call is not None or point is not None:
        content += [[round(p.threshold, 6), p.keep_below] if p else None for p in (call, point)]
    measurements, evaluations = ([_probability(probability, algorithm)], None) if call is None else \
        _call_items(probability, call, kind, algorithm)
    site = [hd.sr.FindingSite(coded(kind.finding_site))]
    groups = [hd.sr.MeasurementsAndQualitativeEvaluations(
        tracking_identifier=hd.sr.TrackingIdentifier(uid=result_uid(series, kind, content, "image"),
                                                     identifier="image"),
        finding_type=coded(kind.finding_type), algorithm_id=algorithm, finding_sites=site,
        measurements=measurements, qualitative_evaluations=evaluations,
        source_images=[hd.sr.SourceImageForMeasurementGroup(str(image.SOPClassUID), str(image.SOPInstanceUID))])]
    groups += _point_groups(series, [(kind.finding_type, p) for p in reported], kind, content, algorithm)
    return measurement_report(series, groups, kind, content, any(p.below_threshold for p in reported))


def _point_groups(series: DicomSeries, points: list[tuple[tuple[str, str, str], PointFinding]], kind: FindingKind,
                  content: object, algorithm) -> list:
    """One TID 1410 group per point, of its finding type: a SCOORD POINT on its image with its probability."""
    import highdicom as hd

    groups = []
    for number, (finding_type, point) in enumerate(points, start=1):
        image = series.headers[point.image]
        region = hd.sr.ImageRegion(hd.sr.GraphicTypeValues.POINT,
                                   np.asarray([[point.x + 0.5, point.y + 0.5]], dtype=np.float32),
                                   hd.sr.SourceImageForRegion(str(image.SOPClassUID), str(image.SOPInstanceUID)))
        groups.append(hd.sr.PlanarROIMeasurementsAndQualitativeEvaluations(
            tracking_identifier=hd.sr.TrackingIdentifier(uid=result_uid(series, kind, content, f"point-{number}"),
                                                         identifier=_tracked(point, f"point {number}")),
            referenced_region=region, finding_type=coded(finding_type), algorithm_id=algorithm,
            finding_sites=[hd.sr.FindingSite(coded(kind.finding_site))],
            measurements=[_probability(point.probability, algorithm)],
            qualitative_evaluations=_below_mark(point) or None))
    return groups


def value_report(series: DicomSeries, numbers: list[tuple[tuple[str, str, str], float]],
                 texts: list[tuple[tuple[str, str, str], str]],
                 points: list[tuple[tuple[str, str, str], PointFinding]], kind: FindingKind):
    """The Comprehensive SR (TID 1500) of an algorithm's values on `series`: one TID 1501 group holding each number
    as a measurement (unit 1) and each text as a TEXT item, each named by its coded concept, and one TID 1410 group
    per point (its concept as the finding type, a SCOORD POINT on its image of the series)."""
    import highdicom as hd

    algorithm = hd.sr.AlgorithmIdentification(name=kind.algorithm_name, version=kind.algorithm_version)
    content = [[list(c), round(v, 6)] for c, v in numbers] + [[list(c), s] for c, s in texts] + \
        [[list(c), p.image, round(p.x, 3), round(p.y, 3), round(p.probability, 6)] for c, p in points]
    group = hd.sr.MeasurementsAndQualitativeEvaluations(
        tracking_identifier=hd.sr.TrackingIdentifier(uid=result_uid(series, kind, content, "values"),
                                                     identifier="values"),
        finding_type=coded(kind.finding_type), algorithm_id=algorithm,
        measurements=[hd.sr.Measurement(name=coded(c), value=v, unit=coded(PROBABILITY_UNIT), algorithm_id=algorithm)
                      for c, v in numbers] or None)
    for concept, text in texts:
        group[0].ContentSequence.append(hd.sr.TextContentItem(name=coded(concept), value=text,
                                                              relationship_type="CONTAINS"))
    groups = [group] + _point_groups(series, points, kind, content, algorithm)
    sr = measurement_report(series, groups, kind, content)
    declare_private_schemes(sr, [kind.finding_type, kind.finding_site, *(c for c, _ in numbers),
                                 *(c for c, _ in texts), *(c for c, _ in points)])
    return sr


def read_point_report(path_or_dataset) -> tuple[float, list[PointFinding]]:
    """The image-level probability and the points of a point report, read back with highdicom."""
    import highdicom as hd
    from pydicom.sr.codedict import codes

    sr = hd.sr.srread(path_or_dataset) if isinstance(path_or_dataset, (str, Path)) else \
        hd.sr.ComprehensiveSR.from_dataset(path_or_dataset)
    (image,) = sr.content.get_image_measurement_groups()
    (probability,) = image.get_measurements(name=codes.DCM.Probability)
    points = []
    for group in sr.content.get_planar_roi_measurement_groups():
        (x, y), = group.roi.value
        (score,) = group.get_measurements(name=codes.DCM.Probability)
        points.append(PointFinding(float(x) - 0.5, float(y) - 0.5, float(score.value),
                                   below_threshold=_is_marked_below(group)))
    return float(probability.value), points


FAILURE_SERIES_NUMBER = 903


def failure_note(series: list[DicomSeries], detector: str, text: str):
    """A Comprehensive SR telling the PACS that `detector` (a route's name, or "gateway") could not process the study
    of `series`: a Diagnostic Imaging Report with one Comment, `text` (a fixed wording chosen by the caller, never
    text from the images), marked partial, every instance of the study as evidence. Its UIDs derive from the study,
    the set of its instances, the detector and the text."""
    import highdicom as hd
    from pydicom.sr.codedict import codes
    from pydicom.uid import generate_uid

    study_uid = series[0].study_uid
    root = hd.sr.ContainerContentItem(name=codes.LN.DiagnosticImagingReport)
    root.ContentSequence = [hd.sr.TextContentItem(name=codes.DCM.Comment, value=text,
                                                  relationship_type=hd.sr.RelationshipTypeValues.CONTAINS)]
    headers = [header for s in series for header in evidence(s)]
    instances = sorted(uid for s in series for uid in s.sop_instance_uids)

    def uid(what: str) -> str:
        return generate_uid(entropy_srcs=[study_uid, *instances, detector, text, what])

    return hd.sr.ComprehensiveSR(
        evidence=headers, content=root, series_instance_uid=uid("failure-series"),
        series_number=FAILURE_SERIES_NUMBER, sop_instance_uid=uid("failure-instance"), instance_number=1,
        manufacturer=SR_MANUFACTURER, is_complete=False, series_description=f"AI {detector}: failed"[:64])


def read_failure_note(path_or_dataset) -> str:
    """The message of a failure note."""
    import pydicom

    sr = pydicom.dcmread(path_or_dataset) if isinstance(path_or_dataset, (str, Path)) else path_or_dataset
    (comment,) = sr.ContentSequence
    return str(comment.TextValue)
