"""RibFrac 2020 file formats: instance-mask folders, the info/prediction CSVs, GC detections JSON.

Spec: docs/metrics/ribfrac.md §1 (inputs). Volumes are returned as uint8 arrays in the official (nibabel) axis order
(x, y, z): a transposed, Fortran-ordered view of the (z, y, x) array SimpleITK reads, so no voxel is copied.
"""

from __future__ import annotations

import csv
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..imaging import read_image, require_finite

# §1: label_code -> class name; any other code is NaN in the official code (None here): it fails where a row's
# class is looked up in the confusion matrix (KeyError), §4, §7.
LABEL_CODES = {0: "Background", 1: "Displaced", 2: "Nondisplaced", 3: "Buckle", 4: "Segmental", -1: "Ignore"}
GT_COLUMNS = ("public_id", "label_id", "label_code")
PRED_COLUMNS = ("public_id", "label_id", "confidence", "label_code")
MAX_LABEL = 255  # the official code casts to uint8; larger labels would wrap (§7), we refuse them
VOLUME_SUFFIX = re.compile(r"\.nii(\.gz)?$")
_CASE_ID_NOISE = re.compile(r"(\.nii)|(\.gz)|(-label)")
# pandas.read_csv's default missing-value strings: such a confidence is NaN in the official code
PANDAS_NA = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
                       "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"})


@dataclass(frozen=True)
class GTRow:
    """One row of the ground-truth info CSV (for one case). `label_code` None: the official mapping gives NaN
    (a code outside -1..4, a blank or NA cell, or any cell of a column that holds text); `where` is "file: line N"."""

    label_id: int
    label_code: int | None
    where: str = field(default="", compare=False)
    code_text: str = field(default="", compare=False)


@dataclass(frozen=True)
class PredRow:
    """One row of the prediction CSV or of a GC detections JSON (for one case). `label_code` None as in GTRow;
    `confidence_text` (the value and why) is set where pandas holds the confidence as text (the column holds some
    text that is no number), which the official FROC comparison cannot compare."""

    label_id: int
    confidence: float
    label_code: int | None
    where: str = field(default="", compare=False)
    code_text: str = field(default="", compare=False)
    confidence_text: str | None = None


def case_id_from_filename(name: str) -> str:
    """§1: the basename with every `.nii`, `.gz` and `-label` removed (`RibFrac1-label.nii.gz` -> `RibFrac1`)."""
    return _CASE_ID_NOISE.sub("", os.path.basename(name))


def case_id_from_gc_image_name(name: str) -> str:
    """A GC input image's upload name -> case id: `RibFrac501-image.nii.gz` -> `RibFrac501`."""
    from ..contract import strip_image_suffix

    stem = strip_image_suffix(os.path.basename(name))
    return case_id_from_filename(stem.removesuffix("-image"))


def list_volumes(folder: Path) -> dict[str, Path]:
    """§1: case id -> `.nii`/`.nii.gz` file of a folder (sorted by path); two files with one id are an error."""
    if not folder.is_dir():
        raise InputError(f"{folder}: not a folder")
    volumes: dict[str, Path] = {}
    for path in sorted(p for p in folder.iterdir() if VOLUME_SUFFIX.search(p.name) and p.is_file()):
        case_id = case_id_from_filename(path.name)
        if case_id in volumes:
            raise InputError(f"{folder}: case {case_id} has two volumes: {volumes[case_id].name} and {path.name}")
        volumes[case_id] = path
    return volumes


def find_csv(folder: Path) -> Path:
    """§1: the folder's one `.csv` file (the official code takes the first in directory order; we need exactly one)."""
    found = sorted(p for p in folder.iterdir() if p.name.endswith(".csv") and p.is_file())
    if len(found) != 1:
        names = ", ".join(p.name for p in found) or "none"
        raise InputError(f"{folder}: expected exactly one .csv file, found {len(found)} ({names})")
    return found[0]


