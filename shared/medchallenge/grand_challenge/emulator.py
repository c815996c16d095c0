"""A small grand-challenge emulator: one algorithm job per case, then the evaluation's input as GC lays it out.

Per case, as grand-challenge does (sources: comic/grand-challenge.org `cases/tasks.py`, `components/backends/base.py`,
`components/models.py`, `components/serializers.py`, `evaluation/tasks.py`; see README "Grand-challenge emulation"):

1. upload: the case file is converted by panimg's `convert()` with its default image builders and no post-processors
   (GC's `import_images`); the image keeps panimg's pk and name, its file is `<image-pk>.mha` (or `.tif`);
2. the job: medchallenge.jobs.run_job, the one job runner (inputs.json, /opt/ml/model, GC's conditions, output
   sockets read and validated as GC does; anything else the algorithm left in /output is dropped);
3. evaluation input: every stored output at `<eval-input>/<job-pk>/output/<relative_path>`, `predictions.json`
   (JobSerializer of the successful jobs) and `inputs.json` (the evaluation's socket values: predictions-json-file
   and every job output).

Every challenge with an algorithm image is one entry of `ALGORITHMS`; the emulator has no per-challenge code.
`medchallenge preflight` runs the same jobs and scores them.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import sys
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..challenges.definition import ChallengeDefinition
from ..challenges.loader import load_challenge
from ..errors import report_errors
from ..io import user_path, write_text_atomic
from ..jobs import DockerImage, EmulationError, JobLimits, JobResult, Launcher, LocalProcess, run_job, upload_case
from ..jobs.runner import GpuRequest
from ..jobs.values import SocketValue, serialize_values
from ..logs import setup_logging
from ..registry import CHALLENGES
from ..sockets import Socket

log = logging.getLogger("medchallenge.grand_challenge.emulator")

__all__ = ["ALGORITHMS", "AlgorithmSpec", "EmulationError", "Socket", "emulate", "find_cases", "upload_case"]


@dataclass(frozen=True)
class AlgorithmSpec:
    """What a challenge's algorithm reads and writes on GC, and its image and script in this project."""

    image: str  # the project's algorithm image, without tag (tagged $MEDCHALLENGE_VERSION, as compose.yaml)
    inference_script: str  # for --runner local, relative to the repository root
    case_patterns: tuple[str, ...]  # which files of --cases are cases
    input_socket: Socket  # the image socket each case is uploaded to
    output_sockets: tuple[Socket, ...]

    @property
    def tagged_image(self) -> str:
        return f"{self.image}:{os.environ.get('MEDCHALLENGE_VERSION') or __version__}"


# One entry per challenge of the registry with an algorithm image.
ALGORITHMS = {
    name: AlgorithmSpec(
        image=challenge.algorithm_service.image,
        inference_script=f"algorithms/{challenge.module}/inference.py",
        case_patterns=challenge.algorithm.plugin().case_patterns,
        input_socket=challenge.interface.inputs[0],
        output_sockets=challenge.interface.outputs,
    )
    for name, challenge in CHALLENGES.items() if challenge.algorithm
}


def definition_spec(definition: ChallengeDefinition) -> AlgorithmSpec:
    """What the jobs of a challenge read and write: a built-in's entry of ALGORITHMS, else the definition's case
    patterns and sockets (a participant's image, never the project's)."""
    if definition.builtin:
        return ALGORITHMS[definition.name]
    return AlgorithmSpec(image="", inference_script="", case_patterns=definition.case_patterns,
                         input_socket=definition.interface.inputs[0], output_sockets=definition.interface.outputs)


# The socket GC creates for the evaluation's predictions.json (a JSON value stored in the database).
PREDICTIONS_SOCKET = Socket("predictions-json-file", "Anything", "Value", "predictions.json", "Predictions JSON File")


@dataclass
class CaseJob:
    """One uploaded case and its job."""

    case: Path
    result: JobResult


