"""Benchmark: CPU inference seconds per 512x512x100 synthetic CT (read + network + post-processing + write).

`run()` generates a few cases, runs the detector on them in a child process (CPU provider) and returns the median
and per-case seconds, the one-off start-up (imports + session), and the child's peak RSS.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from medchallenge.process_memory import PeakMemory

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "algorithms" / "tb_caverns" / "model" / "tb_caverns.onnx"
CASES = 3
SEED = 4242


def _worker(input_dir: Path, output_dir: Path) -> None:
    """Child process: time each case like the algorithm's batch mode does, print JSON."""
    started = time.perf_counter()
    from medchallenge.algorithms.runner import batch_cases
    from medchallenge.algorithms.tb_caverns import ALGORITHM, CavernDetector
    from medchallenge.io import write_json_atomic

    detector = CavernDetector(MODEL, "cpu")
    startup = time.perf_counter() - started
    seconds = []
    for case in batch_cases(ALGORITHM, input_dir):
        t0 = time.perf_counter()
        prediction = detector.predict(case)
        write_json_atomic(output_dir / f"{case.name}.json", prediction.result)
        seconds.append(time.perf_counter() - t0)
    print(json.dumps({"startup_s": startup, "seconds": seconds, "provider": detector.provider}))


def run() -> dict:
    from medchallenge.synth.tb_caverns import write_cohort

    with tempfile.TemporaryDirectory(prefix="bench_tb_") as tmp:
        tmp = Path(tmp)
        write_cohort(tmp, CASES, SEED)
        proc = subprocess.Popen([sys.executable, __file__, "--worker", str(tmp / "input"), str(tmp / "out")],
                                stdout=subprocess.PIPE, text=True)
        with PeakMemory(proc.pid) as peak:  # this child's own peak RSS
            stdout = proc.stdout.read()
            _, status, _ = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise RuntimeError(f"benchmark worker failed with exit status {proc.returncode}")
        child = json.loads(stdout.strip().splitlines()[-1])
    peak_kb = peak.bytes / 1024
    return {
        "tb_inference_seconds_per_case_median": round(statistics.median(child["seconds"]), 3),
        "tb_inference_seconds_per_case": [round(s, 3) for s in child["seconds"]],
        "tb_inference_startup_seconds": round(child["startup_s"], 3),
        "tb_inference_peak_rss_mb": round(peak_kb / 1024, 1),
        "tb_inference_case_shape": [512, 512, 100],
        "tb_inference_provider": child["provider"],
        "tb_model_size_mb": round(MODEL.stat().st_size / 1e6, 3),
    }


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        _worker(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        print(json.dumps(run(), indent=2))
