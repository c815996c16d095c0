"""A small grand-challenge emulator: one algorithm job per case, then the evaluation's input as GC lays it out.

Per case, as grand-challenge does (sources: comic/grand-challenge.org `cases/tasks.py`, `components/backends/base.py`,
`components/models.py`, `components/serializers.py`, `evaluation/tasks.py`; see README "Grand-challenge emulation"):

1. upload: the case file is converted by panimg's `convert()` with its default image builders and no post-processors
   (GC's `import_images`); the image keeps panimg's pk and name, its file is `<image-pk>.mha` (or `.tif`);
2. job input: `<relative_path>/<image-pk>.mha` plus `inputs.json` (ComponentInterfaceValueSerializer, sorted as GC
   sorts socket values); `/opt/ml/model` is an empty folder unless a model folder or tarball is given;
3. run the algorithm with that folder as /input and a fresh /output;
4. outputs: only the declared output sockets are read, validated and stored (images re-imported with panimg's MHA
   and TIFF builders, JSON parsed with NaN/Infinity -> null and written back with `json.dumps`); anything else the
   algorithm left in /output is dropped;
5. evaluation input: every stored output at `<eval-input>/<job-pk>/output/<relative_path>`, `predictions.json`
   (JobSerializer of the successful jobs) and `inputs.json` (the evaluation's socket values: predictions-json-file
   and every job output).

Every challenge with an algorithm image is one entry of `ALGORITHMS`; the emulator has no per-challenge code.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InputError, report_errors
from .io import write_text_atomic
from .logs import setup_logging
from .registry import CHALLENGES
from .sockets import Socket

log = logging.getLogger("medchallenge.gc_emulator")

# The panimg release grand-challenge.org locks (uv.lock of comic/grand-challenge.org, with
# `panimg!=0.15.1,>=0.12.0` in its pyproject.toml); pinned in requirements/runtime.txt.
PANIMG_VERSION = "0.15.2"
GC_URL = "https://grand-challenge.org"


class EmulationError(InputError):
    """A job or upload that grand-challenge would fail: one line saying which and why."""


@dataclass(frozen=True)
class AlgorithmSpec:
    """What a challenge's algorithm reads and writes on GC, and how to run it here."""

    service: str  # docker compose service
    env_prefix: str  # compose.yaml's folder variables: <prefix>_INPUT, _PREDICTIONS, _MODEL
    inference_script: str  # for --runner local, relative to the repository root
    case_patterns: tuple[str, ...]  # which files of --cases are cases
    input_socket: Socket  # the image socket each case is uploaded to
    output_sockets: tuple[Socket, ...]


# One entry per challenge of the registry with an algorithm image.
ALGORITHMS = {
    name: AlgorithmSpec(
        service=challenge.algorithm_service.name,
        env_prefix=challenge.default.variable_prefix,
        inference_script=f"algorithms/{challenge.module}/inference.py",
        case_patterns=challenge.algorithm.plugin().case_patterns,
        input_socket=challenge.interface.inputs[0],
        output_sockets=challenge.interface.outputs,
    )
    for name, challenge in CHALLENGES.items() if challenge.algorithm
}

# The socket GC creates for the evaluation's predictions.json (a JSON value stored in the database).
PREDICTIONS_SOCKET = Socket("predictions-json-file", "Anything", "Value", "predictions.json", "Predictions JSON File")

Runner = Callable[[Path, Path, Path], None]  # (job input, job output, model folder) -> runs one job


@dataclass
class SocketValue:
    """A ComponentInterfaceValue: a socket with a value, a file (its bytes) or an image (its stored file)."""

    pk: int
    socket: Socket
    value: object = None
    content: bytes | None = None  # File sockets: what is provisioned at relative_path
    image_pk: str | None = None
    image_name: str | None = None
    image_file: Path | None = None  # the stored `<image-pk>.mha`/`.tif`

    @property
    def relative_path(self) -> str:
        """Where the value is provisioned; image files keep their stored name (ComponentInterfaceValue)."""
        if self.image_file is not None:
            return f"{self.socket.relative_path}/{self.image_file.name}"
        return self.socket.relative_path

    def serialize(self) -> dict:
        """ComponentInterfaceValueSerializer: `socket` and (legacy) `interface`, value, file, image, pk."""
        interface = self.socket.serialize()
        file_url = (f"{GC_URL}/media/components/componentinterfacevalue/{self.pk}/"
                    f"{Path(self.socket.relative_path).name}" if self.content is not None else None)
        image = {"pk": self.image_pk, "name": self.image_name} if self.image_pk is not None else None
        return {"socket": interface, "interface": interface, "value": self.value, "file": file_url, "image": image,
                "pk": self.pk}

    def provision(self, base: Path) -> Path:
        """Write this value under `base` as GC provisions it (images copied, JSON values as `json.dumps`)."""
        target = base / self.relative_path
        target.parent.mkdir(parents=True, exist_ok=True)
        if self.image_file is not None:
            shutil.copyfile(self.image_file, target)
        elif self.content is not None:
            target.write_bytes(self.content)
        else:
            target.write_text(json.dumps(self.value), encoding="utf-8")
        return target


