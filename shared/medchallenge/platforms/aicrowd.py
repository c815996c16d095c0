"""AIcrowd: `medchallenge aicrowd-evaluator --config NAME --output DIR` writes an evaluator folder as AIcrowd expects
one (AIcrowd/aicrowd-example-evaluator: `evaluator.py` with the class, `aicrowd.json`, `requirements.txt`, `data/`),
and `AIcrowdRun` is what its generated class calls.

The class takes the ground-truth folder (the answer files: those the configuration's evaluator image reads from
/opt/ml/input/data/ground_truth) in its constructor; `_evaluate(client_payload, _context)` places the file at
`client_payload["submission_file_path"]` as the evaluator reads it (`submissions.place_submission`), runs the
project's evaluator command on it with the configuration's baked options (the code and environment of its evaluator
image) and returns `score` (the primary metric), `score_secondary` (the official secondary, 0.0 where there is none)
and every aggregate under `meta`. A refused submission raises `SubmissionRefused`, whose message is the evaluator's
one `error:` line, which AIcrowd shows to the participant.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from .. import __version__
from ..errors import InputError, report_errors
from ..grand_challenge.pack import check_ground_truth
from ..io import write_json_atomic, write_text_atomic
from ..logs import setup_logging
from ..registry import CONFIGURATIONS, Configuration
from .submissions import SubmissionFormat, place_submission

CONFIGURATION_NAMES = {configuration.name: configuration for configuration in CONFIGURATIONS}
CLASS_NAME = "AIcrowdEvaluator"


class SubmissionRefused(Exception):
    """A submission the evaluator refused; the message is its one `error:` line."""


def submission_format(configuration: Configuration, task: str | None) -> SubmissionFormat:
    """The configuration's submission format for `task` (None: its only one)."""
    formats = {f.task: f for f in configuration.challenge.submissions}
    if task is None and len(formats) == 1:
        return next(iter(formats.values()))
    if task not in formats:
        raise InputError(f"{configuration.name}: choose a task ({', '.join(sorted(formats))})")
    return formats[task]


def run_evaluator(configuration: Configuration, input_dir: Path, ground_truth: Path, output: Path) -> dict:
    """metrics.json of the evaluator command on `input_dir`, run as the configuration's image runs it (its baked
    options as environment); SubmissionRefused with its `error:` line when it refuses the input."""
    command = [sys.executable, "-m", "medchallenge.cli", "evaluate", configuration.challenge.name,
               "--input", str(input_dir), "--ground-truth", str(ground_truth), "--output", str(output),
               "--no-progress", "--no-plots", "--no-review"]  # AIcrowd shows only the scores
    result = subprocess.run(command, env={**os.environ, **configuration.edition.build_args}, capture_output=True,
                            text=True)
    if result.returncode != 0:
        errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
        raise SubmissionRefused(errors[-1] if errors else f"error: the evaluator stopped with exit status "
                                                          f"{result.returncode}")
    return json.loads((output / "metrics.json").read_text())


def scores(submission: SubmissionFormat, aggregates: dict[str, float]) -> dict:
    """AIcrowd's result object: the primary metric, the official secondary (0.0 where none) and every aggregate."""
    if submission.primary not in aggregates:
        raise SubmissionRefused(f"error: the submission gives no {submission.primary} (its files: "
                                f"{', '.join(submission.files)})")
    return {"score": aggregates[submission.primary], "score_secondary": aggregates.get(submission.secondary, 0.0),
            "meta": dict(aggregates)}


class AIcrowdRun:
    """One configuration's evaluation of AIcrowd submissions against the ground truth in `ground_truth`."""

    def __init__(self, configuration: str, ground_truth: str | os.PathLike, task: str | None = None) -> None:
        self.configuration = CONFIGURATION_NAMES[configuration]
        self.submission = submission_format(self.configuration, task)
        self.ground_truth = Path(ground_truth).resolve()
        check_ground_truth(self.configuration, self.ground_truth)

    def evaluate(self, submission_file_path: str | os.PathLike) -> dict:
        """Score one submission file; SubmissionRefused (its message the `error:` line) when it is refused. Paths in
        the message are shown as the participant knows them (the submission's own name, `ground_truth/`)."""
        submission = Path(submission_file_path)
        with tempfile.TemporaryDirectory(prefix="medchallenge-aicrowd-") as work:
            work_dir = Path(work)
            try:
                input_dir = place_submission(self.submission, submission, work_dir / "submission")
                metrics = run_evaluator(self.configuration, input_dir, self.ground_truth, work_dir / "output")
            except InputError as exc:
                raise SubmissionRefused(self._shown(f"error: {exc}", work_dir)) from None
            except SubmissionRefused as exc:
                raise SubmissionRefused(self._shown(str(exc), work_dir)) from None
        return scores(self.submission, metrics["aggregates"])

    def _shown(self, line: str, work_dir: Path) -> str:
        return (line.replace(f"{work_dir}/submission/", "").replace(str(work_dir / "submission"), "submission")
                .replace(f"{self.ground_truth}/", "ground_truth/").replace(str(self.ground_truth), "ground_truth"))


