"""DICOM input: find the image series of a folder, choose each study's series, read a CT series as a volume.

A folder (searched recursively; non-DICOM files are ignored) holds one or more studies. Per study, the series of an
accepted modality (CT for the CT detectors) with a volume geometry are candidates: every slice the same size, pixel
spacing and orientation, positions along the slice normal (no gantry tilt) and evenly spaced; localizers are left
out. The candidate with the most slices is the study's series; a study whose candidates all fail gets one clear
line saying why. Slices are ordered by their position along the normal (never by file name), pixel values are
rescaled with RescaleSlope/RescaleIntercept, and pydicom decodes the compressed transfer syntaxes its plug-ins
handle (pylibjpeg: JPEG, JPEG-LS, JPEG 2000, RLE).

Volumes are SimpleITK images: index i = DICOM column, j = row, k = slice in position order; origin = the first
slice's ImagePositionPatient; direction = (row direction, column direction, normal), all LPS as DICOM.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..imaging import check_spacing
from ..limits import check_image_size
from .files import number, read_header, read_pixels

log = logging.getLogger("medchallenge.dicom")

DICOM_PREAMBLE_OFFSET = 128
ORIENTATION_TOLERANCE = 1e-4  # direction cosines
POSITION_TOLERANCE_MM = 0.01  # duplicate slices, off-normal displacement per slice
SPACING_TOLERANCE = 0.01  # relative variation of the slice spacing
SERIES_TAGS = ("StudyInstanceUID", "SeriesInstanceUID", "Modality", "BodyPartExamined")  # what DicomSeries holds
HEADER_TAGS = ("SOPClassUID", "SOPInstanceUID", "StudyInstanceUID", "SeriesInstanceUID", "Modality",
               "ImagePositionPatient", "ImageOrientationPatient", "PixelSpacing", "Rows", "Columns", "ImageType",
               "GantryDetectorTilt", "BodyPartExamined", "FrameOfReferenceUID", "NumberOfFrames", "SeriesNumber")


def is_dicom_file(path: Path) -> bool:
    """Whether `path` is a DICOM Part 10 file (the `DICM` marker after the 128-byte preamble)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(DICOM_PREAMBLE_OFFSET)
            return handle.read(4) == b"DICM"
    except OSError:
        return False


