"""Benchmark: what the evaluator's review.html costs, per challenge, on `make demo`'s data.

Per challenge (its default configuration): the demo's inputs (`medchallenge.demo.generate`: the demo size, its
seed), the algorithm's predictions (its inference script in batch mode, CPU), then the evaluator command as a user
runs it (`python evaluate.py`, interpreter start and figures included), REPEATS times each way, the three ways
interleaved so that the load of a shared machine falls on each alike: without a review (no case images: the
default, as on grand-challenge), with `--images input/` (what compose.yaml's images mount gives) and with `--review`
and no images (what needs no image). Median wall seconds of each, the review's cost (with images minus without),
the page's size and figures, and the 1-minute load average around the runs.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from medchallenge.demo import generate
from medchallenge.registry import CHALLENGES, Configuration
from medchallenge.review.evaluator_review import REVIEW_PAGE

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 3
FIGURE = re.compile(r'<img alt="[^"]*" src="data:image/png;base64,')


def _env(build_args: dict[str, str]) -> dict[str, str]:
    """This checkout's package, the CPU, and the options an image bakes in as its environment."""
    return {**os.environ, "PYTHONPATH": str(ROOT / "shared"), "MEDCHALLENGE_DEVICE": "cpu", **build_args}


def _predict(configuration: Configuration, data: Path) -> Path:
    """The algorithm's batch mode over data/input: data/predictions."""
    service = configuration.algorithm_service
    inference = ROOT / "algorithms" / configuration.challenge.module / "inference.py"
    subprocess.run([sys.executable, str(inference), "--input", str(data / "input"), "--output",
                    str(data / "predictions")], check=True, stdout=subprocess.DEVNULL,
                   env=_env(dict(service.build_args)))
    return data / "predictions"


def _evaluate_seconds(configuration: Configuration, data: Path, output: Path, options: list[str]) -> float:
    """One `python evaluate.py` run: wall seconds."""
    evaluate = ROOT / "evaluators" / configuration.challenge.module / "evaluate.py"
    env = _env(dict(configuration.edition.build_args))
    started = time.perf_counter()
    subprocess.run([sys.executable, str(evaluate), "--input", str(data / "predictions"), "--ground-truth",
                    str(data / "ground_truth"), "--output", str(output), "--no-progress", *options], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - started


def _measure(configuration: Configuration, data: Path) -> dict:
    ways = {"without_review": [], "with_images": ["--images", str(data / "input")],
            "review_without_images": ["--review"]}
    seconds: dict[str, list[float]] = {way: [] for way in ways}
    load = [os.getloadavg()[0]]
    for _ in range(REPEATS):
        for way, options in ways.items():
            seconds[way].append(_evaluate_seconds(configuration, data, data / way, options))
    load.append(os.getloadavg()[0])
    medians = {way: statistics.median(values) for way, values in seconds.items()}
    page = data / "with_images" / REVIEW_PAGE
    return {
        "cases": sum(1 for path in (data / "input").iterdir() if path.is_file()),
        **{f"{way}_seconds": round(median, 2) for way, median in medians.items()},
        "review_seconds": round(medians["with_images"] - medians["without_review"], 2),
        "review_written_without_images_by_default": (data / "without_review" / REVIEW_PAGE).exists(),
        "review_page_kib": round(page.stat().st_size / 1024, 1),
        "review_figures": len(FIGURE.findall(page.read_text())),
        "load_average_1min": [round(value, 2) for value in load],
    }


def run() -> dict:
    results: dict = {"repeats": REPEATS, "cpus": len(os.sched_getaffinity(0))}
    with tempfile.TemporaryDirectory(prefix="bench_review_") as tmp:
        for challenge in CHALLENGES.values():
            configuration = challenge.default
            data = Path(tmp) / configuration.demo_folder
            generate(configuration, data)
            _predict(configuration, data)
            results[configuration.name] = _measure(configuration, data)
    return results


if __name__ == "__main__":
    print(run())
