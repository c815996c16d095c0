"""Bounded fuzz of every evaluator's run-file parsing (issue 10): a few thousand seeded mutations of each
challenge's prediction files, each scored in this process by the evaluator command. Every outcome must be a score
(exit 0) or one clean `error:` line (exit 1); a traceback fails the test. The counts are printed and written to
bench/fuzz-run-files.json.

MEDCHALLENGE_FUZZ_MUTATIONS (default 2000 per evaluator) and MEDCHALLENGE_FUZZ_SEED (default 0) widen the search.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from helpers import evaluator

MUTATIONS = int(os.environ.get("MEDCHALLENGE_FUZZ_MUTATIONS", "2000"))
SEED = int(os.environ.get("MEDCHALLENGE_FUZZ_SEED", "0"))
COUNTS = Path(__file__).resolve().parents[2] / "bench" / "fuzz-run-files.json"

# what run files are made of, and what breaks parsers: separators, numbers at the edges, encodings
PIECES = [",", ";", "|", " ", "  ", "\t", "\n", "\r\n", "\r", '"', "'", "\\", "#", "", "0", "-1", "1e309", "-0",
          "nan", "NaN", "inf", "-inf", "1e-320", "0x10", "1_000", "٣", "１", "9" * 40, ".", "..", "e", "+", "\x00",
          "\ufeff", "\u2028", "\x85", "é", "C0040405", "C", "TST_001.nii.gz", "test/08001.jpg", "RibFrac501",
          "ImageCLEFmedCaption_2022_test_000001", "public_id", "image_path", "label_code"]


def mutate(text: str, rng: random.Random) -> str:
    """One to three random edits: a piece inserted or replacing a span, a span deleted, a line duplicated, moved or
    dropped, a field replaced, the file truncated or emptied."""
    for _ in range(rng.randint(1, 3)):
        lines = text.split("\n")
        kind = rng.randrange(9)
        where = rng.randint(0, len(text))
        if kind == 0:
            text = text[:where] + rng.choice(PIECES) + text[where:]
        elif kind == 1:
            text = text[:where] + rng.choice(PIECES) + text[where + rng.randint(1, 8):]
        elif kind == 2:
            text = text[:where] + text[where + rng.randint(1, 40):]
        elif kind == 3 and lines:
            line = rng.randrange(len(lines))
            lines.insert(rng.randint(0, len(lines)), lines[line])
            text = "\n".join(lines)
        elif kind == 4 and len(lines) > 1:
            lines.pop(rng.randrange(len(lines)))
            text = "\n".join(lines)
        elif kind == 5 and lines:  # one field of one line replaced
            line = rng.randrange(len(lines))
            separator = rng.choice([",", "|", ";", " ", "\t"])
            fields = lines[line].split(separator)
            fields[rng.randrange(len(fields))] = rng.choice(PIECES)
            lines[line] = separator.join(fields)
            text = "\n".join(lines)
        elif kind == 6:
            text = text[:where]
        elif kind == 7:
            text = rng.choice(["", "\n", text.split("\n")[0] + "\n"])
        else:
            chars = list(text)
            for _ in range(rng.randint(1, 4)):
                if chars:
                    chars[rng.randrange(len(chars))] = chr(rng.choice([rng.randrange(32, 127), rng.randrange(0, 0x3000)]))
            text = "".join(chars)
    return text


@pytest.fixture(scope="module")
def cohorts(tmp_path_factory) -> dict[str, tuple[Path, Path, list[str]]]:
    """name -> (predictions, ground truth, run files to mutate) for a small cohort of each challenge."""
    from helpers import small_cohorts

    root = tmp_path_factory.mktemp("fuzz")
    small = small_cohorts(root)
    subprocess.run([sys.executable, "-m", "medchallenge.synth", "ribfrac", "--out", str(root / "ribfrac"),
                    "--cases", "3", "--shape", "16", "16", "16", "--seed", "1"], check=True, capture_output=True)
    return {
        "tb-caverns": (*small["tb-caverns"], ["submission.txt"]),
        "ribfrac": (root / "ribfrac" / "predictions", root / "ribfrac" / "ground_truth", ["ribfrac-synth-pred.csv"]),
        "object-cxr": (*small["object-cxr"], ["classification.csv", "localization.csv"]),
        "imageclef-caption": (*small["imageclef-caption"], ["concepts.csv", "captions.csv"]),
    }


def score(name: str, predictions: Path, ground_truth: Path, out: Path, edition: str | None) -> tuple[str, str]:
    """('exit 0' | 'clean error' | 'traceback', detail) of one in-process run of the evaluator command."""
    argv = ["--input", str(predictions), "--ground-truth", str(ground_truth), "--output", str(out), "--no-progress",
            "--no-plots", "--workers", "1", *(["--edition", edition] if edition else [])]
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            status = evaluator(name).main(argv)
    except SystemExit as exc:  # argparse: not reachable with these arguments, counted as a failure if it happens
        return "traceback", f"SystemExit {exc.code}: {stderr.getvalue()[-300:]}"
    except Exception:
        return "traceback", traceback.format_exc()[-1500:]
    lines = stderr.getvalue().strip().splitlines()
    if status == 0:
        metrics = json.loads((out / "metrics.json").read_text())  # strict JSON: finite numbers only
        return ("exit 0", "") if set(metrics) == {"aggregates", "case", "meta"} else ("traceback", str(metrics)[:300])
    if status == 1 and lines and lines[-1].startswith("error: ") and not (out / "metrics.json").exists():
        return "clean error", lines[-1]
    return "traceback", f"exit {status}: {lines[-3:]}"


@pytest.mark.parametrize("name", ["tb-caverns", "ribfrac", "object-cxr", "imageclef-caption"])
def test_mutated_run_files_score_or_fail_cleanly(cohorts, tmp_path, name, capsys):
    source, ground_truth, run_files = cohorts[name]
    originals = {file: (source / file).read_text(encoding="utf-8") for file in run_files}
    predictions = tmp_path / "predictions"
    shutil.copytree(source, predictions)
    rng = random.Random(f"{SEED}-{name}")
    counts = {"exit 0": 0, "clean error": 0, "traceback": 0}
    failures = []
    logging.disable(logging.WARNING)  # the evaluator's progress and warnings, thousands of times over
    try:
        for number in range(MUTATIONS):
            target = rng.choice(run_files)
            for file, text in originals.items():
                mutated = mutate(text, rng) if file == target else text
                (predictions / file).write_bytes(mutated.encode("utf-8", "surrogatepass"))
            edition = rng.choice(["2022", "2021"]) if name == "imageclef-caption" else None
            outcome, detail = score(name, predictions, ground_truth, tmp_path / "out", edition)
            counts[outcome] += 1
            if outcome == "traceback" and len(failures) < 3:
                failures.append(f"mutation {number} of {target} ({edition or ''}):\n"
                                f"{(predictions / target).read_text(errors='replace')[:400]!r}\n{detail}")
    finally:
        logging.disable(logging.NOTSET)
    with capsys.disabled():
        print(f"\nfuzz {name}: {MUTATIONS} mutations (seed {SEED}): {counts}")
    stored = json.loads(COUNTS.read_text()) if COUNTS.exists() else {}
    stored[name] = {"mutations": MUTATIONS, "seed": SEED, **counts}
    COUNTS.parent.mkdir(exist_ok=True)
    COUNTS.write_text(json.dumps(stored, indent=1) + "\n")
    assert counts["exit 0"] and counts["clean error"], counts  # the mutations reach both outcomes
    assert not failures, "\n\n".join(failures)
