"""The phase's cases, each converted by panimg once (as grand-challenge converts an archive's upload once), kept in
`OUT/cases/<case-hash>/` and given to every submission's job on that case."""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..io import write_json_atomic
from ..jobs import upload_case
from .hashes import HashCache, sha256_file
from .layout import PhaseLayout

log = logging.getLogger("medchallenge.phase")


@dataclass(frozen=True)
class Case:
    """A case file and its image as panimg stored it."""

    name: str  # the case file's name (what the evaluator matches with the ground truth)
    hash: str  # sha256 of the case file
    image_pk: str
    image_name: str
    image_file: Path

    def to_json(self) -> dict:
        return {"name": self.name, "hash": self.hash, "image_pk": self.image_pk, "image_name": self.image_name,
                "image_file": str(self.image_file)}


def _converted(layout: PhaseLayout, name: str, case_hash: str) -> Case | None:
    try:
        data = json.loads((layout.case(case_hash) / "case.json").read_text())
        if data["name"] != name:  # the same bytes under another name: panimg's image name is the file's
            return None
        case = Case(name, case_hash, str(data["image_pk"]), str(data["image_name"]), Path(data["image_file"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return case if case.image_file.is_file() else None


def convert_cases(files: list[Path], layout: PhaseLayout, hashes: HashCache) -> list[Case]:
    """Every case file converted, once per phase: a case already in OUT/cases (same bytes) is not converted again.
    Two case files with the same bytes are refused (their jobs would be one)."""
    cases, by_hash = [], {}
    for file in files:
        case_hash = hashes.get(file, "sha256", sha256_file)
        if case_hash in by_hash:
            raise InputError(f"cases {by_hash[case_hash]} and {file.name}: the same file twice")
        by_hash[case_hash] = file.name
        case = _converted(layout, file.name, case_hash)
        if case is None:
            case = convert_case(file, case_hash, layout)
        cases.append(case)
    return cases


def convert_case(file: Path, case_hash: str, layout: PhaseLayout) -> Case:
    """panimg's conversion of one case into OUT/cases/<hash>/ (written aside, then renamed into place)."""
    folder = layout.case(case_hash)
    partial = folder.with_name(f".{case_hash}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    log.info("converting case %s", file.name)
    image = upload_case(file, partial)
    stored = folder / image.file.relative_to(partial)
    case = Case(file.name, case_hash, image.pk, image.name, stored)
    write_json_atomic(partial / "case.json", {**case.to_json(), "metadata": image.metadata})
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    return case
