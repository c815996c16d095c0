"""RibFrac evaluator benchmark: seconds and peak memory per 512x512x300 case vs plain decompression of its inputs.

`run()` generates (once, cached under $MEDCHALLENGE_BENCH_DIR or /tmp/medchallenge-bench) three synthetic cases of
512x512x300 uint8 instance masks, then measures in fresh child processes (so their VmHWM,
medchallenge.process_memory, is the peak of that work alone): the per-case step of the evaluator (read both masks +
match + rows), stdlib gzip decompression of the same two files, the evaluator's reading of them (nibabel,
docs/metrics/ribfrac.md §1.2.1), the reading of the same
masks saved as scaled int16 NIfTI (scl_slope 0.25, scl_inter 256: nibabel 3.2.2's float64 arithmetic,
docs/metrics/ribfrac.md §1.2), the parsing of a 100,000-row prediction CSV (pandas 1.4.4's column reading, §1.4) and
the whole evaluator on the three cases. Times are the best of 3 runs.
The official code needs about 10 s and 2.4 GB per case on this kind of machine (issue 3).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from medchallenge.process_memory import vm_hwm_bytes

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("MEDCHALLENGE_BENCH_DIR", "/tmp/medchallenge-bench")) / "ribfrac-512"
CASES = ("RibFrac501", "RibFrac502", "RibFrac503")
OFFICIAL_SECONDS, OFFICIAL_PEAK_MB = 10.0, 2400.0
REPEATS = 3


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "shared"), *filter(None, [env.get("PYTHONPATH")])])
    return env


def ensure_data() -> Path:
    """The cached 512x512x300 cohort (generated on first use, about 5 s)."""
    if not (DATA / "predictions" / "ribfrac-synth-pred.csv").is_file():
        subprocess.run([sys.executable, "-m", "medchallenge.synth", "ribfrac", "--out", str(DATA), "--cases",
                        str(len(CASES)), "--shape", "512", "512", "300", "--fractures", "8", "--seed", "7"],
                       check=True, env=_env(), capture_output=True)
    return DATA


def ensure_scaled(case_id: str) -> Path:
    """The case's ground-truth mask saved as int16 with scl_slope 0.25 and scl_inter 256 (stored 4*label - 1024),
    which reads back as the same labels."""
    path = DATA / "scaled" / f"{case_id}-label.nii.gz"
    if not path.is_file():
        import numpy as np

        from medchallenge.formats.ribfrac import read_label_volume
        from medchallenge.synth.ribfrac import write_stored_nifti

        labels = read_label_volume(DATA / "ground_truth" / f"{case_id}-label.nii.gz")
        write_stored_nifti(path, labels.astype(np.int16) * 4 - 1024, 0.25, 256.0)
    return path


def ensure_csv(excel: bool = False) -> Path:
    """A 100,000-row prediction CSV of long decimals (the parser's worst case per cell); `excel`: the same saved as
    Excel saves it, quoted ids and CRLF line ends, which pandas' tokenizer reads character by character
    (formats.pandas_csv.tokenizer's state machine, not its line splitting)."""
    path = DATA / "large" / ("pred-excel.csv" if excel else "pred.csv")
    if not path.is_file():
        import random

        rng = random.Random(7)
        path.parent.mkdir(parents=True, exist_ok=True)
        quote, end = ('"', "\r\n") if excel else ("", "\n")
        path.write_bytes(("public_id,label_id,confidence,label_code" + end + "".join(
            f"{quote}RibFrac{500 + i // 100}{quote},{i % 100},{rng.random()!r},{rng.randint(1, 4)}{end}"
            for i in range(100_000))).encode())
    return path


def _peak_mb() -> float:
    return vm_hwm_bytes(os.getpid()) / 2**20


def _child(task: str, case_id: str) -> dict:
    """Runs in a fresh process: best-of-3 seconds of one task on one case, and the process's peak memory."""
    gt_path = DATA / "ground_truth" / f"{case_id}-label.nii.gz"
    pred_path = DATA / "predictions" / f"{case_id}.nii.gz"
    if task == "decompress":
        import gzip

        def work():
            return [len(gzip.decompress(path.read_bytes())) for path in (gt_path, pred_path)]
    elif task == "read":
        from medchallenge.formats.ribfrac import read_label_volume

        def work():
            return [read_label_volume(path).shape for path in (gt_path, pred_path)]
    elif task == "read_scaled":
        from medchallenge.formats.ribfrac import read_label_volume

        scaled = ensure_scaled(case_id)

        def work():
            return read_label_volume(scaled).shape
    elif task in ("parse_csv", "parse_excel_csv"):
        from medchallenge.formats.ribfrac import read_pred_csv

        large = ensure_csv(excel=task == "parse_excel_csv")

        def work():
            return len(read_pred_csv(large).rows)
    else:
        from medchallenge.evaluators.ribfrac import collect_sources, evaluate_case

        _, sources, _, _ = collect_sources(DATA / "predictions", DATA / "ground_truth")
        sources = {case_id: sources[case_id]}

        def work():
            return evaluate_case(sources, case_id).num_gt
    baseline = _peak_mb()
    seconds = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        work()
        seconds.append(time.perf_counter() - start)
    return {"seconds": min(seconds), "peak_mb": _peak_mb(), "baseline_mb": baseline}


def _measure(task: str, case_id: str) -> dict:
    result = subprocess.run([sys.executable, __file__, "--child", task, case_id], check=True, env=_env(),
                            capture_output=True, text=True)
    return json.loads(result.stdout)


def run() -> dict:
    """Per-case seconds and peak MB of the evaluator, of stdlib gzip decompression and of the masks' reading."""
    ensure_data()
    per_task: dict[str, list[dict]] = {"evaluate": [], "decompress": [], "read": [], "read_scaled": [],
                                       "parse_csv": [], "parse_excel_csv": []}
    for case in CASES:  # interleaved, so that load from other processes hits every task alike
        for task, results in per_task.items():
            results.append(_measure(task, case))

    def mean(task: str, key: str) -> float:
        return round(sum(r[key] for r in per_task[task]) / len(CASES), 4)

    start = time.perf_counter()
    subprocess.run([sys.executable, str(REPO / "evaluators" / "ribfrac" / "evaluate.py"), "--input",
                    str(DATA / "predictions"), "--ground-truth", str(DATA / "ground_truth"), "--output",
                    str(DATA / "out"), "--no-progress"], check=True, env=_env(), capture_output=True)
    total = time.perf_counter() - start
    case_seconds = mean("evaluate", "seconds")
    return {
        "case_shape": "512x512x300 uint8",
        "case_seconds": case_seconds,
        "case_peak_mb": mean("evaluate", "peak_mb"),
        "python_baseline_mb": mean("evaluate", "baseline_mb"),
        "gzip_decompress_seconds": mean("decompress", "seconds"),
        "gzip_decompress_peak_mb": mean("decompress", "peak_mb"),
        "mask_read_seconds": mean("read", "seconds"),
        "scaled_int16_read_seconds_one_mask": mean("read_scaled", "seconds"),
        "scaled_int16_read_peak_mb": mean("read_scaled", "peak_mb"),
        "csv_100k_rows_parse_seconds": mean("parse_csv", "seconds"),
        "csv_100k_rows_excel_quoted_crlf_parse_seconds": mean("parse_excel_csv", "seconds"),
        "case_over_decompress": round(case_seconds / mean("decompress", "seconds"), 3),
        "case_over_mask_read": round(case_seconds / mean("read", "seconds"), 3),
        "speedup_vs_official": round(OFFICIAL_SECONDS / case_seconds, 1),
        "evaluator_wall_seconds_3_cases": round(total, 3),
    }


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(_child(sys.argv[2], sys.argv[3])))
    else:
        print(json.dumps(run(), indent=1))