def sort_values(values: Iterable[SocketValue]) -> list[SocketValue]:
    """GC's `sort_civs`: by slug, then values, files, images."""
    def group(v: SocketValue) -> int:
        if v.value is not None:
            return 0
        return {"File": 1, "Image": 2}.get(v.socket.super_kind, 3)

    ordered = sorted(values, key=lambda v: v.socket.slug)  # stable: equal slugs keep their (pk) order
    return sorted(ordered, key=group)


def serialize_values(values: Iterable[SocketValue]) -> list[dict]:
    return [v.serialize() for v in sort_values(values)]


@dataclass
class UploadedImage:
    """An image as GC stores it after converting an upload with panimg."""

    pk: str
    name: str
    file: Path
    image_type: str  # "MHD" | "TIFF"
    metadata: dict = field(default_factory=dict)  # panimg's PanImg fields (width, voxel_width_mm, color_space, ...)


def _panimg():
    try:
        import panimg
        from panimg import image_builders
    except ImportError as exc:
        raise EmulationError(f"the emulator converts uploads with panimg=={PANIMG_VERSION} as grand-challenge does; "
                             f"install requirements/runtime.txt ({exc})") from None
    logging.getLogger("panimg").setLevel(logging.WARNING)
    return panimg, image_builders


def _convert(input_dir: Path, output_dir: Path, builders, what: str) -> list[UploadedImage]:
    """panimg `convert()` as GC's `import_images` calls it (no post-processors); errors become one line."""
    panimg, _ = _panimg()
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        result = panimg.convert(input_directory=input_dir, output_directory=output_dir, builders=builders,
                                post_processors=[], recurse_subdirectories=True)
    except Exception as exc:  # panimg lets pydantic/TypeErrors of odd images escape; GC reports them like this
        try:  # pydantic: the first error's message; others: the first line
            first = exc.errors()[0]["msg"]
        except Exception:
            first = (str(exc).strip().splitlines() or [""])[0]
        raise EmulationError(f"{what}: grand-challenge would report 'An unexpected error occurred' (panimg "
                             f"{type(exc).__name__}: {first})") from None
    files = {f.image_id: f for f in result.new_image_files if f.image_type.value in ("MHD", "TIFF")}
    images = []
    for image in sorted(result.new_images, key=lambda i: i.name):
        stored = files[image.pk]
        metadata = {k: getattr(image, k) for k in ("width", "height", "depth", "voxel_width_mm", "voxel_height_mm",
                                                   "voxel_depth_mm", "color_space")}
        metadata["color_space"] = metadata["color_space"].value
        images.append(UploadedImage(str(image.pk), image.name, Path(stored.file), stored.image_type.value, metadata))
    if not images:
        errors = "; ".join(f"{Path(p).name}: {' / '.join(e)}" for p, e in sorted(result.file_errors.items()))
        raise EmulationError(f"{what}: no image could be imported ({errors or 'no files'})")
    return images


def upload_case(case_file: Path, store: Path) -> UploadedImage:
    """Convert one uploaded file as GC's upload processing does; the converted file is kept under `store`."""
    with tempfile.TemporaryDirectory(prefix="upload-") as tmp:
        upload_dir = Path(tmp) / "upload"
        upload_dir.mkdir()
        shutil.copyfile(case_file, upload_dir / case_file.name)
        images = _convert(upload_dir, Path(tmp) / "converted", None, f"upload {case_file.name}")
        if len(images) != 1:
            raise EmulationError(f"upload {case_file.name}: panimg made {len(images)} images of one file")
        image = images[0]
        kept = store / image.pk / image.file.name
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(image.file, kept)
        image.file = kept
    return image


def prepare_model(model: Path | None, target: Path) -> None:
    """/opt/ml/model: empty by default (the image's baked model runs); a folder is copied, a tarball extracted."""
    _open_dir(target)
    if model is None:
        return
    if model.is_dir():
        shutil.copytree(model, target, dirs_exist_ok=True)
    elif tarfile.is_tarfile(model):
        with tarfile.open(model) as archive:
            archive.extractall(target, filter="data")  # as the sagemaker shim extracts model tarballs
    else:
        raise EmulationError(f"--model {model}: neither a folder nor a tar(.gz) file")
    for path in target.rglob("*"):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)


