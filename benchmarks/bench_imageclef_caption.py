"""ImageCLEFmed Caption evaluator on a synthetic 7,601-image set (the 2022 test set's size), concepts + captions.

Targets (issue 5): scoring under 1 s, the whole process (interpreter start, PNG included) under 2 s, 2022 edition.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from medchallenge.evaluators import imageclef_caption as ev
from medchallenge.process_memory import PeakMemory
from medchallenge.synth import imageclef_caption as synth

IMAGES = 7601
EVALUATE = Path(__file__).resolve().parents[1] / "evaluators" / "imageclef_caption" / "evaluate.py"


def _scoring_seconds(args: list[str], repeats: int) -> float:
    """In-process: read + validate, per-image scores, aggregates, metrics.json (no PNG), caches cleared."""
    times = []
    for _ in range(repeats):
        ev.load_inputs.cache_clear()
        start = time.perf_counter()
        assert ev.main([*args, "--no-plots"]) == 0
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _whole_process(args: list[str], repeats: int) -> tuple[float, float]:
    """`python evaluate.py ...` as a user runs it (PNG included): median wall seconds, peak RSS in MiB."""
    times, peaks = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, str(EVALUATE), *args], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        with PeakMemory(proc.pid) as peak:
            if proc.wait():
                raise RuntimeError(f"{EVALUATE} failed with exit status {proc.returncode}")
        times.append(time.perf_counter() - start)
        peaks.append(peak.mib)
    return statistics.median(times), max(peaks)


def run() -> dict:
    results: dict = {"images": IMAGES, "target_scoring_seconds": 1.0, "target_whole_process_seconds": 2.0}
    with tempfile.TemporaryDirectory() as tmp:
        for edition in ("2022", "2021"):
            root = Path(tmp) / edition
            data = synth.generate(edition, IMAGES, concepts=400, seed=0)
            synth.write_cohort(root, data, edition, gc_layout=False, secondary=edition == "2022", seed=0)
            args = ["--edition", edition, "--input", str(root / "predictions"), "--ground-truth",
                    str(root / "ground_truth"), "--output", str(root / "out"), "--no-progress"]
            scoring = _scoring_seconds(args, repeats=5 if edition == "2022" else 3)
            whole, peak = _whole_process(args, repeats=3)
            results[f"scoring_seconds_{edition}"] = round(scoring, 3)
            results[f"whole_process_seconds_{edition}"] = round(whole, 3)
            results[f"peak_rss_mib_{edition}"] = round(peak, 1)
    return results


if __name__ == "__main__":
    print(run())
