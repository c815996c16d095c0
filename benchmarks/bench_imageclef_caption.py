"""ImageCLEFmed Caption evaluator on a synthetic 7,601-image set (the 2022 test set's size), concepts + captions.

Targets (issue 5): scoring under 1 s, the whole process (interpreter start, PNG included) under 2 s, 2022 edition,
as an organiser runs it: no case images, so no review.html. Beside the wall seconds, the whole process's CPU seconds
(user + system), which what else runs on a shared machine does not inflate.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from medchallenge.evaluators import imageclef_caption as ev
from medchallenge.process_memory import PeakMemory
from medchallenge.review.evaluator_review import REVIEW_PAGE
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


def _whole_process(args: list[str], repeats: int) -> tuple[float, float, float]:
    """`python evaluate.py ...` as a user runs it (PNG included): median wall seconds, median CPU seconds, peak RSS
    in MiB."""
    times, cpu, peaks = [], [], []
    for _ in range(repeats):
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, str(EVALUATE), *args], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        with PeakMemory(proc.pid) as peak:
            _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            raise RuntimeError(f"{EVALUATE} failed with exit status {proc.returncode}")
        times.append(time.perf_counter() - start)
        cpu.append(usage.ru_utime + usage.ru_stime)
        peaks.append(peak.mib)
    return statistics.median(times), statistics.median(cpu), max(peaks)


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
            whole, cpu, peak = _whole_process(args, repeats=3)
            assert not (root / "out" / REVIEW_PAGE).exists()  # the default: no case images, no review
            results[f"scoring_seconds_{edition}"] = round(scoring, 3)
            results[f"whole_process_seconds_{edition}"] = round(whole, 3)
            results[f"whole_process_cpu_seconds_{edition}"] = round(cpu, 3)
            results[f"peak_rss_mib_{edition}"] = round(peak, 1)
        results["load_average_1min"] = round(os.getloadavg()[0], 2)
    return results


if __name__ == "__main__":
    print(run())
