"""An instance label map as a DICOM Segmentation (highdicom, BINARY), one segment per instance, and back.

The SEG is a new series of the source study, its frames referencing the source CT's instances (patient and study
attributes copied by highdicom from the source series); empty frames are left out. Each instance is one segment:
category SNOMED CT `Morphologically Abnormal Structure` (49755003), the finding kind's type and site (segmented
property type, anatomic region), its own type as a segmented property type modifier, and its confidence in the
segment description (`<type meaning>, confidence 0.912345`), which DICOM gives no attribute of its own; segment label
and tracking ID `<finding> <label>` carry the instance's label in the label map. With an operating point, the study's
call at it is the Content Description (`Fracture present: 0.9123 at threshold 0.1000`), and a segment kept below it
is described `Below operating threshold: <type meaning>, confidence ...`. UIDs are derived from the source
series, the algorithm and the result (`sr.result_uid`): the same result is the same object.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .series import DicomSeries
from .sr import SR_MANUFACTURER, FindingKind, StudyCall, coded, declare_private_schemes, evidence, result_uid

SEG_SERIES_NUMBER = 902
MORPHOLOGICALLY_ABNORMAL_STRUCTURE = ("49755003", "SCT", "Morphologically Abnormal Structure")
CONFIDENCE = re.compile(r", confidence ([0-9.]+)$")
BELOW = "Below operating threshold: "


@dataclass(frozen=True)
class SegmentFinding:
    """One instance: its label in the label map, its type (a coded concept triple), its confidence, and whether it
    is reported below the operating threshold."""

    label: int
    segment_type: tuple[str, str, str]
    confidence: float
    below_threshold: bool = False

    @property
    def probability(self) -> float:  # what an operating point compares (sr.OperatingPoint.reported)
        return self.confidence


def call_description(kind: FindingKind, call: StudyCall) -> str:
    """The study's call as a SEG's Content Description (at most 64 characters)."""
    strongest = "no candidate" if call.probability is None else f"{call.probability:.4f}"
    return f"{kind.finding_type[2][:20]} {'present' if call.present else 'absent'}: {strongest} at threshold " \
           f"{call.threshold:.4f}"


def _content(labels_zyx: np.ndarray, segments: list[SegmentFinding]) -> list:
    digest = hashlib.sha256(np.ascontiguousarray(labels_zyx).tobytes()).hexdigest()
    return [digest, [[s.label, list(s.segment_type), round(s.confidence, 6), s.below_threshold] for s in segments]]


def _description(number: int, segment: SegmentFinding, kind: FindingKind, series: DicomSeries, content: list):
    """The Segment Description item of `segment`, numbered `number`."""
    import highdicom as hd
    from pydicom import Dataset
    from pydicom.sr.codedict import codes

    name = kind.finding_type[2].lower()
    description = hd.seg.SegmentDescription(
        segment_number=number, segment_label=f"{name} {segment.label}",
        segmented_property_category=coded(MORPHOLOGICALLY_ABNORMAL_STRUCTURE),
        segmented_property_type=coded(kind.finding_type), algorithm_type="AUTOMATIC",
        algorithm_identification=hd.AlgorithmIdentificationSequence(
            name=kind.algorithm_name, family=codes.DCM.ArtificialIntelligence, version=kind.algorithm_version),
        tracking_uid=result_uid(series, kind, content, f"segment-{segment.label}"),
        tracking_id=f"{name} {segment.label}", anatomic_regions=[coded(kind.finding_site)])
    modifier = Dataset()
    modifier.CodeValue, modifier.CodingSchemeDesignator, modifier.CodeMeaning = segment.segment_type
    description.SegmentedPropertyTypeCodeSequence[0].SegmentedPropertyTypeModifierCodeSequence = [modifier]
    description.SegmentDescription = \
        f"{BELOW if segment.below_threshold else ''}{segment.segment_type[2]}, confidence {segment.confidence:.6f}"
    return description


def label_segmentation(series: DicomSeries, labels_zyx: np.ndarray, segments: list[SegmentFinding],
                       kind: FindingKind, call: StudyCall | None = None):
    """The DICOM SEG of `labels_zyx` (slice k = `series.headers[k]`, ordered as read), a pydicom Dataset; every
    segment's label must occur in the map (labels of no segment are left out); `call`: the study's call at an
    operating point, its Content Description."""
    import highdicom as hd

    if labels_zyx.shape != (len(series.headers), int(series.first.Rows), int(series.first.Columns)):
        raise ValueError(f"label map of shape {labels_zyx.shape} on a series of {len(series.headers)} slices of "
                         f"{series.first.Rows}x{series.first.Columns}")
    content = _content(labels_zyx, segments) + ([] if call is None else [call.threshold])
    lookup = np.zeros(int(labels_zyx.max()) + 1, dtype=np.uint8)
    for number, segment in enumerate(segments, start=1):
        lookup[segment.label] = number
    seg = hd.seg.Segmentation(
        source_images=evidence(series), pixel_array=lookup[labels_zyx],
        segmentation_type=hd.seg.SegmentationTypeValues.BINARY,
        segment_descriptions=[_description(n, s, kind, series, content) for n, s in enumerate(segments, start=1)],
        series_instance_uid=result_uid(series, kind, content, "seg-series"), series_number=SEG_SERIES_NUMBER,
        sop_instance_uid=result_uid(series, kind, content, "seg-instance"), instance_number=1,
        manufacturer=SR_MANUFACTURER, manufacturer_model_name=kind.algorithm_name,
        software_versions=kind.algorithm_version, device_serial_number="0",
        series_description=kind.series_description, content_label="FINDINGS",
        content_description=None if call is None else call_description(kind, call))
    declare_private_schemes(seg, [s.segment_type for s in segments])
    return seg


def read_label_segmentation(path_or_dataset, series: DicomSeries) -> tuple[np.ndarray, list[SegmentFinding]]:
    """The label map (z, y, x; slices ordered as `series`) and the segments of a SEG from `label_segmentation`,
    read back with highdicom."""
    import highdicom as hd

    seg = hd.seg.segread(path_or_dataset) if isinstance(path_or_dataset, (str, Path)) else \
        hd.seg.Segmentation.from_dataset(path_or_dataset)
    segments = []
    numbers = seg.get_segment_numbers()
    lookup = np.zeros(max(numbers, default=0) + 1, dtype=np.uint8)
    for number in numbers:
        item = seg.get_segment_description(number)
        label = int(str(item.TrackingID).rsplit(" ", 1)[1])
        (modifier,) = item.SegmentedPropertyTypeCodeSequence[0].SegmentedPropertyTypeModifierCodeSequence
        segments.append(SegmentFinding(label, (modifier.CodeValue, modifier.CodingSchemeDesignator,
                                               modifier.CodeMeaning),
                                       float(CONFIDENCE.search(item.SegmentDescription).group(1)),
                                       str(item.SegmentDescription).startswith(BELOW)))
        lookup[number] = label
    numbered = seg.get_pixels_by_source_instance(list(series.sop_instance_uids), combine_segments=True,
                                                 assert_missing_frames_are_empty=True)
    return lookup[numbered], segments