def _read_json_output(path: Path, socket: Socket):
    try:
        return json.loads(path.read_text(encoding="utf-8"), parse_constant=lambda _: None)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise EmulationError(f"The output file '{socket.relative_path}' is not valid json") from None


def collect_output(job_output: Path, socket: Socket, pk: int, store: Path) -> SocketValue:
    """One declared output socket as GC reads it from /output (Executor.get_outputs); failures as GC words them."""
    path = job_output / socket.relative_path
    if socket.super_kind == "Image":
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else []
        if not files:
            raise EmulationError(f"Output directory '{socket.relative_path}' is empty")
        _, builders = _panimg()
        images = _convert(path, store / f"output-{pk}", [builders.image_builder_mhd, builders.image_builder_tiff],
                          f"No output images could be imported from '{socket.relative_path}'")
        if len(images) > 1:
            raise EmulationError(f"Only 1 image should be produced in '{socket.relative_path}', we found {len(images)}")
        image = images[0]
        return SocketValue(pk, socket, image_pk=image.pk, image_name=image.name, image_file=image.file)
    if not path.is_file():
        raise EmulationError(f"Output file '{socket.relative_path}' was not produced")
    if socket.relative_path.endswith(".json"):
        value = _read_json_output(path, socket)
        if socket.super_kind == "Value":
            return SocketValue(pk, socket, value=value)
        return SocketValue(pk, socket, content=json.dumps(value).encode("utf-8"))
    return SocketValue(pk, socket, content=path.read_bytes())


def _open_dir(path: Path) -> Path:
    """Create `path` writable by the container user (uid 1000) whatever uid runs the emulator."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o777)
    return path


def _readable(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)


@dataclass
class Job:
    pk: str
    case: Path
    inputs: list[SocketValue]
    outputs: list[SocketValue] = field(default_factory=list)
    seconds: float = 0.0

    def serialize(self) -> dict:
        """JobSerializer (the entries of predictions.json)."""
        return {"pk": self.pk, "url": f"{GC_URL}/algorithms/emulated/jobs/{self.pk}/",
                "api_url": f"{GC_URL}/api/v1/algorithms/jobs/{self.pk}/", "algorithm_image": "emulated",
                "inputs": serialize_values(self.inputs), "outputs": serialize_values(self.outputs),
                "status": "Succeeded", "hanging_protocol": None, "optional_hanging_protocols": [],
                "view_content": {}, "exec_duration": _duration(self.seconds), "invoke_duration": None}


def _duration(seconds: float) -> str:
    """Django's duration_string, as DRF's DurationField writes exec_duration: `[D ]HH:MM:SS[.ffffff]`."""
    micro = round(seconds * 1e6)
    days, rest = divmod(micro, 86_400 * 10**6)
    whole, micro = divmod(rest, 10**6)
    text = f"{whole // 3600:02d}:{whole // 60 % 60:02d}:{whole % 60:02d}"
    return (f"{days} " if days else "") + text + (f".{micro:06d}" if micro else "")


def find_cases(spec: AlgorithmSpec, folder: Path) -> list[Path]:
    cases = sorted({p for pattern in spec.case_patterns for p in folder.glob(pattern) if p.is_file()})
    if not cases:
        raise EmulationError(f"{folder}: no case files ({', '.join(spec.case_patterns)})")
    return cases


def emulate(spec: AlgorithmSpec, cases: Sequence[Path], work: Path, run_algorithm: Runner,
            model: Path | None = None) -> Path:
    """Run every case as one GC job; returns the evaluation's input folder (predictions.json, inputs.json, outputs)."""
    work.mkdir(parents=True, exist_ok=True)
    if (work / "evaluation-input").exists() and any((work / "evaluation-input").iterdir()):
        raise EmulationError(f"{work / 'evaluation-input'} is not empty: give --work an empty or new folder")
    eval_input = _open_dir(work / "evaluation-input")
    store = work / "storage"  # GC's stored image files
    civ_pks = itertools.count(1_000_001)
    jobs = []
    for index, case_file in enumerate(cases, start=1):
        pk = str(uuid.uuid4())
        job_dir = work / "jobs" / pk
        image = upload_case(case_file, store / "images")
        job = Job(pk, case_file, [SocketValue(next(civ_pks), spec.input_socket, image_pk=image.pk,
                                              image_name=image.name, image_file=image.file)])
        job_input, job_output, model_dir = job_dir / "input", _open_dir(job_dir / "output"), job_dir / "model"
        for value in job.inputs:
            value.provision(job_input)
        write_text_atomic(job_input / "inputs.json", json.dumps(serialize_values(job.inputs)))
        _readable(job_input)
        prepare_model(model, model_dir)
        log.info("job %d/%d %s: %s -> %s (%s)", index, len(cases), pk, case_file.name,
                 job.inputs[0].relative_path, image.name)
        started = time.perf_counter()
        try:
            run_algorithm(job_input, job_output, model_dir)
        except subprocess.CalledProcessError as exc:
            raise EmulationError(f"job {pk} ({case_file.name}) failed: the algorithm exited with status "
                                 f"{exc.returncode}; grand-challenge shows its last stderr line and fails the "
                                 "evaluation ('The algorithm failed on one or more cases')") from None
        job.seconds = time.perf_counter() - started
        try:
            job.outputs = [collect_output(job_output, s, next(civ_pks), store / "outputs" / pk)
                           for s in spec.output_sockets]
        except EmulationError as exc:
            raise EmulationError(f"job {pk} ({case_file.name}) failed: {exc}") from None
        declared = {(job_output / s.relative_path).resolve() for s in spec.output_sockets}
        dropped = [p.relative_to(job_output).as_posix() for p in sorted(job_output.rglob("*"))
                   if p.is_file() and not any(p.resolve() == d or d in p.resolve().parents for d in declared)]
        if dropped:
            log.info("job %s: dropped %d undeclared output file(s): %s", pk, len(dropped), ", ".join(dropped[:5]))
        jobs.append(job)
    write_evaluation_input(jobs, eval_input, next(civ_pks))
    return eval_input