def dicom_files(folder: Path) -> list[Path]:
    """Every DICOM Part 10 file under `folder` (recursively, links not followed), sorted by path."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink() and is_dicom_file(p))


@dataclass(frozen=True)
class DicomSeries:
    """One image series: its UIDs, what the routing needs, and its files (in slice order once checked)."""

    study_uid: str
    series_uid: str
    modality: str
    body_part: str
    files: tuple[Path, ...]
    headers: tuple  # pydicom Datasets without pixel data, in the order of `files`

    @property
    def first(self):
        return self.headers[0]

    @property
    def sop_instance_uids(self) -> tuple[str, ...]:
        return tuple(str(h.SOPInstanceUID) for h in self.headers)


def read_headers(files: list[Path], tags: tuple[str, ...] | None = None) -> list[DicomSeries]:
    """The series of `files` (headers read without pixel data; only the elements `tags` names, when given: the
    study and series UIDs, Modality and BodyPartExamined are always read), in order of study and series UID."""
    wanted = tuple(dict.fromkeys(SERIES_TAGS + tags)) if tags else None
    groups: dict[tuple[str, str], list[tuple[Path, object]]] = defaultdict(list)
    for path in files:
        header = read_header(path, wanted)
        if "SeriesInstanceUID" not in header or "StudyInstanceUID" not in header:
            raise InputError(f"{path}: a DICOM file without StudyInstanceUID or SeriesInstanceUID")
        groups[(str(header.StudyInstanceUID), str(header.SeriesInstanceUID))].append((path, header))
    series = []
    for (study_uid, series_uid), members in sorted(groups.items()):
        first = members[0][1]
        series.append(DicomSeries(study_uid, series_uid, str(first.get("Modality", "")).upper(),
                                  str(first.get("BodyPartExamined", "")).upper(),
                                  tuple(p for p, _ in members), tuple(h for _, h in members)))
    return series


def find_series(folder: Path) -> list[DicomSeries]:
    """Every image series under `folder`; an InputError when there is no DICOM file."""
    files = dicom_files(folder)
    if not files:
        raise InputError(f"{folder}: no DICOM files")
    return read_headers(files)


def _vector(header, keyword: str, length: int, series: DicomSeries) -> np.ndarray:
    value = header.get(keyword)
    try:
        vector = np.asarray([float(v) for v in value], dtype=np.float64) if value is not None else None
    except (TypeError, ValueError):
        vector = None
    if vector is None or vector.shape != (length,) or not np.isfinite(vector).all():
        raise InputError(f"series {series.series_uid}: a slice without a valid {keyword} (expected {length} numbers)")
    return vector


def ordered_volume_series(series: DicomSeries) -> tuple[DicomSeries, float]:
    """`series` with its slices in position order along the normal, and the slice spacing in mm; an InputError
    with one line when the series is no evenly spaced volume of parallel, untilted slices."""
    where = f"series {series.series_uid} ({series.modality}, {len(series.files)} file(s))"
    if any(number(h, "NumberOfFrames", f"series {series.series_uid}", default=1, kind=int) > 1
           for h in series.headers):
        raise InputError(f"{where}: multi-frame images are not supported; export the series as single-frame slices")
    if len(series.files) < 2:
        raise InputError(f"{where}: a volume needs at least 2 slices")
    tilt = [number(h, "GantryDetectorTilt", f"series {series.series_uid}", default=0.0) for h in series.headers]
    if any(abs(t) > 1e-3 for t in tilt):
        raise InputError(f"{where}: gantry tilt {max(tilt, key=abs):g} degrees; tilted acquisitions are refused "
                         "(reconstruct or resample the series without tilt)")
    first = series.first
    orientation = _vector(first, "ImageOrientationPatient", 6, series)
    spacing = _vector(first, "PixelSpacing", 2, series)
    check_spacing(f"series {series.series_uid}", spacing, "PixelSpacing[{}]")
    for header, path in zip(series.headers, series.files):
        if (header.get("Rows"), header.get("Columns")) != (first.get("Rows"), first.get("Columns")):
            raise InputError(f"{path}: {header.get('Rows')}x{header.get('Columns')} pixels, other slices of {where} "
                             f"have {first.get('Rows')}x{first.get('Columns')}")
        if np.abs(_vector(header, "ImageOrientationPatient", 6, series) - orientation).max() > ORIENTATION_TOLERANCE:
            raise InputError(f"{path}: ImageOrientationPatient differs from the other slices of {where}")
        if np.abs(_vector(header, "PixelSpacing", 2, series) - spacing).max() > 1e-6:
            raise InputError(f"{path}: PixelSpacing differs from the other slices of {where}")
    normal = np.cross(orientation[:3], orientation[3:])
    positions = np.asarray([_vector(h, "ImagePositionPatient", 3, series) for h in series.headers])
    along = positions @ normal
    order = np.argsort(along, kind="stable")
    along, positions = along[order], positions[order]
    steps = np.diff(along)
    if steps.min() < POSITION_TOLERANCE_MM:
        k = int(np.argmin(steps))
        raise InputError(f"{where}: two slices at the same position ({series.files[order[k]].name} and "
                         f"{series.files[order[k + 1]].name}); a series holds each position once")
    off_normal = positions - positions[0] - np.outer(along - along[0], normal)
    if np.linalg.norm(off_normal, axis=1).max() > POSITION_TOLERANCE_MM * len(positions):
        raise InputError(f"{where}: slice positions do not lie along the slice normal (gantry tilt or a sheared "
                         "volume); tilted acquisitions are refused")
    mean = float(steps.mean())
    if float(steps.max() - steps.min()) > SPACING_TOLERANCE * mean:
        raise InputError(f"{where}: uneven slice spacing ({steps.min():.3f} to {steps.max():.3f} mm; missing "
                         "slices?); an evenly spaced series is needed")
    ordered = DicomSeries(series.study_uid, series.series_uid, series.modality, series.body_part,
                          tuple(series.files[i] for i in order), tuple(series.headers[i] for i in order))
    return ordered, mean


def _is_localizer(series: DicomSeries) -> bool:
    return "LOCALIZER" in [str(v).upper() for v in series.first.get("ImageType", [])]


def select_study_series(series: list[DicomSeries], modalities: tuple[str, ...]) -> list[tuple[DicomSeries, float]]:
    """Per study, its volume series of an accepted modality with the most slices (ordered, with its slice spacing);
    an InputError naming the study when it has none, with the reason of its best candidate."""
    studies: dict[str, list[DicomSeries]] = defaultdict(list)
    for s in series:
        studies[s.study_uid].append(s)
    chosen = []
    for study_uid, members in studies.items():
        candidates = sorted((s for s in members if s.modality in modalities and not _is_localizer(s)),
                            key=lambda s: -len(s.files))
        if not candidates:
            found = ", ".join(sorted({s.modality or "no modality" for s in members}))
            raise InputError(f"study {study_uid}: no {'/'.join(modalities)} image series (found {found})")
        errors = []
        for candidate in candidates:
            try:
                chosen.append(ordered_volume_series(candidate))
                break
            except InputError as exc:
                errors.append(str(exc))
        else:
            raise InputError(f"study {study_uid}: {errors[0]}")
        for skipped in errors:
            log.info("study %s: skipped %s", study_uid, skipped)
    return chosen


def read_volume(series: DicomSeries, spacing_mm: float):
    """The SimpleITK image (float32 rescaled values, e.g. HU) of an ordered series from `ordered_volume_series`."""
    import SimpleITK as sitk

    first = series.first
    rows = number(first, "Rows", series.files[0], kind=int)
    columns = number(first, "Columns", series.files[0], kind=int)
    check_image_size(series.files[0].parent, (columns, rows, len(series.files)))
    volume = np.empty((len(series.files), rows, columns), dtype=np.float32)
    for k, path in enumerate(series.files):
        dataset, pixels = read_pixels(path)
        if pixels.shape != (rows, columns):
            raise InputError(f"{path}: pixel data of shape {pixels.shape}, expected ({rows}, {columns})")
        slope = number(dataset, "RescaleSlope", path, default=1.0)
        if slope == 0:
            raise InputError(f"{path}: RescaleSlope 0: expected a non-zero number")
        intercept = number(dataset, "RescaleIntercept", path, default=0.0)
        volume[k] = pixels.astype(np.float32) * slope + intercept
    orientation = np.asarray([float(v) for v in first.ImageOrientationPatient])
    normal = np.cross(orientation[:3], orientation[3:])
    image = sitk.GetImageFromArray(volume)
    row_spacing, column_spacing = (float(v) for v in first.PixelSpacing)
    image.SetSpacing((column_spacing, row_spacing, spacing_mm))
    image.SetOrigin(tuple(float(v) for v in first.ImagePositionPatient))
    image.SetDirection(tuple(np.column_stack([orientation[:3], orientation[3:], normal]).ravel()))
    return image
