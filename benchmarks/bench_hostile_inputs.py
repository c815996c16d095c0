"""Peak memory and time of every evaluator on huge run files (issue 10): at the default line limit (accepted, or
refused by the scorer for its contents, after parsing) and at 10 million rows (refused by the size limits as a stream
before any parser). Each run is a fresh `python evaluate.py` process; its own peak RSS is reported."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from medchallenge.limits import MAX_TEXT_LINES
from medchallenge.process_memory import PeakMemory

REPO = Path(__file__).resolve().parents[1]
SIZES = {"at_line_limit": MAX_TEXT_LINES.default - 1, "10M_rows": 10_000_000}


def _write(path: Path, header: str | None, row, n: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        if header:
            handle.write(header + "\n")
        handle.writelines(row(i) + "\n" for i in range(n))


def _ground_truths(root: Path) -> dict[str, Path]:
    from bench_tb_evaluator import write_cohort

    for name, size in (("object-cxr", ["--images", "50"]), ("imageclef-caption", ["--images", "50"]),
                       ("ribfrac", ["--cases", "2", "--shape", "64", "64", "48"])):
        subprocess.run([sys.executable, "-m", "medchallenge.synth", name, "--out", str(root / name), *size,
                        "--seed", "3"], check=True, capture_output=True)
    tb_gt, _ = write_cohort(root / "tb-caverns")
    return {"object-cxr": root / "object-cxr", "imageclef-caption": root / "imageclef-caption",
            "ribfrac": root / "ribfrac", "tb-caverns": tb_gt}


def _submissions(root: Path, cohorts: dict[str, Path], n: int) -> dict[str, tuple[str, Path, Path]]:
    """name -> (evaluator folder, predictions, ground truth) with n-row run files."""
    cxr = cohorts["object-cxr"]
    localization, classification = root / "object-cxr-localization", root / "object-cxr-classification"
    _write(localization / "localization.csv", "image_path,prediction",
           lambda i: f"test/X{i:08d}.jpg,0.5 100.5 200.25;0.25 10 20", n)
    shutil.copy(cxr / "predictions" / "classification.csv", localization)
    _write(classification / "classification.csv", "image_path,prediction", lambda i: f"test/X{i:08d}.jpg,0.5", n)
    shutil.copy(cxr / "predictions" / "localization.csv", classification)
    caption = root / "caption"
    _write(caption / "concepts.csv", None, lambda i: f"ImageCLEFmedCaption_2022_test_{i:09d}|C0040405;C0024109", n)
    _write(caption / "captions.csv", None,
           lambda i: f"ImageCLEFmedCaption_2022_test_{i:09d}|Computed tomography of the chest showing a mass.", n)
    ribfrac = root / "ribfrac"
    shutil.copytree(cohorts["ribfrac"] / "predictions", ribfrac)
    (pred_csv,) = ribfrac.glob("*.csv")
    _write(pred_csv, "public_id,label_id,confidence,label_code", lambda i: f"RibFrac{9_000_000 + i},1,0.5,1", n)
    tb = root / "tb"
    _write(tb / "submission.txt", None, lambda i: f"TST_{i:09d}.nii.gz,1,2,3,4,5,6", n)
    return {"object_cxr_localization": ("object_cxr", localization, cxr / "ground_truth"),
            "object_cxr_classification": ("object_cxr", classification, cxr / "ground_truth"),
            "imageclef_caption": ("imageclef_caption", caption, cohorts["imageclef-caption"] / "ground_truth"),
            "ribfrac": ("ribfrac", ribfrac, cohorts["ribfrac"] / "ground_truth"),
            "tb_caverns": ("tb_caverns", tb, cohorts["tb-caverns"])}


def _measure(folder: str, predictions: Path, ground_truth: Path, out: Path) -> dict:
    start = time.perf_counter()
    # stderr to a file whose tail alone is read: this process stays small, since each child starts as its copy
    with tempfile.TemporaryFile("w+b") as stderr:
        proc = subprocess.Popen([sys.executable, str(REPO / "evaluators" / folder / "evaluate.py"), "--input",
                                 str(predictions), "--ground-truth", str(ground_truth), "--output", str(out),
                                 "--no-progress", "--no-plots", "--workers", "1"],
                                stdout=subprocess.DEVNULL, stderr=stderr)
        with PeakMemory(proc.pid) as peak:  # the child's own peak RSS
            _, status, _ = os.wait4(proc.pid, 0)
        stderr.seek(max(0, stderr.seek(0, 2) - 4096))
        lines = stderr.read().decode("utf-8", "replace").strip().splitlines()
    return {"exit_status": os.waitstatus_to_exitcode(status), "seconds": round(time.perf_counter() - start, 2),
            "peak_rss_mb": round(peak.mib, 1), "last_line": lines[-1][-160:] if lines else ""}


def run() -> dict:
    results: dict = {"rows": SIZES}
    with tempfile.TemporaryDirectory(prefix="bench_hostile_") as tmp:
        root = Path(tmp)
        cohorts = _ground_truths(root / "gt")
        for size, n in SIZES.items():
            submissions = _submissions(root / size, cohorts, n)
            for name, (folder, predictions, ground_truth) in submissions.items():
                print(f"  {size} {name}", flush=True)
                results[f"{name}_{size}"] = _measure(folder, predictions, ground_truth, root / "out")
            shutil.rmtree(root / size)
    return results


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=1))