# ---------------------------------------------------------------------------------------------------------------
# The evaluator folder
# ---------------------------------------------------------------------------------------------------------------


def sample_name(submission: SubmissionFormat) -> str:
    return "sample_submission.zip" if submission.zipped else f"sample_{submission.files[0]}"


EVALUATOR_PY = '''\
"""AIcrowd evaluator of {title} ({name}{task_note}), written by `medchallenge aicrowd-evaluator`: regenerate it
rather than edit it. The scoring is the project's evaluator command, the code of the {image} image, installed
from the medchallenge wheel in requirements.txt; README.md says what a submission holds and what is returned."""

from medchallenge.platforms.aicrowd import AIcrowdRun

CONFIGURATION = "{name}"
TASK = {task!r}


class {class_name}:
    def __init__(self, answer_file_path, round=1, **kwargs):
        """answer_file_path: the ground-truth folder ({ground_truth}); `round` is accepted and unused."""
        self.answer_file_path = answer_file_path
        self.round = round
        self._run = AIcrowdRun(CONFIGURATION, answer_file_path, TASK)

    def _evaluate(self, client_payload, _context={{}}):
        """{{"score", "score_secondary", "meta"}} of client_payload["submission_file_path"]; a refused submission
        raises an exception whose message is the evaluator's error line."""
        return self._run.evaluate(client_payload["submission_file_path"])


if __name__ == "__main__":
    # AIcrowd's check of an evaluator: python evaluator.py scores the sample submission against data/ground_truth
    evaluator = {class_name}("data/ground_truth")
    payload = {{"submission_file_path": "data/{sample}", "aicrowd_submission_id": 1,
               "aicrowd_participant_id": 1}}
    print(evaluator._evaluate(payload, {{}}))
'''

README = """\
# AIcrowd evaluator: {title}{task_title}

Written by `medchallenge aicrowd-evaluator --config {name}{task_flag}` (medchallenge {version}). The class
`{class_name}` in `evaluator.py` (named in `aicrowd.json`) runs the project's evaluator command, the same code as the
`{image}` image ({options}), installed with `pip install -r requirements.txt` (from any directory: `pip install -r
path/to/requirements.txt`) from the medchallenge wheel in `wheels/` (exact pins of every dependency in
`constraints.txt`; Python 3.11 or later).

## Answer files

`{class_name}(answer_file_path)`: `answer_file_path` is the ground-truth folder, holding {ground_truth} (the files the
evaluator image reads from `/opt/ml/input/data/ground_truth`; see the evaluator's README in the medchallenge
repository). `python evaluator.py` scores `data/{sample}` against `data/ground_truth/`.

## Submission

{submission}

## Result

`_evaluate(client_payload, _context)` reads `client_payload["submission_file_path"]` and returns
`{{"score": {primary}, "score_secondary": {secondary}, "meta": {{every aggregate of metrics.json}}}}`.
A submission the evaluator refuses raises an exception whose message is the evaluator's one `error:` line (file names
as the participant knows them), which AIcrowd shows to the participant.
"""


def submission_text(submission: SubmissionFormat) -> str:
    """For participants: what to upload."""
    if submission.zipped:
        return (f"One zip file holding {', '.join(f'`{name}`' for name in submission.files)} at its top level (or "
                f"inside one folder): {submission.contents}. A zip with links, special files, absolute or `..` "
                "member names, two members naming one file (`a.csv` and `./a.csv`), or more than "
                "$MEDCHALLENGE_MAX_SUBMISSION_BYTES (8 GiB) unpacked is refused before anything is extracted.")
    return f"One file, any name (it is scored as `{submission.files[0]}`): {submission.contents}."


def secondary_text(submission: SubmissionFormat) -> str:
    if not submission.secondary:
        return "0.0 (the challenge has no official secondary score)"
    return (f"{submission.secondary} (0.0 where the evaluator gives none, e.g. without its ground-truth files, as "
            "the official evaluators returned)")


