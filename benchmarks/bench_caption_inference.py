"""Benchmark: the caption algorithm on held-out synthetic figures: official scores per edition and speed.

`run()` generates 1,000 figures per edition with a generator seed training never used (test split, seed 1), runs
the algorithm's entry script on them as the container does (one process, CPU provider, batch mode) and scores its
run files with the evaluator (concept F1, BLEU; ROUGE-1 for 2022). Speed: the same 2022 figures resized to 512 px
on their longer side, the whole process timed (start-up, reading, network, retrieval, run files) with its CPU time,
its peak RSS and the machine's load average (wall-clock speed on a shared machine depends on the other jobs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from medchallenge.process_memory import PeakMemory

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "algorithms" / "imageclef_caption" / "inference.py"
MODEL = ROOT / "algorithms" / "imageclef_caption" / "model" / "imageclef_caption.onnx"
FIGURES = 1000
SEED = 1  # training uses generator seeds 10000+ (train) and 20000+ (valid)
SPEED_SIZE = 512


def _run_algorithm(input_dir: Path, output_dir: Path, edition: str) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MB) of one batch-mode process."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "--input", str(input_dir), "--output", str(output_dir),
                             "--edition", edition, "--device", "cpu"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    with PeakMemory(proc.pid) as peak:
        stderr = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"caption algorithm failed: {stderr[-500:]}")
    return seconds, usage.ru_utime + usage.ru_stime, peak.mib


def _resized(source: Path, target: Path, size: int) -> None:
    from PIL import Image

    target.mkdir(parents=True)
    for path in sorted(source.glob("*.jpg")):
        with Image.open(path) as image:
            scale = size / max(image.size)
            image.resize((round(image.width * scale), round(image.height * scale)), Image.BILINEAR).save(
                target / path.name, quality=90)


def run() -> dict:
    results = {"caption_figures_per_edition": FIGURES, "caption_generator_seed": SEED,
               "caption_model_size_mb": round(MODEL.stat().st_size / 1e6, 2)}
    with tempfile.TemporaryDirectory(prefix="bench_caption_") as tmp:
        tmp = Path(tmp)
        for edition in ("2022", "2021"):
            data = tmp / edition
            subprocess.run([sys.executable, "-m", "medchallenge.synth", "imageclef-caption-images", "--edition",
                            edition, "--out", str(data), "--images", str(FIGURES), "--seed", str(SEED)],
                           check=True, capture_output=True)
            seconds, _, _ = _run_algorithm(data / "input", data / "run", edition)
            subprocess.run([sys.executable, str(ROOT / "evaluators" / "imageclef_caption" / "evaluate.py"),
                            "--edition", edition, "--input", str(data / "run"), "--ground-truth",
                            str(data / "ground_truth"), "--output", str(data / "metrics"), "--no-progress",
                            "--no-plots"], check=True, capture_output=True)
            aggregates = json.loads((data / "metrics" / "metrics.json").read_text())["aggregates"]
            for key, value in aggregates.items():
                results[f"caption_{edition}_{key}"] = round(value, 4)
            results[f"caption_{edition}_figures_per_second_native_sizes"] = round(FIGURES / seconds, 1)
        _resized(tmp / "2022" / "input", tmp / "512", SPEED_SIZE)
        seconds, cpu_seconds, peak = _run_algorithm(tmp / "512", tmp / "512-run", "2022")
        results.update({
            "caption_figures_per_second_512px": round(FIGURES / seconds, 1),
            "caption_seconds_512px_whole_process": round(seconds, 2),
            # what the process itself used, which other jobs on a shared machine do not inflate
            "caption_cpu_seconds_per_figure_512px": round(cpu_seconds / FIGURES, 4),
            "caption_load_average_1min": round(os.getloadavg()[0], 2),
            "caption_peak_rss_mb_512px": round(peak, 1),
            "caption_cpus": len(os.sched_getaffinity(0)),
            "caption_provider": "CPUExecutionProvider",
        })
    return results


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
