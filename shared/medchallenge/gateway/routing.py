"""Which detector takes a study: the first route matching the modality and body part of one of its series."""

from __future__ import annotations

from pathlib import Path

from ..dicom.series import dicom_files, read_headers
from .config import Route


def route_study(routes: tuple[Route, ...], study: Path) -> tuple[Route | None, str]:
    """The first route taking one of the study's series, and what the study holds (for the log)."""
    series = read_headers(dicom_files(study / "input"))
    holds = ", ".join(f"{s.modality or '?'}/{s.body_part or '?'} ({len(s.files)})" for s in series)
    for route in routes:
        if any(s.modality in route.modalities and (not route.body_parts or s.body_part in route.body_parts)
               for s in series):
            return route, holds
    return None, holds
