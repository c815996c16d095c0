"""Benchmark: the RibFrac algorithm on a held-out synthetic cohort (quality through the project's evaluator) and
its CPU speed and peak memory on 512x512x300 CTs (the whole pipeline: read, resample, network, instances, write).
Wall seconds depend on what else runs on the machine: the CPU seconds of the process (all threads) and the load
average are reported beside them.

`run()` generates 20 cases of a seed training never uses (default shape 512 x 512 x 250-350 slices, drawn
scanner spacings) plus one 512x512x300 case, runs the algorithm on them in a child process (CPU provider, as
many threads as cores are allowed) and scores the predictions with the RibFrac evaluator. RIBFRAC_BENCH_SHAPE
(x,y,z) sets the cohort's shape, RIBFRAC_BENCH_CASES its size, RIBFRAC_BENCH_MODEL another model file.
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
MODEL = Path(os.environ.get("RIBFRAC_BENCH_MODEL") or ROOT / "algorithms" / "ribfrac" / "model" / "ribfrac.onnx")
QUALITY_CASES = int(os.environ.get("RIBFRAC_BENCH_CASES", "20"))
SEED = 777  # training uses 30000+ and 40000+
SPEED_SHAPE = (512, 512, 300)
# the quality cohort's shape: default 512 x 512 x 250-350; e.g. "256,256,160" (a field of view on the lateral chest
# wall, about 8 times faster) where time is short
QUALITY_SHAPE = tuple(int(v) for v in os.environ["RIBFRAC_BENCH_SHAPE"].split(",")) if os.environ.get(
    "RIBFRAC_BENCH_SHAPE") else None


def _worker(input_dir: Path, output_dir: Path) -> None:
    """Child process: predict and write every case as batch mode does, timing each; print JSON."""
    started = time.perf_counter()
    from medchallenge.algorithms.ribfrac import ALGORITHM, FractureDetector
    from medchallenge.algorithms.runner import batch_cases, write_output
    from medchallenge.io import write_text_atomic

    detector = FractureDetector(MODEL, "cpu")
    startup = time.perf_counter() - started
    seconds, cpu_seconds, results = [], [], []
    for case in batch_cases(ALGORITHM, input_dir):
        t0, c0 = time.perf_counter(), time.process_time()
        prediction = detector.predict(case)
        for name, value in ALGORITHM.case_outputs(case, prediction).items():
            write_output(output_dir / name, value)
        seconds.append(time.perf_counter() - t0)
        cpu_seconds.append(time.process_time() - c0)  # every thread's CPU time: the work, whatever the load
        results.append((case, prediction))
    for name, text in ALGORITHM.run_files(results).items():
        write_text_atomic(output_dir / name, text)
    print(json.dumps({"startup_s": startup, "seconds": seconds, "cpu_seconds": cpu_seconds,
                      "provider": detector.provider}))


def _run_worker(input_dir: Path, output_dir: Path) -> tuple[dict, float]:
    """The worker's JSON and its peak RSS (MB)."""
    proc = subprocess.Popen([sys.executable, __file__, "--worker", str(input_dir), str(output_dir)],
                            stdout=subprocess.PIPE, text=True)
    with PeakMemory(proc.pid) as peak:  # this child's own peak RSS
        stdout = proc.stdout.read()
        _, status, _ = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"benchmark worker failed with exit status {os.waitstatus_to_exitcode(status)}")
    return json.loads(stdout.strip().splitlines()[-1]), peak.mib


def run() -> dict:
    from medchallenge.evaluators.ribfrac import main as evaluate
    from medchallenge.synth.ribfrac_ct import write_cohort

    with tempfile.TemporaryDirectory(prefix="bench_ribfrac_") as tmp:
        tmp = Path(tmp)
        write_cohort(tmp / "speed", 1, SEED + 1, SPEED_SHAPE)
        speed, speed_rss = _run_worker(tmp / "speed" / "input", tmp / "speed" / "out")
        write_cohort(tmp / "quality", QUALITY_CASES, SEED, QUALITY_SHAPE)
        quality, quality_rss = _run_worker(tmp / "quality" / "input", tmp / "quality" / "out")
        if evaluate(["--input", str(tmp / "quality" / "out"), "--ground-truth", str(tmp / "quality" / "ground_truth"),
                     "--output", str(tmp / "metrics"), "--no-progress", "--no-plots"]) != 0:
            raise RuntimeError("the RibFrac evaluator refused the algorithm's outputs")
        aggregates = json.loads((tmp / "metrics" / "metrics.json").read_text())["aggregates"]
    return {
        "ribfrac_heldout_seed": SEED,
        "ribfrac_heldout_cases": QUALITY_CASES,
        "ribfrac_heldout_shape": list(QUALITY_SHAPE) if QUALITY_SHAPE else "512x512x250-350",
        **{f"ribfrac_heldout_{key}": round(aggregates[key], 4) for key in
           ("froc_average", "max_recall", "average_fp_at_max_recall", "macro_f1", "target_aware_f1",
            "prediction_aware_f1", "dice")},
        "ribfrac_inference_seconds_512x512x300": round(speed["seconds"][0], 2),
        "ribfrac_inference_cpu_seconds_512x512x300": round(speed["cpu_seconds"][0], 2),
        "ribfrac_inference_peak_rss_mb_512x512x300": round(speed_rss, 1),
        "ribfrac_load_average_1min": round(os.getloadavg()[0], 2),
        "ribfrac_inference_seconds_per_case_median": round(statistics.median(quality["seconds"]), 2),
        "ribfrac_inference_peak_rss_mb": round(max(speed_rss, quality_rss), 1),
        "ribfrac_inference_startup_seconds": round(speed["startup_s"], 2),
        "ribfrac_inference_threads": len(os.sched_getaffinity(0)),
        "ribfrac_inference_provider": speed["provider"],
        "ribfrac_model_size_mb": round(MODEL.stat().st_size / 1e6, 3),
    }


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        _worker(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        print(json.dumps(run(), indent=2))
