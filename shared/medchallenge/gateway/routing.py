"""Which detector takes a study: the first route matching the modality and body part of one of its series."""

from __future__ import annotations

from pathlib import Path

from ..dicom.series import SERIES_TAGS, dicom_files, read_headers
from .config import Route


def route_study(routes: tuple[Route, ...], study: Path) -> tuple[Route | None, str]:
    """The first route taking one of the study's series, and what the study holds (for the log). Only the elements
    routing needs are kept of each header (a study of many files holds little in memory while it is routed)."""
    series = read_headers(dicom_files(study / "input"), SERIES_TAGS)
    holds = ", ".join(f"{s.modality or '?'}/{s.body_part or '?'} ({len(s.files)})" for s in series)
    for route in routes:
        if any(s.modality in route.modalities and (not route.body_parts or s.body_part in route.body_parts)
               for s in series):
            return route, holds
    return None, holds