def write_evaluation_input(jobs: Sequence[Job], eval_input: Path, predictions_pk: int) -> None:
    """The evaluation's /input: outputs at `<job-pk>/output/...`, predictions.json and inputs.json."""
    for job in jobs:
        for value in job.outputs:
            value.provision(eval_input / job.pk / "output")
    predictions = SocketValue(predictions_pk, PREDICTIONS_SOCKET, value=[job.serialize() for job in jobs])
    predictions.provision(eval_input)
    outputs = [value for job in jobs for value in job.outputs]
    write_text_atomic(eval_input / "inputs.json", json.dumps(serialize_values([*outputs, predictions])))
    _readable(eval_input)


def compose_runner(spec: AlgorithmSpec, compose_file: Path) -> Runner:
    """Run the algorithm's compose service with the job folders as /input, /output and /opt/ml/model."""

    def run(job_input: Path, job_output: Path, model_dir: Path) -> None:
        env = dict(os.environ, **{f"{spec.env_prefix}_INPUT": str(job_input.resolve()),
                                  f"{spec.env_prefix}_PREDICTIONS": str(job_output.resolve()),
                                  f"{spec.env_prefix}_MODEL": str(model_dir.resolve())})
        subprocess.run(["docker", "compose", "-f", str(compose_file), "run", "--rm", "--no-deps", spec.service],
                       env=env, check=True)

    return run


def local_runner(spec: AlgorithmSpec, repo: Path) -> Runner:
    """Run the algorithm's inference script with this Python (no Docker), with GC's environment additions."""

    def run(job_input: Path, job_output: Path, model_dir: Path) -> None:
        env = dict(os.environ, LOG_LEVEL="INFO", PYTHONUNBUFFERED="1")
        subprocess.run([sys.executable, str(repo / spec.inference_script), "--input", str(job_input),
                        "--output", str(job_output), "--model", str(model_dir)], env=env, check=True)

    return run


@report_errors
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m medchallenge.gc_emulator", description=__doc__.split("\n\n")[0])
    parser.add_argument("challenge", choices=sorted(ALGORITHMS))
    parser.add_argument("--cases", type=Path, required=True, help="folder of case files, uploaded one per job")
    parser.add_argument("--work", type=Path, required=True, help="folder for the jobs and the evaluation input")
    parser.add_argument("--runner", choices=["compose", "local"], default="compose")
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="repository root (compose.yaml)")
    parser.add_argument("--model", type=Path, default=None,
                        help="a model folder or tarball for /opt/ml/model (GC's algorithm model); default: empty, "
                             "so the model baked into the image runs")
    args = parser.parse_args(argv)
    setup_logging()
    spec = ALGORITHMS[args.challenge]
    if args.model is not None and not args.model.exists():
        raise EmulationError(f"--model {args.model}: not found")
    runner = (compose_runner(spec, args.repo / "compose.yaml") if args.runner == "compose"
              else local_runner(spec, args.repo))
    eval_input = emulate(spec, find_cases(spec, args.cases), args.work, runner, model=args.model)
    print(eval_input)
    return 0


if __name__ == "__main__":
    sys.exit(main())
