"""Benchmark: the object-CXR algorithm on synthetic radiographs: held-out accuracy, speed and memory.

* Held-out: 1,000 radiographs of seed 2323 at the generator's default size (8-bit JPEG, longer side 1,500-3,000 px,
  as the challenge's images), a seed never used in training or tuning (the model was trained on seeds 1000, 3000 and
  6000 and tuned on seeds 4100, 1100 and 4300; `training/train_object_cxr.py`, `training/tune_object_cxr.py`,
  `make models`), generated once into
  bench/object_cxr/ (parts of 100 in parallel) and kept there; the algorithm's batch mode (inference script, whole
  process), then the project's evaluator: `auc`, `froc`. Beside it, not instead of it, the same at 512 px (1,000
  radiographs of seed 777 rendered at 512 px, the figure of the earlier model card; keys `..._512px_...`).
* Speed: 40 JPEGs of 2,000 px (10 generated radiographs, each under 4 names) through the inference script as one
  process (decode included, the next image decoded in a second thread while the network runs) on the cores this
  process may use: images/s over the whole process (start-up included), the CPU seconds per image (which do not
  depend on what else runs on a shared machine; the 1-minute load average is recorded beside them), and the
  process's peak RSS.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from medchallenge.process_memory import PeakMemory

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "object_cxr"
INFERENCE = ROOT / "algorithms" / "object_cxr" / "inference.py"
HELD_OUT_SEED, HELD_OUT_IMAGES, CHUNK = 2323, 1000, 100
SMALL_SEED, SMALL_SIZE = 777, 512  # the 512-px figure beside the default-size one
SPEED_SEED, SPEED_SIZE, SPEED_UNIQUE, SPEED_COPIES = 778, 2000, 10, 4


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT / "shared"))


def _generate(out: Path, images: int, seed: int, size: int | None) -> None:
    """Generate a cohort in parts of at most CHUNK images, as many at a time as there are cores (a part already
    there is kept), then join them (hard links) as out/input + out/ground_truth."""
    if (out / "ground_truth" / "annotations.csv").exists():
        return
    parts = [(k, min(CHUNK, images - k * CHUNK)) for k in range(-(-images // CHUNK))]
    todo = [(k, n) for k, n in parts if not (out / f"part{k:02d}" / "ground_truth" / "annotations.csv").exists()]
    cores = len(os.sched_getaffinity(0))
    for start in range(0, len(todo), cores):
        procs = [subprocess.Popen([sys.executable, "-m", "medchallenge.synth", "object-cxr-images", "--out",
                                   str(out / f"part{k:02d}"), "--images", str(n), "--first", str(k * CHUNK), "--seed",
                                   str(seed), *(["--size", str(size)] if size else [])], env=_env())
                 for k, n in todo[start:start + cores]]
        if any(p.wait() for p in procs):
            raise RuntimeError("generating the benchmark radiographs failed")
    (out / "input").mkdir(parents=True, exist_ok=True)
    rows = ["image_name,annotation"]
    for k, _ in parts:
        part = out / f"part{k:02d}"
        rows += (part / "ground_truth" / "annotations.csv").read_text().splitlines()[1:]
        for image in sorted((part / "input").iterdir()):
            if not (out / "input" / image.name).exists():
                os.link(image, out / "input" / image.name)
    (out / "ground_truth").mkdir(exist_ok=True)
    (out / "ground_truth" / "annotations.csv").write_text("\n".join(rows) + "\n")


def _infer(input_dir: Path, output_dir: Path) -> dict:
    """The inference script as one process: wall seconds, CPU seconds, peak RSS."""
    shutil.rmtree(output_dir, ignore_errors=True)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(INFERENCE), "--input", str(input_dir), "--output", str(output_dir),
                             "--device", os.environ.get("MEDCHALLENGE_DEVICE", "auto")],
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with PeakMemory(proc.pid) as peak:
        log = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"inference failed: {log[-2000:]}")
    provider = re.search(r"provider (\w+)", log)
    return {"wall_s": wall, "peak_rss_mb": peak.mib,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "provider": provider.group(1) if provider else "unknown"}


def _evaluate(predictions: Path, ground_truth: Path, out: Path) -> dict:
    subprocess.run([sys.executable, str(ROOT / "evaluators" / "object_cxr" / "evaluate.py"), "--input",
                    str(predictions), "--ground-truth", str(ground_truth), "--output", str(out), "--no-progress",
                    "--no-plots"], env=_env(), check=True, capture_output=True)
    return json.loads((out / "metrics.json").read_text())["aggregates"]


def _held_out(seed: int, size: int | None) -> dict:
    """Generate (once) and run the held-out cohort of `seed` at `size` (None: the generator's default sizes)."""
    name = f"seed{seed}-{size or 'default'}"
    cohort = BENCH / f"heldout-{name}"
    _generate(cohort, HELD_OUT_IMAGES, seed, size)
    timing = _infer(cohort / "input", BENCH / f"predictions-{name}")
    metrics = _evaluate(BENCH / f"predictions-{name}", cohort / "ground_truth", BENCH / f"metrics-{name}")
    return {**metrics, "images_per_second": HELD_OUT_IMAGES / timing["wall_s"]}


def run() -> dict:
    held = _held_out(HELD_OUT_SEED, None)
    small = _held_out(SMALL_SEED, SMALL_SIZE)

    speed = BENCH / f"speed-seed{SPEED_SEED}-{SPEED_SIZE}"
    _generate(speed, SPEED_UNIQUE, SPEED_SEED, SPEED_SIZE)
    copies = BENCH / "speed-input"
    shutil.rmtree(copies, ignore_errors=True)
    copies.mkdir(parents=True)
    for image in sorted((speed / "input").iterdir()):
        for k in range(SPEED_COPIES):
            os.link(image, copies / f"{image.stem}-{k}{image.suffix}")
    timing = _infer(copies, BENCH / "speed-predictions")
    n = SPEED_UNIQUE * SPEED_COPIES
    return {
        "object_cxr_heldout_images": HELD_OUT_IMAGES,
        "object_cxr_heldout_seed": HELD_OUT_SEED,
        "object_cxr_heldout_size": "default: longer side 1500-3000 px",
        "object_cxr_heldout_auc": round(held["auc"], 4),
        "object_cxr_heldout_froc": round(held["froc"], 4),
        "object_cxr_heldout_sensitivity": {k.removeprefix("sensitivity_at_fp_"): round(v, 4)
                                           for k, v in held.items() if k.startswith("sensitivity_at_fp_")},
        "object_cxr_heldout_images_per_second": round(held["images_per_second"], 2),
        "object_cxr_heldout_512px_seed": SMALL_SEED,
        "object_cxr_heldout_512px_auc": round(small["auc"], 4),
        "object_cxr_heldout_512px_froc": round(small["froc"], 4),
        "object_cxr_speed_image_px": SPEED_SIZE,
        "object_cxr_speed_images": n,
        "object_cxr_images_per_second_whole_process": round(n / timing["wall_s"], 2),
        # CPU seconds (user + system, all threads, start-up included) per image: what the rate would be on one
        # otherwise idle core, independent of other load on a shared machine
        "object_cxr_cpu_seconds_per_image": round(timing["cpu_s"] / n, 4),
        "object_cxr_images_per_cpu_second": round(n / timing["cpu_s"], 2),
        "object_cxr_load_average_1min": round(os.getloadavg()[0], 2),
        "object_cxr_peak_rss_mb": round(timing["peak_rss_mb"], 1),
        "object_cxr_cores": len(os.sched_getaffinity(0)),
        "object_cxr_provider": timing["provider"],
        "object_cxr_model_size_mb": round((INFERENCE.parent / "model" / "object_cxr.onnx").stat().st_size / 1e6, 3),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
