"""ImageCLEFmed Caption 2021/2022 files: ground truth and runs, read and validated as the official evaluators did.

Files are read like the official code: `csv.reader(..., quoting=QUOTE_NONE)` on a text file, one row per line,
rows counted from 1 (a blank line is a row with no field), a line with a NUL byte refused as Python 3.9's csv module
refuses it. A run the official evaluator rejects raises InputError naming the file, the line and the rule.

Spec: docs/metrics/imageclef-caption-2022.md and docs/metrics/imageclef-caption-2021.md (files and run validation:
sections 1.1 and 2.1 of both); every section reference below names its document.

Whitespace (`strip`, `split`) and case mapping are Python 3.9's (Unicode 13.0), through medchallenge.official.unicode13.

Value representations (what the metric functions take):
* 2022 concepts: a tuple of stripped concept strings; `()` for a run line `id`, `('',)` for `id|` or an empty GT.
* 2021 concepts: the raw concept field, `''` for a line with the id only.
* captions: the raw caption field (text after a second delimiter is dropped, as the official readers did).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from ..official import unicode13
from ..errors import InputError
from . import python39_csv

# File names inside the ground-truth folder and the run (input) folder.
CONCEPTS_GT = "concepts.tsv"
CAPTIONS_GT = "captions.csv"
CONCEPTS_MANUAL_GT = "concepts_manual.tsv"
SECONDARY_CONCEPTS = "secondary_concepts.txt"
CONCEPTS_RUN = "concepts.csv"
CAPTIONS_RUN = "captions.csv"

PIPE, TAB = "|", "\t"
MAX_CONCEPTS = {"2022": 100, "2021": 1286}  # 2021: the 2018 organiser code's limit
MISSING_SHOWN = 5


class Row(NamedTuple):
    """One record of a run: where it came from (for messages) and its fields."""

    where: str
    fields: list[str]


def read_rows(path: Path, delimiter: str) -> list[Row]:
    """Every line of `path` as csv fields (QUOTE_NONE), labelled `"<path>: line N"`."""
    try:
        with open(path, encoding="utf-8") as handle:
            reader = csv.reader(python39_csv.lines(handle, path), delimiter=delimiter, quoting=csv.QUOTE_NONE)
            return [Row(f"{path}: line {number}", fields) for number, fields in enumerate(reader, start=1)]
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except csv.Error as exc:
        raise InputError(f"{path}: line {reader.line_num}: {exc}") from None


def end_of_file(path: Path, rows: list[Row]) -> str:
    """Where a whole-file rule fails: the last line, as the official messages name it."""
    return f"{path}: line {len(rows)} (end of file)"


def detect_run_delimiter(path: Path) -> str:
    """2021 runs (`--run-delimiter auto`): the first TAB or '|' in the file decides; '|' when there is neither."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return PIPE  # read_rows reports the problem
    positions = [(text.find(sep), sep) for sep in (TAB, PIPE) if sep in text]
    return min(positions)[1] if positions else PIPE


# ---------------------------------------------------------------------------------------------------------------
# Ground truth
# ---------------------------------------------------------------------------------------------------------------


def read_concepts_ground_truth(path: Path, edition: str) -> dict[str, tuple[str, ...] | str]:
    """Concept GT. 2022 (imageclef-caption-2022.md §1.1): TAB, the first line is always skipped (header), each row
    `id<TAB>C1;C2`, concepts stripped, a row without TAB is an error. 2021 (imageclef-caption-2021.md §1.1): TAB, no
    header, `id` alone -> `''`, a blank row or more than two fields is an error. A repeated id: the last row wins
    (official)."""
    rows = read_rows(path, TAB)
    ground_truth: dict[str, tuple[str, ...] | str] = {}
    if edition == "2022":
        for row in rows[1:]:
            if len(row.fields) < 2:
                raise InputError(f"{row.where}: ground-truth row needs 'ID<TAB>concepts' (header line is line 1)")
            ground_truth[row.fields[0]] = tuple(unicode13.strip(c) for c in row.fields[1].split(";"))
    else:
        for row in rows:
            if not 1 <= len(row.fields) <= 2:
                raise InputError(f"{row.where}: ground-truth row needs 'ID' or 'ID<TAB>concepts', "
                                 f"found {len(row.fields)} fields")
            ground_truth[row.fields[0]] = row.fields[1] if len(row.fields) == 2 else ""
    return ground_truth


