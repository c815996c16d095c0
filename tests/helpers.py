"""Small helpers shared by the tests."""

from __future__ import annotations

import os
from pathlib import Path


def open_dir(path: Path) -> Path:
    """A folder the containers' uid 1000 can write."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o777)
    return path


def readable(root: Path) -> Path:
    """Make a generated folder readable (and its folders writable) by the containers' uid 1000."""
    for path in [root, *root.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o644)
    return root


def record_or_die(case_id: str) -> dict:
    """A per-case step whose worker process is killed (as by the OOM killer) on case "die"."""
    import signal

    if case_id == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    return {"case": case_id}


def evaluator(name: str):
    """The evaluator plug-in of a registry challenge (its `main(argv)` is the evaluator command)."""
    import importlib

    from medchallenge.registry import CHALLENGES

    return importlib.import_module(CHALLENGES[name].evaluator_module).EVALUATOR


def small_cohorts(root: Path) -> dict[str, tuple[Path, Path]]:
    """(predictions, ground truth) of a small cohort per challenge, under `root`."""
    import shutil

    from medchallenge.synth.__main__ import main as synth_main

    tests = Path(__file__).parent
    tb_gt, tb_pred = root / "tb" / "gt", root / "tb" / "pred"
    tb_gt.mkdir(parents=True)
    tb_pred.mkdir()
    fixtures = tests / "tb_caverns" / "fixtures"
    shutil.copy(fixtures / "gt.csv", tb_gt / "gt_boxes.csv")
    shutil.copy(fixtures / "all_ids.csv", tb_gt / "all_ids.csv")
    shutil.copy(fixtures / "pred.csv", tb_pred / "submission.txt")
    cohorts = {"tb-caverns": (tb_pred, tb_gt),
               "ribfrac": (tests / "ribfrac" / "fixtures" / "pred", tests / "ribfrac" / "fixtures" / "gt")}
    for name, size in (("object-cxr", ("--images", "20")), ("imageclef-caption", ("--images", "20"))):
        assert synth_main([name, "--out", str(root / name), *size, "--seed", "1"]) == 0
        cohorts[name] = (root / name / "predictions", root / name / "ground_truth")
    return cohorts


def evaluator_argv(cohorts, name: str, out: Path, predictions: Path | None = None) -> list[str]:
    """Evaluator arguments for a cohort of `small_cohorts`, its predictions replaced by `predictions` if given (no
    figures, no review.html)."""
    default_predictions, ground_truth = cohorts[name]
    return ["--input", str(predictions or default_predictions), "--ground-truth", str(ground_truth), "--output",
            str(out), "--no-progress", "--no-plots", "--no-review"]


def one_error_line(capsys) -> str:
    """stderr holds exactly one line, an `error:` line: return it."""
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


class InProcessAlgorithm:
    """A job runner Launcher (medchallenge.jobs.Launcher) calling `algorithm(job_input, job_output, model_dir)` in
    this process: for tests of what the job runner provisions and reads, without Docker or a script."""

    description = "in-process test algorithm"

    def __init__(self, algorithm):
        self.algorithm = algorithm

    def check(self) -> list[str]:
        return []

    def gpu_available(self) -> bool:
        return False

    def launch(self, folders, limits, gpu, name):
        import time

        from medchallenge.jobs import Execution

        started = time.perf_counter()
        self.algorithm(folders.input, folders.output, folders.model)
        return Execution(exit_code=0, wall_seconds=time.perf_counter() - started)