def _parse_int(text: str, what: str, where: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{where}: {what} {text!r} is not a number") from None
    if not math.isfinite(value) or value != int(value):
        raise InputError(f"{where}: {what} {text!r} is not an integer")
    return int(value)


def _is_number(text: str) -> bool:
    """Whether pandas' CSV parser reads `text` as a number (Python's float, which also takes '1_0', less that)."""
    if "_" in text:
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_na(text: str) -> bool:
    return text.strip() in PANDAS_NA


def _code_of(value: float) -> int | None:
    """The class code pandas' `map(label_code_dict)` finds for a number (1.0 -> 1), else None (NaN)."""
    return int(value) if math.isfinite(value) and value == int(value) and int(value) in LABEL_CODES else None


def _text_cell(column: list[str]) -> str | None:
    """The first cell that makes pandas read the whole column as text (not a number, not NA), if any."""
    return next((text for text in column if not _is_na(text) and not _is_number(text)), None)


def _csv_code(text: str, column_text: str | None) -> int | None:
    """A CSV label_code as the official mapping sees it: -1..4, else None (NaN): another number, a blank or NA
    cell, or any cell when the column holds text (pandas then keeps strings, which the mapping does not find)."""
    if column_text is not None or _is_na(text):
        return None
    return _code_of(float(text))


def parse_json_label_code(value: object, where: str) -> int | None:
    """A GC detection's label_code: -1..4, None (as NaN) for JSON null or another number; text is an error."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)) \
            or (isinstance(value, str) and not _is_number(value)):
        raise InputError(f"{where}: label_code {value!r} is not a number")
    return _code_of(float(value))


def parse_label_id(value: object, where: str) -> int:
    """A label id: an integer 0..255."""
    label = _parse_int(str(value), "label_id", where) if not isinstance(value, bool) else -1
    if not 0 <= label <= MAX_LABEL:
        raise InputError(f"{where}: label_id {value!r} is not an integer in 0..{MAX_LABEL}")
    return label


def parse_confidence(value: object, where: str) -> float:
    """A confidence as pandas reads it (used as-is, no clipping: §1): a number, `inf`/`-inf`, or NaN for a blank
    cell, a pandas NA string (`nan`, `NA`, `null`, ...) or JSON null. Text that is no number makes the official
    FROC comparison fail, so it is an error."""
    if value is None or (isinstance(value, str) and value.strip() in PANDAS_NA):
        return math.nan
    try:
        if isinstance(value, bool):
            raise TypeError
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"{where}: confidence {value!r} is not a number") from None


def _read_csv(path: Path, columns: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            header = [name.strip() for name in reader.fieldnames or []]
            missing = [c for c in columns if c not in header]
            if missing:
                raise InputError(f"{path}: line 1: missing column(s) {', '.join(missing)} (need {','.join(columns)})")
            reader.fieldnames = header
            rows = []
            for row in reader:
                if not any((value or "").strip() for value in row.values() if isinstance(value, str)):
                    continue
                for column in columns:
                    if row.get(column) is None:
                        raise InputError(f"{path}: line {reader.line_num}: missing value for {column}")
                rows.append((reader.line_num, {c: row[c].strip() for c in columns}))
            return rows
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except (csv.Error, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable CSV file ({exc})") from None


def read_gt_csv(path: Path) -> dict[str, list[GTRow]]:
    """The GT info CSV `public_id,label_id,label_code` -> rows per case, in file order (duplicates kept); codes
    as the official mapping sees them (`_csv_code`)."""
    rows = _read_csv(path, GT_COLUMNS)
    code_column = _text_cell([row["label_code"] for _, row in rows])
    table: dict[str, list[GTRow]] = {}
    for line, row in rows:
        where = f"{path}: line {line}"
        table.setdefault(row["public_id"], []).append(GTRow(
            parse_label_id(row["label_id"], where), _csv_code(row["label_code"], code_column), where,
            row["label_code"]))
    return table


def text_code_cell(rows: Iterable[GTRow | PredRow]) -> str | None:
    """The first label_code of a CSV that is text (it makes pandas read every code of the file as text)."""
    return _text_cell([row.code_text for row in rows])


def non_finite_confidences(rows: Iterable[PredRow]) -> int:
    """How many instance rows (label_id > 0) have a NaN or infinite confidence (never / always above the FROC
    thresholds); the background row's confidence is never read."""
    return sum(1 for row in rows if row.label_id > 0 and not math.isfinite(row.confidence))


def read_pred_csv(path: Path) -> dict[str, list[PredRow]]:
    """The prediction CSV `public_id,label_id,confidence,label_code` -> rows per case (duplicates kept: §7).

    Codes and confidences are read as pandas reads the columns: a column with some text that is no number is
    text throughout (`code_text` / `confidence_text`); whether that matters depends on whether the official code
    reads the row, decided per case (metrics.detection_rows)."""
    rows = _read_csv(path, PRED_COLUMNS)
    code_column = _text_cell([row["label_code"] for _, row in rows])
    text_line = next((line for line, row in rows if not _is_na(row["confidence"])
                      and not _is_number(row["confidence"])), None)
    table: dict[str, list[PredRow]] = {}
    for line, row in rows:
        where = f"{path}: line {line}"
        text = row["confidence"]
        confidence = float(text) if _is_number(text) else math.nan
        confidence_text = None
        if text_line is not None and not _is_na(text):
            confidence_text = (f"{text!r} (no number)" if not _is_number(text) else
                               f"{text!r} (held as text: line {text_line}'s confidence is no number)")
        table.setdefault(row["public_id"], []).append(PredRow(
            parse_label_id(row["label_id"], where), confidence, _csv_code(row["label_code"], code_column), where,
            row["label_code"], confidence_text))
    return table


def parse_detections(document: object, where: str) -> list[PredRow]:
    """GC `rib-fracture-detections` value `{"detections": [{"label_id", "confidence", "label_code"}, ...]}`.

    Read as the same rows in the official CSV would be: a code outside -1..4 or null is NaN (None), a null
    confidence NaN. A confidence that is no number is an error, except for the background entry (label_id 0),
    whose confidence the official code never reads."""
    if not isinstance(document, dict) or not isinstance(document.get("detections"), list):
        raise InputError(f"{where}: expected an object with a list 'detections'")
    rows = []
    for index, item in enumerate(document["detections"]):
        here = f"{where}: detections[{index}]"
        if not isinstance(item, dict) or any(k not in item for k in ("label_id", "confidence", "label_code")):
            raise InputError(f"{here}: expected an object with label_id, confidence, label_code")
        label = parse_label_id(item["label_id"], here)
        try:
            confidence = parse_confidence(item["confidence"], here)
        except InputError:
            if label != 0:
                raise
            confidence = math.nan
        rows.append(PredRow(label, confidence, parse_json_label_code(item["label_code"], here), here,
                            repr(item["label_code"])))
    return rows


class _ImagePixels:
    """Exposes a SimpleITK image's pixel buffer to numpy and keeps the image alive as the array's base.

    (`sitk.GetArrayViewFromImage` alone does not keep the image alive, `GetArrayFromImage` copies.)
    """

    def __init__(self, image: object, view: np.ndarray) -> None:
        self.image = image
        self.__array_interface__ = view.__array_interface__


def read_label_volume(path: Path) -> np.ndarray:
    """Read an instance-label volume in its stored integer type and return it as uint8 in (x, y, z) order.


    §1: the official code casts to uint8 (labels modulo 256, fractions truncated). Fractions are truncated here
    too; labels outside 0..255 are refused (they would wrap), as is anything that is not one 3-D channel.
    """
    import SimpleITK as sitk

    # NaN or infinite NIfTI voxels: ITK reads them as 0, as the official uint8 cast of nibabel's values does (the
    # evaluator notes them, `--strict` refuses them); other formats keep them, refused below
    image = read_image(path, "label volume", allow_non_finite=True)
    if image.GetNumberOfComponentsPerPixel() != 1 or image.GetDimension() != 3:
        raise InputError(f"{path}: expected a 3-D single-channel label volume, got {image.GetDimension()}-D "
                         f"with {image.GetNumberOfComponentsPerPixel()} component(s)")
    zyx = sitk.GetArrayViewFromImage(image)
    if zyx.dtype == np.uint8:
        return np.asarray(_ImagePixels(image, zyx)).T
    require_finite(zyx, path, "label volume")
    low, high = (zyx.min(), zyx.max()) if zyx.size else (0, 0)
    if low < 0 or high >= MAX_LABEL + 1:
        raise InputError(f"{path}: label values must be in 0..{MAX_LABEL} (the official code would wrap them "
                         f"modulo 256), found {low}..{high}")
    return zyx.astype(np.uint8).T
