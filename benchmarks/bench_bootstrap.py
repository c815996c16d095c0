"""Bootstrap and leaderboard benchmark: 1,000 resamples of a 160-case RibFrac test set, the other evaluators'
bootstrap, and `medchallenge leaderboard` over four RibFrac submissions.

`run()` generates (once, cached under $MEDCHALLENGE_BENCH_DIR or /tmp/medchallenge-bench) a 160-case RibFrac cohort
(64x64x48 masks: the bootstrap works on the records, whose size does not depend on the volumes) and three more
submissions on its ground truth (the confidences with Gaussian noise), and the other challenges' synthetic
cohorts. Times are the best of 3 in this process: RibFrac's vectorised bootstrap, its generic path (the aggregate
on every resample, timed on 25 resamples and scaled to 1,000), each other evaluator's 1,000 resamples, and the whole
leaderboard command (scoring with records reused, bootstrap, tests, pages) on the 4 x 160 cases.
"""

from __future__ import annotations

import csv
import importlib
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from medchallenge.evaluation import bootstrap, build_parser
from medchallenge.leaderboard import main as leaderboard_main
from medchallenge.registry import CHALLENGES
from medchallenge.synth.__main__ import main as synth_main

ROOT = Path(os.environ.get("MEDCHALLENGE_BENCH_DIR", "/tmp/medchallenge-bench")) / "bootstrap"
RESAMPLES = 1000
RIBFRAC_CASES = 160
GENERIC_SAMPLE = 25
OTHERS = {"tb-caverns": ("--cases", "200", "--shape", "32", "32", "16"), "object-cxr": ("--images", "1000"),
          "imageclef-caption": ("--images", "1000")}


def _evaluator(name: str):
    return importlib.import_module(CHALLENGES[name].evaluator_module).EVALUATOR


def _loaded(name: str, predictions: Path, ground_truth: Path):
    ev = _evaluator(name)
    cases = ev.read(build_parser(ev).parse_args(["--input", str(predictions), "--ground-truth", str(ground_truth)]))
    return ev, cases, {case_id: ev.evaluate_case(cases.sources, case_id) for case_id in cases.ids}


def _best(work, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def ensure_ribfrac() -> Path:
    """The 160-case cohort and submissions team-1 (as generated) to team-4 (noisier confidences)."""
    submissions = ROOT / "ribfrac" / "submissions"
    if (submissions / "team-4" / "ribfrac-synth-pred.csv").is_file():
        return ROOT / "ribfrac"
    assert synth_main(["ribfrac", "--out", str(ROOT / "ribfrac"), "--cases", str(RIBFRAC_CASES), "--shape", "64",
                       "64", "48", "--seed", "3"]) == 0
    predictions = ROOT / "ribfrac" / "predictions"
    rng = np.random.default_rng(0)
    for k in range(1, 5):
        team = submissions / f"team-{k}"
        shutil.copytree(predictions, team)
        rows = list(csv.reader((predictions / "ribfrac-synth-pred.csv").open()))
        for row in rows[1:]:
            if row[1] != "0":
                row[2] = f"{float(np.clip(float(row[2]) + rng.normal(0, 0.15 * (k - 1)), 0.01, 0.99)):.3f}"
        with (team / "ribfrac-synth-pred.csv").open("w", newline="") as handle:
            csv.writer(handle, lineterminator="\n").writerows(rows)
    return ROOT / "ribfrac"


def run() -> dict:
    data = ensure_ribfrac()
    ev, cases, records = _loaded("ribfrac", data / "predictions", data / "ground_truth")
    draws = bootstrap.draw_resamples(len(cases.ids), RESAMPLES, seed=0)
    results: dict = {"ribfrac_cases": len(cases.ids), "resamples": RESAMPLES}
    results["ribfrac_vectorised_seconds"] = round(_best(lambda: ev.fast_bootstrap(cases, records, draws)), 3)
    sample = draws[:GENERIC_SAMPLE]

    def generic() -> None:
        for draw in sample:
            ev.aggregate(*ev.resample(cases, records, draw))

    results["ribfrac_generic_seconds_estimated"] = round(_best(generic, 1) * RESAMPLES / GENERIC_SAMPLE, 2)
    for name, size in OTHERS.items():
        folder = ROOT / name
        if not (folder / "ground_truth").is_dir():
            assert synth_main([name, "--out", str(folder), *size, "--seed", "1"]) == 0
        predictions = folder / "predictions"
        if name == "tb-caverns" and not predictions.is_dir():  # its generator writes CTs, not predictions:
            predictions.mkdir()  # every ground-truth box, its far corner one voxel further out
            rows = list(csv.reader((folder / "ground_truth" / "gt_boxes.csv").open()))[1:]
            (predictions / "submission.txt").write_text("".join(
                f"{r[0]}.nii.gz,{r[1]},{r[2]},{r[3]},{int(r[4]) + 1},{r[5]},{r[6]}\n" for r in rows))
        other, other_cases, other_records = _loaded(name, predictions, folder / "ground_truth")
        units = len(other.bootstrap_units(other_cases))
        other_draws = bootstrap.draw_resamples(units, RESAMPLES, seed=0)
        results[f"{name}_units"] = units
        results[f"{name}_seconds"] = round(
            _best(lambda: bootstrap.replicates(other, other_cases, other_records, other_draws)), 3)
    with tempfile.TemporaryDirectory() as scratch:
        argv = ["--challenge", "ribfrac", "--ground-truth", str(data / "ground_truth"), "--submissions",
                str(data / "submissions"), "--output", scratch, "--bootstrap", str(RESAMPLES), "--no-progress"]
        start = time.perf_counter()
        assert leaderboard_main(argv) == 0  # scores the 4 x 160 cases, records in scratch/records
        results["leaderboard_first_run_seconds"] = round(time.perf_counter() - start, 2)
        results["leaderboard_rerun_seconds"] = round(_best(lambda: leaderboard_main(argv), 1), 2)
    return results
