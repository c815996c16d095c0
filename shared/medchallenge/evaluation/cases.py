"""What a challenge's steps give the evaluator command: its reader `Cases`, its per-case step a `CaseRecord`, its
aggregate step a `Summary`. A challenge subclasses them with what it needs (command.Evaluator names its types)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import Any, Self

from ..errors import InputError


class Omitted(enum.Enum):
    """A record field the case took no part in (a subtask without predictions): left out of the record's JSON."""

    OMITTED = "omitted"


OMITTED = Omitted.OMITTED


@dataclass
class CaseRecord:
    """Base of the per-case records: a dataclass of JSON values that round-trips through `to_json`/`from_json`
    (stored in --records folders and written to metrics.json `case`)."""

    def to_json(self) -> dict[str, Any]:
        return {f.name: value for f in fields(self) if (value := getattr(self, f.name)) is not OMITTED}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        try:
            return cls(**data)
        except TypeError as exc:
            raise InputError(f"a per-case record is not a {cls.__name__} ({exc}); records of another evaluator "
                             "version? use an empty --records folder") from None


@dataclass(kw_only=True)
class Cases:
    """What a challenge's reader found: the case ids in scoring order, `sources` (what its per-case step needs,
    sent to the worker processes), the layout read, and notes and warnings on how the inputs were taken. A
    challenge subclasses it with what its aggregate step needs besides the records."""

    ids: list[str]
    sources: Any
    layout: str
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def options(self) -> dict[str, Any]:
        """The challenge's scoring options as resolved (metrics.json `meta.options`, with `strict`)."""
        return {}


@dataclass(kw_only=True)
class Summary:
    """What a challenge's aggregate step gives: the aggregates, `details` for `meta.details`, notes, and the
    `case` section where it is not the records themselves (object-CXR: per image, its records are per block)."""

    aggregates: dict[str, float]
    details: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    case: dict[str, dict[str, Any]] | None = None
