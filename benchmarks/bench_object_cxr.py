"""object-CXR evaluator speed: whole process (imports, parsing, FROC, AUC, metrics.json, both PNGs).

Synthetic cohorts of 1,000 and 10,000 images with 30 points each (about 2 objects per image) are generated once;
each size is evaluated REPEATS times in a fresh `python evaluators/object_cxr/evaluate.py` process and the fastest
wall time is reported (the machine is shared), with that process's peak memory. Target: < 1.5 s at 10,000 images.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from medchallenge.process_memory import PeakMemory

REPO = Path(__file__).resolve().parents[1]
SIZES = (1000, 10000)
POINTS = 30
REPEATS = 5


def _run_once(command: list[str], env: dict) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS MiB) of one child process."""
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    with PeakMemory(process.pid) as peak:
        _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise RuntimeError(f"{command} failed: {process.stderr.read().decode()}")
    return wall, usage.ru_utime + usage.ru_stime, peak.mib


def run() -> dict:
    from medchallenge.synth import object_cxr as synth

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "shared"), os.environ.get("PYTHONPATH", "")]))
    results: dict = {"points_per_image": POINTS, "repeats": REPEATS}
    with tempfile.TemporaryDirectory(prefix="bench-object-cxr-") as tmp:
        for images in SIZES:
            folder = Path(tmp) / str(images)
            synth.run(argparse.Namespace(out=folder, images=images, points=POINTS, positive_fraction=0.5,
                                         layout="run-files", seed=0))
            command = [sys.executable, str(REPO / "evaluators" / "object_cxr" / "evaluate.py"),
                       "--input", str(folder / "predictions"), "--ground-truth", str(folder / "ground_truth"),
                       "--output", str(folder / "out"), "--no-progress"]
            runs = [_run_once(command, env) for _ in range(REPEATS)]
            wall, cpu, rss = min(runs)
            results[f"images_{images}"] = {"seconds": round(wall, 3), "cpu_seconds": round(cpu, 3),
                                           "peak_rss_mib": round(rss, 1),
                                           "all_seconds": [round(r[0], 3) for r in runs]}
    small, large = results["images_1000"]["seconds"], results["images_10000"]["seconds"]
    results["ratio_10000_to_1000"] = round(large / small, 2)
    results["target_10000_seconds"] = 1.5
    results["meets_target"] = large < 1.5
    return results


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