def read_captions_ground_truth(path: Path, edition: str) -> dict[str, str]:
    """Caption GT (imageclef-caption-2022.md §2.1: `id|caption`; imageclef-caption-2021.md §2.1: `id<TAB>caption`),
    no header, every row needs the delimiter; text after a second delimiter is dropped; a repeated id: the last row
    wins."""
    delimiter = PIPE if edition == "2022" else TAB
    ground_truth: dict[str, str] = {}
    for row in read_rows(path, delimiter):
        if len(row.fields) < 2:
            raise InputError(f"{row.where}: ground-truth row needs 'ID{_shown(delimiter)}caption'")
        ground_truth[row.fields[0]] = row.fields[1]
    return ground_truth


def read_concept_subset(path: Path) -> frozenset[str]:
    """The concept list of the secondary F1: CUIs separated by whitespace or newlines, upper-cased."""
    try:
        concepts = frozenset(unicode13.upper(word) for word in unicode13.split(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None
    if not concepts:
        raise InputError(f"{path}: no concept in the list")
    return concepts


def read_manual_ground_truth(path: Path, ground_truth_ids: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The manually validated concepts (2022 format of concepts.tsv); its ids must be ground-truth ids."""
    manual = read_concepts_ground_truth(path, "2022")
    unknown = sorted(set(manual) - set(ground_truth_ids))
    if unknown:
        raise InputError(f"{path}: image ID {unknown[0]!r} is not in {CONCEPTS_GT}")
    return manual  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------------------------------------------


def _shown(delimiter: str) -> str:
    return "<TAB>" if delimiter == TAB else delimiter


def _check_image_id(row: Row, image_id: str, ground_truth_ids: set[str] | dict, seen: dict[str, str]) -> None:
    if image_id not in ground_truth_ids:
        raise InputError(f"{row.where}: image ID {image_id!r} is not in the test set")
    if image_id in seen:
        raise InputError(f"{row.where}: image ID {image_id!r} appears more than once (first at {seen[image_id]})")


def _check_complete(submitted: dict, ground_truth_ids: Iterable[str], end: str) -> None:
    expected = list(ground_truth_ids)
    if len(submitted) != len(expected):
        missing = [image_id for image_id in expected if image_id not in submitted]
        shown = ", ".join(repr(image_id) for image_id in missing[:MISSING_SHOWN])
        more = f" and {len(missing) - MISSING_SHOWN} more" if len(missing) > MISSING_SHOWN else ""
        raise InputError(f"{end}: the run has {len(submitted)} of the {len(expected)} test-set images; "
                         f"every image must appear exactly once; missing {shown}{more}")


def validate_concept_run_2022(rows: Iterable[Row], ground_truth_ids: dict, end: str) -> dict[str, tuple[str, ...]]:
    """2022 concept run (imageclef-caption-2022.md §1.1), rules in the official order: 1 or 2 fields (`id` or
    `id|C1;C2`), id in the test set, id not repeated, at most 100 concepts, no concept string twice (after strip,
    before upper-casing), and finally every test-set image present. Returns concepts by id in submission order."""
    limit = MAX_CONCEPTS["2022"]
    predictions: dict[str, tuple[str, ...]] = {}
    seen: dict[str, str] = {}
    for row in rows:
        fields = row.fields
        if not 1 <= len(fields) <= 2:
            raise InputError(f"{row.where}: expected 'ID' or 'ID|C1;C2;...' (1 or 2 fields separated by '|'), "
                             f"found {len(fields)}")
        image_id = fields[0]
        _check_image_id(row, image_id, ground_truth_ids, seen)
        concepts = tuple(unicode13.strip(c) for c in fields[1].split(";")) if len(fields) == 2 else ()
        if len(concepts) > limit:
            raise InputError(f"{row.where}: {len(concepts)} concepts for image {image_id!r}; at most {limit}")
        _check_unique_concepts(row, image_id, concepts)
        seen[image_id] = row.where
        predictions[image_id] = concepts
    _check_complete(predictions, ground_truth_ids, end)
    return predictions


def _check_unique_concepts(row: Row, image_id: str, concepts: tuple[str, ...] | list[str]) -> None:
    if len(concepts) != len(set(concepts)):
        repeated = next(c for i, c in enumerate(concepts) if c in concepts[:i])
        raise InputError(f"{row.where}: concept {repeated!r} is given more than once for image {image_id!r}")


def validate_concept_run_2021(rows: Iterable[Row], ground_truth_ids: dict, end: str) -> dict[str, str]:
    """2021 concept run (imageclef-caption-2021.md §1.1, the 2018 organiser code), rules in its order: not blank,
    at most 2 fields, id in the test set, at most 1286 concepts, no concept string twice (split on ';', not
    stripped), id not repeated, every test-set image present. Its quirk is kept: a first line holding only an id
    crashed that code (the duplicate check read a variable not yet set), so such a run is rejected."""
    limit = MAX_CONCEPTS["2021"]
    predictions: dict[str, str] = {}
    seen: dict[str, str] = {}
    concepts: list[str] | None = None
    for row in rows:
        fields = row.fields
        if not fields:
            raise InputError(f"{row.where}: blank line; each line needs at least an image ID")
        if len(fields) > 2:
            raise InputError(f"{row.where}: more than 2 fields; expected 'ID' or 'ID<sep>C1;C2;...'")
        image_id = fields[0]
        if image_id not in ground_truth_ids:
            raise InputError(f"{row.where}: image ID {image_id!r} is not in the test set")
        if len(fields) == 2:
            concepts = fields[1].split(";")
            if len(concepts) > limit:
                raise InputError(f"{row.where}: {len(concepts)} concepts for image {image_id!r}; at most {limit}")
        if concepts is None:
            raise InputError(f"{row.where}: an image ID without a concept field before any line with one crashes "
                             f"the official 2018/2021 evaluator; write 'ID<sep>' (empty concept list) instead")
        _check_unique_concepts(row, image_id, concepts)
        if image_id in seen:
            raise InputError(f"{row.where}: image ID {image_id!r} appears more than once (first at {seen[image_id]})")
        seen[image_id] = row.where
        predictions[image_id] = fields[1] if len(fields) == 2 else ""
    _check_complete(predictions, ground_truth_ids, end)
    return predictions


def validate_caption_run(rows: Iterable[Row], ground_truth_ids: dict, end: str, delimiter: str) -> dict[str, str]:
    """Caption run (imageclef-caption-2022.md §2.1; imageclef-caption-2021.md §2.1): at least 2 fields
    (`id|caption`, empty caption allowed, text after a second delimiter dropped), id in the test set, id not
    repeated, every test-set image present."""
    predictions: dict[str, str] = {}
    seen: dict[str, str] = {}
    for row in rows:
        if len(row.fields) < 2:
            raise InputError(f"{row.where}: expected 'ID{_shown(delimiter)}caption' (at least 2 fields), "
                             f"found {len(row.fields)}")
        image_id = row.fields[0]
        _check_image_id(row, image_id, ground_truth_ids, seen)
        seen[image_id] = row.where
        predictions[image_id] = row.fields[1]
    _check_complete(predictions, ground_truth_ids, end)
    return predictions


def iter_run_lines(predictions: dict[str, str | tuple[str, ...] | list[str]], delimiter: str) -> Iterator[str]:
    """Official run-file lines for predictions (concept lists joined with ';'), e.g. to write a synthetic run."""
    for image_id, value in predictions.items():
        text = value if isinstance(value, str) else ";".join(value)
        yield f"{image_id}{delimiter}{text}\n"