def build_wheel(target: Path) -> Path:
    """The medchallenge wheel, built from this checkout's shared/ (a copy, so nothing is written there), offline
    from ./wheelhouse where it is there."""
    shared = Path(__file__).resolve().parents[2]
    if not (shared / "pyproject.toml").is_file():
        raise InputError(f"{shared}: no pyproject.toml; run from a checkout of medchallenge, or give --wheel")
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="medchallenge-wheel-") as work:
        source = Path(work) / "shared"
        shutil.copytree(shared, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        wheelhouse = shared.parent / "wheelhouse"
        offline = ["--no-index", "--find-links", str(wheelhouse)] if wheelhouse.is_dir() else []
        result = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *offline, "-w",
                                 str(target), str(source)], capture_output=True, text=True)
        if result.returncode != 0:
            raise InputError(f"building the medchallenge wheel failed: {result.stderr.strip().splitlines()[-1:]}")
    return target / f"medchallenge-{__version__}-py3-none-any.whl"


def write_evaluator_folder(configuration: Configuration, output: Path, task: str | None = None,
                           wheel: Path | None = None, ground_truth: Path | None = None,
                           sample: Path | None = None) -> Path:
    """The AIcrowd evaluator folder of `configuration` (and `task`) in `output`; `wheel`: a medchallenge wheel to
    ship (default: built from this checkout); `ground_truth` and `sample` are copied into data/ for the self-test."""
    submission = submission_format(configuration, task)
    challenge = configuration.challenge
    if ground_truth is not None:
        check_ground_truth(configuration, ground_truth)
    output.mkdir(parents=True, exist_ok=True)
    wheels = output / "wheels"
    if wheel is not None:
        wheels.mkdir(exist_ok=True)
        shutil.copyfile(wheel, wheels / wheel.name)
    else:
        wheel = build_wheel(wheels)
    extras = ",".join(challenge.evaluator_extras)
    repository = Path(__file__).resolve().parents[3]
    pins = (repository / "requirements" / "runtime.txt")
    if pins.is_file():
        shutil.copyfile(pins, output / "constraints.txt")
    # pip reads `-c` and a relative `--find-links` from this file's folder, whatever the current directory
    write_text_atomic(output / "requirements.txt",
                      ("-c constraints.txt\n" if pins.is_file() else "") + "--find-links wheels\n"
                      + f"medchallenge{f'[{extras}]' if extras else ''}=={wheel.name.split('-')[1]}\n")
    fields = {
        "title": configuration.title, "name": configuration.name, "task": submission.task or None,
        "task_note": f", task {submission.task}" if submission.task else "",
        "task_title": f" ({submission.task})" if submission.task else "",
        "task_flag": f" --task {submission.task}" if submission.task else "",
        "image": configuration.service.image, "class_name": CLASS_NAME, "sample": sample_name(submission),
        "ground_truth": ", ".join(challenge.interface.ground_truth), "version": __version__,
        "options": ", ".join(f"{k}={v}" for k, v in configuration.edition.build_args.items()) or "no options",
        "submission": submission_text(submission), "primary": submission.primary,
        "secondary": secondary_text(submission),
    }
    write_text_atomic(output / "evaluator.py", EVALUATOR_PY.format(**fields))
    write_text_atomic(output / "__init__.py", f"from .evaluator import {CLASS_NAME}\n")
    write_text_atomic(output / "README.md", README.format(**fields))
    write_json_atomic(output / "aicrowd.json", {
        "challenge_id": configuration.name + (f"-{submission.task}" if submission.task else ""),
        "evaluator_name": "evaluator", "evaluator_class": CLASS_NAME, "evaluation_pipeline_version": "1.0",
        "authors": [{"name": "medchallenge"}], "version": __version__,
        "description": textwrap.shorten(f"{configuration.title}: the project's evaluator ({configuration.name})",
                                        200)})
    data = output / "data"
    data.mkdir(exist_ok=True)
    if ground_truth is not None:
        shutil.copytree(ground_truth, data / "ground_truth", dirs_exist_ok=True)
    if sample is not None:
        shutil.copyfile(sample, data / sample_name(submission))
    return output


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="medchallenge aicrowd-evaluator", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, choices=sorted(CONFIGURATION_NAMES),
                        help="the scoring configuration (its evaluator image's name without -evaluator)")
    parser.add_argument("--task", default=None, help="the task, where the challenge has several (caption: "
                                                     "concept-detection or caption-prediction)")
    parser.add_argument("--output", type=Path, required=True, help="the evaluator folder to write")
    parser.add_argument("--wheel", type=Path, default=None, help="a medchallenge wheel to ship (default: built "
                                                                 "from this checkout)")
    parser.add_argument("--ground-truth", type=Path, default=None, help="copied to data/ground_truth for the "
                                                                        "self-test (python evaluator.py)")
    parser.add_argument("--sample-submission", type=Path, default=None, help="copied into data/ for the self-test")
    return parser


@report_errors
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging()
    folder = write_evaluator_folder(CONFIGURATION_NAMES[args.config], args.output, args.task, args.wheel,
                                    args.ground_truth, args.sample_submission)
    print(f"written: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
