"""The TB algorithm's outputs and logs on a small synthetic cohort, compared with those recorded in
fixtures/recorded_outputs/ (recorded with the code before the shared algorithm runner; outputs must stay the same).

Re-record (only for an intended change, e.g. a retrained model):
    PYTHONPATH=shared .venv/bin/python tests/tb_caverns/test_recorded_outputs.py
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENTRY_SCRIPT = REPO / "algorithms" / "tb_caverns" / "inference.py"
RECORDED = Path(__file__).resolve().parent / "fixtures" / "recorded_outputs"
# python -m medchallenge.synth tb-caverns --cases 3 --seed 11 --shape 96 96 24 --spacing 2.1 2.1 7.5: two of the
# three cases give a box, and every case is resampled to the model's spacing
COHORT = dict(cases=3, seed=11, shape=(96, 96, 24), spacing=(2.1, 2.1, 7.5))
GC_CASE = "TST_002.nii.gz"
GC_IMAGE_FILE = "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0.mha"


def normalised_log(text: str, root: Path) -> str:
    """The log without what differs between runs: the temporary folder, timings, the ONNX Runtime version."""
    text = text.replace(str(root), "ROOT").replace(str(REPO), "REPO")
    text = re.sub(r"in \d+\.\d s", "in T s", text)
    return re.sub(r"ONNX Runtime \S+:", "ONNX Runtime V:", text)


def run_entry_script(input_dir: Path, output_dir: Path, root: Path) -> str:
    """Run the TB entry script on CPU with its own model; its normalised stdout and stderr."""
    done = subprocess.run([sys.executable, str(ENTRY_SCRIPT), "--input", str(input_dir), "--output", str(output_dir),
                           "--model", str(root / "no-model"), "--device", "cpu"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return normalised_log(done.stdout + done.stderr, root)


def run_cohort(root: Path) -> dict[str, str]:
    """Batch mode over the cohort and GC mode on one of its cases: every output file and both logs, by name."""
    import SimpleITK as sitk

    from medchallenge.synth.tb_caverns import write_cohort

    write_cohort(root / "cohort", COHORT["cases"], COHORT["seed"], COHORT["shape"], COHORT["spacing"])
    files = {"batch.log": run_entry_script(root / "cohort" / "input", root / "batch", root)}
    job = root / "job"
    (job / "images" / "ct").mkdir(parents=True)
    sitk.WriteImage(sitk.ReadImage(str(root / "cohort" / "input" / GC_CASE)),
                    str(job / "images" / "ct" / GC_IMAGE_FILE), True)
    (job / "inputs.json").write_text(json.dumps([{
        "pk": 1,
        "interface": {"slug": "ct-image", "kind": "Image", "super_kind": "Image", "relative_path": "images/ct"},
        "value": None, "file": None, "image": {"pk": "0b1c", "name": GC_CASE},
    }]))
    files["gc.log"] = run_entry_script(job, root / "gc", root)
    for mode in ("batch", "gc"):
        for path in sorted((root / mode).iterdir()):
            files[f"{mode}/{path.name}"] = path.read_text()
    return files


def without_summary(log: str) -> list[str]:
    """The log's lines but the closing `wrote ...` summary of batch mode (the runner's own wording)."""
    return [line for line in log.splitlines() if not line.startswith("wrote ")]


def without_probabilities(result: dict) -> tuple[dict, list[float]]:
    """A per-case result with its boxes' probabilities taken out, and those probabilities."""
    boxes = [{k: v for k, v in box.items() if k != "probability"} for box in result["boxes"]]
    return {**result, "boxes": boxes}, [box["probability"] for box in result["boxes"]]


def test_outputs_and_logs_are_as_recorded(tmp_path):
    produced = run_cohort(tmp_path)
    recorded = {str(p.relative_to(RECORDED)): p.read_text() for p in sorted(RECORDED.rglob("*")) if p.is_file()}
    assert sorted(produced) == sorted(recorded)
    assert produced["batch/submission.txt"].count("\n") == 2  # the cohort does exercise boxes
    for name, text in recorded.items():
        if name.endswith(".log"):
            assert without_summary(produced[name]) == without_summary(text), name
            assert "provider CPUExecutionProvider" in produced[name]
        elif name.endswith(".json"):  # probabilities within ONNX Runtime's CPU-kernel differences
            result, probabilities = without_probabilities(json.loads(produced[name]))
            expected, expected_probabilities = without_probabilities(json.loads(text))
            assert result == expected and probabilities == pytest.approx(expected_probabilities, abs=1e-5), name
        else:
            assert produced[name] == text, name


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        outputs = run_cohort(Path(tmp))
    shutil.rmtree(RECORDED, ignore_errors=True)
    for name, text in outputs.items():
        (RECORDED / name).parent.mkdir(parents=True, exist_ok=True)
        (RECORDED / name).write_text(text)
    print(f"recorded {len(outputs)} files in {RECORDED}")
