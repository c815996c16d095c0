"""What jobs cost in all: their wall, CPU and GPU seconds summed and the largest peak memory, over job records
(JobResult.to_json, or a phase's state.json), for pre-flight's summary and a phase's status."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def usage_totals(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """`jobs` counted, `wall_seconds`, `cpu_seconds` and `gpu_seconds` summed over the records that have them (None
    where none has) and `max_peak_memory_bytes`."""
    records = list(records)

    def total(key: str) -> float | None:
        values = [record[key] for record in records if record.get(key) is not None]
        return round(sum(values), 3) if values else None

    peaks = [record["peak_memory_bytes"] for record in records if record.get("peak_memory_bytes") is not None]
    return {"jobs": len(records), "wall_seconds": total("wall_seconds"), "cpu_seconds": total("cpu_seconds"),
            "gpu_seconds": total("gpu_seconds"), "max_peak_memory_bytes": max(peaks, default=None)}
