"""3-D boxes with probabilities as a DICOM Structured Report (TID 1500 Measurement Report, highdicom), and back.

Each box is one Volumetric ROI group (TID 1411): a tracking identifier, the finding type, the algorithm (TID 4019),
the finding site, one SCOORD POLYLINE per slice it spans (a closed rectangle in pixel coordinates, referencing that slice's
SOP instance) and its probability as a measurement (DCM `Probability`, UCUM unit `1`); a series without findings gets one
TID 1501 group saying the finding type is absent (SNOMED CT `Absent`). The SR is a Comprehensive SR in a new series of the source study, patient and study attributes copied
from the source series, every source instance listed as evidence. Its UIDs are derived from the source series, the
algorithm and the findings: the same result of the same series is the same object (a PACS keeps one copy), a
different result a new one.

Voxel boxes are inclusive index corners (x = column, y = row, z = slice in position order); a box's rectangle covers
its pixels whole: corners (x1, y1) and (x2 + 1, y2 + 1) in DICOM pixel coordinates, where (0, 0) is the top-left
corner of the top-left pixel.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .series import DicomSeries

PROBABILITY_UNIT = ("1", "UCUM", "no units")
SR_SERIES_NUMBER = 901
SR_MANUFACTURER = "medchallenge"


@dataclass(frozen=True)
class BoxFinding:
    """One 3-D box: inclusive voxel corners (x1, y1, z1, x2, y2, z2) and its probability."""

    corners: tuple[int, int, int, int, int, int]
    probability: float


@dataclass(frozen=True)
class FindingKind:
    """What the boxes are: the finding type and site (coded), the algorithm's name and version."""

    finding_type: tuple[str, str, str]  # (code value, coding scheme designator, code meaning)
    finding_site: tuple[str, str, str]
    algorithm_name: str
    algorithm_version: str
    series_description: str


def _code(triple: tuple[str, str, str]):
    from highdicom.sr import CodedConcept

    return CodedConcept(*triple)


def result_uid(series: DicomSeries, kind: FindingKind, findings: list[BoxFinding], what: str) -> str:
    """A UID that depends only on the source series, the algorithm and its findings."""
    from pydicom.uid import generate_uid

    content = json.dumps([[list(f.corners), round(f.probability, 6)] for f in findings])
    return generate_uid(entropy_srcs=[series.series_uid, kind.algorithm_name, kind.algorithm_version, content, what])


def box_regions(series: DicomSeries, corners: tuple[int, ...]) -> list:
    """One closed SCOORD POLYLINE rectangle per slice of the box, each on its source instance."""
    from highdicom.sr import GraphicTypeValues, ImageRegion, SourceImageForRegion

    x1, y1, z1, x2, y2, z2 = corners
    rectangle = np.asarray([[x1, y1], [x2 + 1, y1], [x2 + 1, y2 + 1], [x1, y2 + 1], [x1, y1]], dtype=np.float32)
    return [ImageRegion(GraphicTypeValues.POLYLINE, rectangle,
                        SourceImageForRegion(str(series.headers[z].SOPClassUID), str(series.headers[z].SOPInstanceUID)))
            for z in range(z1, z2 + 1)]


def box_report(series: DicomSeries, findings: list[BoxFinding], kind: FindingKind):
    """The Comprehensive SR (TID 1500) of `findings` on `series` (ordered as read), as a pydicom Dataset."""
    import highdicom as hd
    from pydicom import Dataset
    from pydicom.sr.codedict import codes

    algorithm = hd.sr.AlgorithmIdentification(name=kind.algorithm_name, version=kind.algorithm_version)
    groups = []
    for number, finding in enumerate(findings, start=1):
        tracking = hd.sr.TrackingIdentifier(uid=result_uid(series, kind, findings, f"finding-{number}"),
                                            identifier=f"finding {number}")
        probability = hd.sr.Measurement(name=codes.DCM.Probability, value=round(finding.probability, 6),
                                        unit=_code(PROBABILITY_UNIT), algorithm_id=algorithm)
        groups.append(hd.sr.VolumetricROIMeasurementsAndQualitativeEvaluations(
            tracking_identifier=tracking, referenced_regions=box_regions(series, finding.corners),
            finding_type=_code(kind.finding_type), algorithm_id=algorithm,
            finding_sites=[hd.sr.FindingSite(_code(kind.finding_site))], measurements=[probability]))
    if not groups:  # TID 1500 needs one group: a study without findings says so (TID 1501, finding type: absent)
        groups.append(hd.sr.MeasurementsAndQualitativeEvaluations(
            tracking_identifier=hd.sr.TrackingIdentifier(uid=result_uid(series, kind, findings, "no-finding"),
                                                         identifier="no finding"),
            finding_type=_code(kind.finding_type), algorithm_id=algorithm,
            qualitative_evaluations=[hd.sr.QualitativeEvaluation(_code(kind.finding_type), codes.SCT.Absent)]))
    observer = hd.sr.ObserverContext(observer_type=codes.DCM.Device,
                                     observer_identifying_attributes=hd.sr.DeviceObserverIdentifyingAttributes(
                                         uid=result_uid(series, kind, [], "device"), name=kind.algorithm_name,
                                         manufacturer_name=SR_MANUFACTURER))
    report = hd.sr.MeasurementReport(
        observation_context=hd.sr.ObservationContext(observer_device_context=observer),
        procedure_reported=codes.LN.CTUnspecifiedBodyRegion, imaging_measurements=groups)
    sr = hd.sr.ComprehensiveSR(
        evidence=list(series.headers), content=report[0],
        series_instance_uid=result_uid(series, kind, findings, "series"), series_number=SR_SERIES_NUMBER,
        sop_instance_uid=result_uid(series, kind, findings, "instance"), instance_number=1,
        manufacturer=SR_MANUFACTURER, is_complete=True, series_description=kind.series_description)
    private = {c[1] for c in (kind.finding_type, kind.finding_site) if c[1].startswith("99")}
    if private:  # a private coding scheme is declared in the object (C.12.1.1.2.1)
        sr.CodingSchemeIdentificationSequence = []
        for scheme in sorted(private):
            item = Dataset()
            item.CodingSchemeDesignator = scheme
            item.CodingSchemeName = f"{SR_MANUFACTURER} private codes"
            item.CodingSchemeResponsibleOrganization = SR_MANUFACTURER
            sr.CodingSchemeIdentificationSequence.append(item)
    return sr


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
        findings.append(BoxFinding(corners, float(probability.value)))
    return findings
