"""TB caverns evaluator on a 140-case cohort (the size of the official test set): target <= 0.5 s."""

from __future__ import annotations

import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from medchallenge.evaluators.tb_caverns import main

EVALUATE = Path(__file__).resolve().parents[1] / "evaluators" / "tb_caverns" / "evaluate.py"


def write_cohort(root: Path, n_cases: int = 140, seed: int = 0) -> tuple[Path, Path]:
    """Random ground truth (0-4 boxes per case) and predictions jittered from it, with misses and extras."""
    rng = random.Random(seed)
    gt_dir, pred_dir = root / "gt", root / "pred"
    gt_dir.mkdir(parents=True)
    pred_dir.mkdir()
    gt_rows, pred_rows, ids = ["id,bbox_X1,bbox_Y1,bbox_Z1,bbox_X2,bbox_Y2,bbox_Z2,centroid_X,centroid_Y,centroid_Z"], [], []
    for index in range(1, n_cases + 1):
        name = f"TST_{index:03d}"
        ids.append(f"{name}.nii.gz")
        for _ in range(rng.choice([0, 0, 1, 1, 2, 3, 4])):
            lo = [rng.randint(50, 400), rng.randint(50, 400), rng.randint(10, 70)]
            hi = [lo[0] + rng.randint(10, 60), lo[1] + rng.randint(10, 60), lo[2] + rng.randint(8, 20)]
            gt_rows.append(",".join(map(str, [name, *lo, *hi, *[(a + b) // 2 for a, b in zip(lo, hi)]])))
            if rng.random() < 0.8:
                jitter = [v + rng.randint(-3, 3) for v in lo + hi]
                pred_rows.append(",".join(map(str, [f"{name}.nii.gz", *jitter])))
        if rng.random() < 0.2:
            pred_rows.append(f"{name}.nii.gz,10,10,10,30,30,20")
    (gt_dir / "gt_boxes.csv").write_text("\n".join(gt_rows) + "\n")
    (gt_dir / "all_ids.csv").write_text("\n".join(ids) + "\n")
    (pred_dir / "submission.txt").write_text("\n".join(pred_rows) + "\n")
    return gt_dir, pred_dir


def run() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        gt_dir, pred_dir = write_cohort(root)
        args = ["--input", str(pred_dir), "--ground-truth", str(gt_dir), "--output", str(root / "out"),
                "--no-progress"]
        in_process = []
        for _ in range(7):
            start = time.perf_counter()
            main(args)
            in_process.append(time.perf_counter() - start)
        whole = []
        for _ in range(3):
            start = time.perf_counter()
            subprocess.run([sys.executable, str(EVALUATE), *args], check=True, capture_output=True)
            whole.append(time.perf_counter() - start)
    return {"cases": 140, "evaluate_seconds_median": round(statistics.median(in_process), 4),
            "whole_process_seconds_median": round(statistics.median(whole), 3), "target_seconds": 0.5}
