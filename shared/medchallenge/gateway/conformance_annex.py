"""Section 8 of the gateway's Conformance Statement (PS3.2 A.8, "Annexes"): the IOD contents of every object the
routes write (Comprehensive SR TID 1500, Segmentation, the failure note) as module and attribute tables with each
attribute's source, the coded terminology its writers use (taken from the writers' own constants, so that the
statement cannot drift from them), and the annexes that do not apply, said so."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..dicom.detectors import FOREIGN_OBJECT, RIB_FRACTURE, RIB_FRACTURE_TYPES, TB_CAVERN, rib_fracture_type
from ..dicom.seg import MORPHOLOGICALLY_ABNORMAL_STRUCTURE, SEG_SERIES_NUMBER
from ..dicom.sr import (BELOW_THRESHOLD, FAILURE_SERIES_NUMBER, OPERATING_POINT, PRIVATE_SCHEME, PROBABILITY_UNIT,
                        SR_MANUFACTURER, SR_SERIES_NUMBER, THRESHOLD_VALUE)
from .contexts import COMPREHENSIVE_SR, SEGMENTATION
from .output_dicom import GENERIC_FINDING

# Module, usage (M: mandatory, C: conditional, U: user option) of each written IOD (PS3.3 A.35.3, A.51)
SR_MODULES = (("Patient", "M"), ("General Study", "M"), ("SR Document Series", "M"), ("General Equipment", "M"),
              ("SR Document General", "M"), ("SR Document Content", "M"), ("SOP Common", "M"))
SEG_MODULES = (("Patient", "M"), ("General Study", "M"), ("General Series", "M"), ("Segmentation Series", "M"),
               ("Frame of Reference", "C"), ("General Equipment", "M"), ("Enhanced General Equipment", "M"),
               ("General Image", "M"), ("Image Pixel", "M"), ("Segmentation Image", "M"),
               ("Multi-frame Functional Groups", "M"), ("Multi-frame Dimension", "M"),
               ("Common Instance Reference", "M"), ("SOP Common", "M"))
COPIED = "copied from the source images"
DERIVED = "derived: a UID from the source study, series and instances, the algorithm and its result"
PATIENT_STUDY = (
    ("Patient's Name, Patient ID, Patient's Birth Date, Patient's Sex", "(0010,0010) (0010,0020) (0010,0030) "
     "(0010,0040)", COPIED + " (present and empty where the source lacks them)"),
    ("Study Instance UID, Study Date, Study Time, Study ID, Accession Number, Referring Physician's Name",
     "(0020,000D) (0008,0020) (0008,0030) (0020,0010) (0008,0050) (0008,0090)", COPIED),
    ("Specific Character Set", "(0008,0005)", "the source images' (the copied attributes keep their encoding)"),
)


def _table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _attributes(rows: Iterable[tuple[str, str, str]]) -> str:
    return _table(("Attribute", "Tag", "Value and source"), [*PATIENT_STUDY, *rows])


def coded_terms() -> list[tuple[str, str, str, str]]:
    """(coding scheme, code value, code meaning, where used) of every code the writers put in an object."""
    kinds = ((FOREIGN_OBJECT, "object-CXR SR"), (TB_CAVERN, "TB caverns SR"), (RIB_FRACTURE, "RibFrac SEG and SR"),
             (GENERIC_FINDING, "generic route SR"))
    terms = []
    for kind, where in kinds:
        terms += [(*kind.finding_type, f"{where}: finding type"), (*kind.finding_site, f"{where}: finding site"),
                  (*kind.procedure, f"{where}: procedure reported")]
    terms += [(*rib_fracture_type(code), "RibFrac SEG: segmented property type modifier")
              for code in RIB_FRACTURE_TYPES]
    terms += [(*MORPHOLOGICALLY_ABNORMAL_STRUCTURE, "SEG: segmented property category"),
              ("122157", "DCM", "Probability", "SR: each finding's and the study's probability (unit UCUM 1)"),
              (*THRESHOLD_VALUE, "SR: the operating threshold applied"),
              ("52101004", "SCT", "Present", "SR: the study's call at the operating point"),
              ("272519000", "SCT", "Absent", "SR: the study's call at the operating point; no finding"),
              (*OPERATING_POINT, "SR: concept name of a finding's mark"),
              (*BELOW_THRESHOLD, "SR: a finding kept below the operating threshold"),
              (*PROBABILITY_UNIT, "SR: unit of probabilities and thresholds"),
              ("18748-4", "LN", "Diagnostic Imaging Report", "failure note: document title"),
              ("121106", "DCM", "Comment", "failure note: its text")]
    unique = {}
    for value, scheme, meaning, where in terms:
        unique.setdefault((scheme, value, meaning), []).append(where)
    return [(scheme, value, meaning, "; ".join(dict.fromkeys(wheres)))
            for (scheme, value, meaning), wheres in sorted(unique.items())]


def annexes() -> str:
    """Section 8, Markdown."""
    return f"""## 8 Annexes