def find_cases(spec: AlgorithmSpec, folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise EmulationError(f"{folder}: not a folder of cases")
    cases = sorted({p for pattern in spec.case_patterns for p in folder.glob(pattern) if p.is_file()})
    if not cases:
        raise EmulationError(f"{folder}: no case files ({', '.join(spec.case_patterns)})")
    return cases


def run_jobs(spec: AlgorithmSpec, cases: Sequence[Path], work: Path, launcher: Launcher | str,
             model: Path | None = None, limits: JobLimits | None = None,
             gpu: GpuRequest | bool = "off") -> Iterator[CaseJob]:
    """Upload every case and run its job (medchallenge.jobs.run_job) under `work/jobs/<job-pk>`, in order."""
    store = work / "storage"  # GC's stored image files
    civ_pks = itertools.count(1_000_001)
    for index, case_file in enumerate(cases, start=1):
        image = upload_case(case_file, store / "images")
        value = SocketValue(next(civ_pks), spec.input_socket, image_pk=image.pk, image_name=image.name,
                            image_file=image.file)
        log.info("job %d/%d: %s -> %s", index, len(cases), case_file.name, value.relative_path)
        pk = str(uuid.uuid4())
        result = run_job(launcher, [value], spec.output_sockets, work / "jobs" / pk, model=model, limits=limits,
                         gpu=gpu, pks=civ_pks, pk=pk)
        yield CaseJob(case_file, result)


def emulate(spec: AlgorithmSpec, cases: Sequence[Path], work: Path, launcher: Launcher | str,
            model: Path | None = None, limits: JobLimits | None = None, gpu: GpuRequest | bool = "off") -> Path:
    """Run every case as one GC job; returns the evaluation's input folder (predictions.json, inputs.json, outputs).
    A failed job stops it, as it fails a submission on GC ('The algorithm failed on one or more cases')."""
    work.mkdir(parents=True, exist_ok=True)
    if (work / "evaluation-input").exists() and any((work / "evaluation-input").iterdir()):
        raise EmulationError(f"{work / 'evaluation-input'} is not empty: give --work an empty or new folder")
    jobs = []
    for job in run_jobs(spec, cases, work, launcher, model=model, limits=limits, gpu=gpu):
        if not job.result.succeeded:
            raise EmulationError(f"job {job.result.pk} ({job.case.name}) failed: {job.result.error}; "
                                 "grand-challenge fails the evaluation ('The algorithm failed on one or more cases')")
        jobs.append(job.result)
    eval_input = work / "evaluation-input"
    write_evaluation_input(jobs, eval_input, 1_000_000 + 1_000 * len(jobs))
    return eval_input


def write_evaluation_input(jobs: Sequence[JobResult], eval_input: Path, predictions_pk: int) -> None:
    """The evaluation's /input from the successful jobs: outputs at `<job-pk>/output/...`, predictions.json and
    inputs.json."""
    eval_input.mkdir(parents=True, exist_ok=True)
    succeeded = [job for job in jobs if job.succeeded]
    for job in succeeded:
        for value in job.output_values:
            value.provision(eval_input / job.pk / "output")
    predictions = SocketValue(predictions_pk, PREDICTIONS_SOCKET, value=[job.serialize() for job in succeeded])
    predictions.provision(eval_input)
    outputs = [value for job in succeeded for value in job.output_values]
    write_text_atomic(eval_input / "inputs.json", json.dumps(serialize_values([*outputs, predictions])))
    for path in [eval_input, *eval_input.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)


def image_launcher(spec: AlgorithmSpec, name_prefix: str = "medchallenge-job") -> DockerImage:
    """The project's algorithm image (compose.yaml's tag), run as grand-challenge runs it."""
    return DockerImage(spec.tagged_image, name_prefix=name_prefix)


def local_launcher(spec: AlgorithmSpec, repo: Path) -> LocalProcess:
    """The algorithm's inference script with this Python (no Docker); it reads INPUT_DIR, OUTPUT_DIR, MODEL_DIR."""
    return LocalProcess([sys.executable, str(repo / spec.inference_script)])


@report_errors
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m medchallenge.grand_challenge.emulator",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("challenge", metavar="NAME|FILE", help="a built-in challenge with an algorithm image, or "
                                                               "the path of a challenge definition (TOML)")
    parser.add_argument("--cases", type=user_path, required=True, help="folder of case files, uploaded one per job")
    parser.add_argument("--work", type=user_path, required=True, help="folder for the jobs and the evaluation input")
    parser.add_argument("--runner", choices=["docker", "local"], default="docker",
                        help="docker: the project's algorithm image (tag $MEDCHALLENGE_VERSION) or --image, run as "
                             "grand-challenge runs it (default); local: the inference script with this Python")
    parser.add_argument("--image", default=None, help="another algorithm image for --runner docker")
    parser.add_argument("--repo", type=user_path, default=Path.cwd(), help="repository root (for --runner local)")
    parser.add_argument("--model", type=user_path, default=None,
                        help="a model tarball (or folder) for /opt/ml/model (GC's algorithm model); default: empty, "
                             "so the model baked into the image runs")
    args = parser.parse_args(argv)
    setup_logging()
    spec = definition_spec(load_challenge(args.challenge))
    if args.model is not None and not args.model.exists():
        raise EmulationError(f"--model {args.model}: not found")
    if not spec.image and (args.runner == "local" or not args.image):
        raise EmulationError(f"{args.challenge}: a challenge defined by a file has no algorithm of the project's: "
                             "give --image (a participant's)")
    launcher = (local_launcher(spec, args.repo) if args.runner == "local"
                else DockerImage(args.image) if args.image else image_launcher(spec))
    eval_input = emulate(spec, find_cases(spec, args.cases), args.work, launcher, model=args.model)
    print(eval_input)
    return 0


if __name__ == "__main__":
    sys.exit(main())