### 8.1 IOD contents

#### 8.1.1 Created SOP instances

{_table(("SOP class", "UID", "Content"), [
    ("Comprehensive SR Storage", COMPREHENSIVE_SR, "TID 1500 measurement report (8.1.1.1); the failure note (8.1.1.3)"),
    ("Segmentation Storage", SEGMENTATION, "one segment per finding instance (8.1.1.2)"),
])}

##### 8.1.1.1 Comprehensive SR: measurement report (TID 1500)

Series {SR_SERIES_NUMBER}, one per result. Modules:

{_table(("Module", "Usage"), SR_MODULES)}

{_attributes((
    ("Series Instance UID, SOP Instance UID", "(0020,000E) (0008,0018)", DERIVED),
    ("Modality", "(0008,0060)", "SR"), ("Series Number", "(0020,0011)", str(SR_SERIES_NUMBER)),
    ("Manufacturer", "(0008,0070)", SR_MANUFACTURER),
    ("Completion Flag, Verification Flag", "(0040,A491) (0040,A493)", "COMPLETE, UNVERIFIED"),
    ("Content Template Sequence", "(0040,A504)", "TID 1500, DCMR"),
    ("Current Requested Procedure Evidence Sequence", "(0040,A375)", "every source instance"),
    ("Coding Scheme Identification Sequence", "(0008,0110)", f"{PRIVATE_SCHEME}, where its codes are used"),
))}

Content: the observer is a device (TID 1004: the route's name, manufacturer {SR_MANUFACTURER}); with an operating
point, a TID 1501 group calling the study (finding type Present or Absent, its Probability, the Threshold Value);
one TID 1411 volumetric ROI (a box: a closed POLYLINE per slice) or TID 1410 planar ROI (a POINT) per finding at or
above the threshold, each with its Probability and TID 4019 algorithm identification (name: the route, version: the
image); findings kept below the threshold follow, each marked Operating point = Below operating threshold.

##### 8.1.1.2 Segmentation (RibFrac, generic label images)

Series {SEG_SERIES_NUMBER}, BINARY, one segment per instance. Modules:

{_table(("Module", "Usage"), SEG_MODULES)}

{_attributes((
    ("Series Instance UID, SOP Instance UID", "(0020,000E) (0008,0018)", DERIVED),
    ("Modality", "(0008,0060)", "SEG"), ("Series Number", "(0020,0011)", str(SEG_SERIES_NUMBER)),
    ("Frame of Reference UID", "(0020,0052)", COPIED),
    ("Content Label, Content Description", "(0070,0080) (0070,0081)", "FINDINGS; the study's call at the operating "
     "point (`Fracture present: 0.9123 at threshold 0.1000`)"),
    ("Segment Sequence", "(0062,0002)", "per segment: category, type, modifier and anatomic region (8.3), algorithm "
     "identification, tracking UID and ID, its confidence in Segment Description"),
    ("Referenced Series Sequence", "(0008,1115)", "the source series' instances"),
))}

##### 8.1.1.3 Comprehensive SR: failure note

Series {FAILURE_SERIES_NUMBER}, when a study cannot be processed: a Diagnostic Imaging Report (LN 18748-4) with one
TEXT Comment, a fixed wording naming the route (never text from the images), Completion Flag PARTIAL, every instance
of the study as evidence; patient and study attributes as above.

#### 8.1.2 Usage of attributes from received IODs

Read to route and process a study: Study, Series and SOP Instance UIDs, SOP Class UID, Modality, Body Part
Examined, Image Position and Orientation (Patient), Pixel Spacing, Slice Thickness, Rows, Columns, Instance Number,
Rescale Slope and Intercept, Photometric Interpretation, the pixel data; the patient and study attributes of 8.1.1
are copied into the results. Nothing else is read; received instances are not changed or forwarded.

### 8.2 Data dictionary of private attributes

None: the created objects hold no private attributes.

### 8.3 Coded terminology and templates

Templates: TID 1500 Measurement Report (with TID 1501, 1410, 1411, 4019, 1004) for results; the failure note is a
Diagnostic Imaging Report container with one TEXT item. Codes used (private scheme `{PRIVATE_SCHEME}`, declared in
each object's Coding Scheme Identification Sequence, where no DICOM context group has a code):

{_table(("Coding scheme", "Code value", "Code meaning", "Where"), coded_terms())}

### 8.4 Grayscale image consistency

Not applicable: no Grayscale Standard Display Function or presentation state is created.

### 8.5 Standard extended, specialized and private SOP classes

None.

### 8.6 Private transfer syntaxes

None.
"""
