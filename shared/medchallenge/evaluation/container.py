"""An organiser's own evaluation container, run as grand-challenge runs a phase's evaluation method.

    from medchallenge.evaluation.container import run_evaluation_container
    result = run_evaluation_container("organiser/evaluation:1", work / "evaluation-input", Path("ground_truth.tar.gz"),
                                      work / "evaluation", limits=JobLimits(memory_gb=8, time_limit_s=3600))
    result.metrics, result.error, result.duration_s, result.logs, result.notes

The contract (the grand-challenge notes, "The evaluation container contract"): the evaluation's input folder (the
one `grand_challenge.emulator.write_evaluation_input` writes: predictions.json, inputs.json, `<job pk>/output/...`)
is mounted read-only as /input as it is, not copied; the ground truth read-only at /opt/ml/input/data/ground_truth (a
folder as it is, or a ground_truth.tar.gz unpacked once by the model tarball's rules); the container writes
/output/metrics.json. It runs through the one job runner (medchallenge.jobs.run_job) under grand-challenge's
conditions: the image's own entrypoint as its non-root user, no network, every capability dropped, its memory and
time limits (the phase's `evaluation_requires_memory_gb`, 8, and `evaluation_time_limit`, 60 min, by default), no
GPU unless asked, the image's file system as grand-challenge leaves it (writable only where its user owns it, and
discarded: only /output is read), Docker or Podman.

metrics.json is the container's and hostile. grand-challenge reads it as it reads any JSON output socket
(components/backends/base.py `_create_json_result`: the whole file into memory, `json.loads` with
`parse_constant=lambda x: None`, "Output file 'metrics.json' was not produced", "... is not valid json", "... is
too large" on a MemoryError); it has no size limit of its own but its workers' memory. Here it is read only as a
regular file (never through a link), refused unread above MAX_TEXT_BYTES (64 MiB by default, the project's bound
on any JSON it reads: some ten times the largest metrics.json of the built-in challenges, ImageCLEF's 7,601
cases with their per-case values) and nested deeper than MAX_JSON_DEPTH (64 levels), and must hold an object at
its top level (where the leaderboard's paths start). NaN, Infinity and -Infinity become null, as grand-challenge
makes them, and so does a number beyond a double's range (which would be Infinity once read): the evaluation
succeeds, and a note names the paths that became null, for the leaderboard shows no score there. Every failure
is one line in `ContainerEvaluation.error`; the container's own text appears only cleaned and cut
(jobs.runner.printable)."""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..challenges.definition import EvaluationDefinition, PhaseLimits
from ..errors import InputError
from ..jobs import DockerImage, EmulationError, EngineFault, JobLimits, Launcher, run_job
from ..jobs.conditions import DEFAULT_EVALUATION_MEMORY_GB, DEFAULT_EVALUATION_TIME_LIMIT_S
from ..jobs.model_tarball import unpack_model_once
from ..jobs.runner import printable
from ..limits import MAX_TEXT_BYTES, load_json
from ..phase.archive import DEFAULT_MAX_IMAGE_GB, GIB, verify_archive
from ..phase.images import EngineError, ensure_loaded
from ..sockets import Socket

# The socket grand-challenge gives every evaluation for its metrics.json (a JSON value stored in the database).
METRICS_SOCKET = Socket("metrics-json-file", "Anything", "Value", "metrics.json", "Metrics JSON File")
METRICS_FILE = f"The output file '{METRICS_SOCKET.relative_path}'"  # grand-challenge's words for it
EVALUATION_LIMITS = JobLimits(memory_gb=DEFAULT_EVALUATION_MEMORY_GB, time_limit_s=DEFAULT_EVALUATION_TIME_LIMIT_S)
NAME_PREFIX = "medchallenge-evaluation"
LOG_LINES = 20  # of the container's stdout and of its stderr, kept in a result
PATHS_SHOWN = 5  # JSON paths named in a note
KEY_CHARACTERS = 60  # of one key of the container's JSON, as a path shows it
JSON_TYPES = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}  # else a number
OTHERS_READ = stat.S_IROTH  # what the container's user (any uid) needs of a file it is given
OTHERS_ENTER = stat.S_IROTH | stat.S_IXOTH  # and of a folder


@dataclass(frozen=True)
class ContainerEvaluation:
    """One run of an evaluation container: the checked metrics.json (None when it failed), grand-challenge's error
    line when it failed, how long it ran, the last lines of its stdout then of its stderr (cleaned), and notes
    (where the run differed from grand-challenge's limits, what the container wrote outside /output, scores that
    became null)."""

    metrics: dict | None
    error: str | None
    duration_s: float
    logs: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def succeeded(self) -> bool:
        return self.error is None

    def to_json(self) -> dict:
        """The run as a report or a phase's state records it (metrics.json itself apart)."""
        return {"error": self.error, "duration_s": round(self.duration_s, 3), "logs": list(self.logs),
                "notes": list(self.notes)}


class _NotFinite:
    """A number of metrics.json that grand-challenge stores as null (NaN, +-Infinity, beyond a double's range)."""


NOT_FINITE = _NotFinite()


def _float(text: str) -> float | _NotFinite:
    value = float(text)  # 1e400 reads as Infinity
    return value if math.isfinite(value) else NOT_FINITE


def _int(text: str) -> int | _NotFinite:
    value = int(text)  # at most 4,300 digits (Python's int_max_str_digits): more is not valid JSON here
    return value if abs(value) < 2 ** 1024 else NOT_FINITE  # 2**1024 and above are Infinity as a double


def _key(key: str) -> str:
    return printable(key, KEY_CHARACTERS) or "''"


def _nulled(value: object, path: str, found: list[str]) -> object:
    """`value` with every NOT_FINITE replaced by None, the dotted path of each appended to `found`."""
    if value is NOT_FINITE:
        found.append(path)  # never the top level: that is an object
        return None
    if isinstance(value, dict):
        return {key: _nulled(item, f"{path}.{_key(key)}" if path else _key(key), found)
                for key, item in value.items()}
    if isinstance(value, list):
        return [_nulled(item, f"{path}[{index}]", found) for index, item in enumerate(value)]
    return value


def _read_bounded(path: Path, where: str) -> bytes:
    """The bytes of the regular file `path` (no link followed, nothing that blocks), refused unread when larger
    than MAX_TEXT_BYTES."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise InputError(f"{where} was not produced") from None
    except OSError as exc:  # a link (ELOOP), or unreadable
        raise InputError(f"{where} is not a readable regular file ({exc.strerror})") from None
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{where} is not a regular file")
        limit = MAX_TEXT_BYTES.value()
        if info.st_size > limit:
            raise InputError(f"{where} is too large: {info.st_size} bytes, more than {limit} "
                             f"(${MAX_TEXT_BYTES.variable} sets it); not read")
        data = handle.read(limit + 1)  # a file growing meanwhile is read no further
    if len(data) > limit:
        raise InputError(f"{where} is too large: more than {limit} bytes (${MAX_TEXT_BYTES.variable} sets it)")
    return data


def _load_metrics(path: Path, where: str) -> tuple[dict, list[str]]:
    """metrics.json checked (see the module's docstring), and the paths of the numbers that became null."""
    data = _read_bounded(path, where)
    try:
        parsed = load_json(data.decode("utf-8"), where, parse_constant=lambda _: NOT_FINITE, parse_float=_float,
                           parse_int=_int)
    except (ValueError, UnicodeDecodeError):  # JSONDecodeError is a ValueError; so is an int of too many digits
        raise InputError(f"{where} is not valid json") from None
    if not isinstance(parsed, dict):
        found = JSON_TYPES.get(type(parsed), "a number")
        raise InputError(f"{where} is not valid: it holds {found} at its top level, not the object the leaderboard's "
                         "paths start from")
    nulled: list[str] = []
    metrics = _nulled(parsed, "", nulled)
    return metrics, nulled


def read_metrics(path: Path, where: str | None = None) -> dict:
    """An evaluation's metrics.json, bounded and checked (see the module's docstring): its object, with NaN,
    Infinity and numbers beyond a double's range as null; InputError in one line naming `where` (default: the
    path) otherwise."""
    return _load_metrics(path, where or str(path))[0]


def _nulled_note(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:PATHS_SHOWN]) + (f" and {len(paths) - PATHS_SHOWN} more" if len(paths) > PATHS_SHOWN
                                              else "")
    return (f"metrics.json holds {len(paths)} number(s) that are not finite (NaN, Infinity or beyond a double's "
            f"range), stored as null as grand-challenge stores them, so no score there: {shown}")


def _check_readable(folder: Path, what: str) -> None:
    """Every file under `folder` readable, and every folder enterable, by the container's user (any uid: the
    others' permission bits), links not followed; EmulationError naming the first that is not."""
    for root, folders, files in os.walk(folder):
        for name in [".", *folders, *files]:
            path = Path(root) / name
            info = path.lstat()
            needed = OTHERS_ENTER if stat.S_ISDIR(info.st_mode) else OTHERS_READ
            if not stat.S_ISLNK(info.st_mode) and info.st_mode & needed != needed:
                shown = printable(str(path.relative_to(folder)), 120)
                raise EmulationError(f"{what} {folder}: {shown} is not readable by the evaluation's user (mode "
                                     f"{stat.S_IMODE(info.st_mode):04o}); grand-challenge gives the evaluation its "
                                     "files readable: chmod -R a+rX it")


def prepare_ground_truth(ground_truth: Path, target: Path, budget: int) -> Path:
    """The folder the evaluation sees as /opt/ml/input/data/ground_truth: `ground_truth` itself where it is a folder
    (mounted read-only as it is), else the ground_truth.tar.gz it is, unpacked into `target` unless it already was
    (model_tarball.unpack_model_once: its rules, and at most `budget` bytes), so that a phase unpacks it once for
    all its teams' evaluations."""
    if ground_truth.is_dir():
        folder = ground_truth.resolve()
        _check_readable(folder, "ground truth")
        return folder
    if ground_truth.is_file():
        return unpack_model_once(ground_truth, target, budget, what="ground truth")
    raise EmulationError(f"ground truth {ground_truth}: not found (a folder, or a ground_truth.tar.gz)")


def load_evaluation_image(archive: Path, engine: str = "docker",
                          max_bytes: int = int(DEFAULT_MAX_IMAGE_GB * GIB)) -> str:
    """An organiser's `docker save` archive of the evaluation, verified (phase.archive.verify_archive: InputError in
    one line) and loaded into `engine` without a tag (phase.images.ensure_loaded: none created or moved); the image
    ID to run. EngineFault where the engine fails to load what was verified."""
    image = verify_archive(archive, max_bytes)
    try:
        ensure_loaded(engine, archive, image)
    except EngineError as exc:
        raise EngineFault(str(exc)) from None
    return image.digest


def evaluation_limits(limits: PhaseLimits) -> JobLimits:
    """What a phase's evaluation runs under: its `evaluation_requires_memory_gb` and `evaluation_time_limit`."""
    return JobLimits(memory_gb=limits.evaluation_memory_gb, time_limit_s=limits.evaluation_time_limit_s)


def evaluation_image(evaluation: EvaluationDefinition, engine: str = "docker") -> str:
    """The image to run for a definition's evaluation container: its tag as it is (the engine must have it), or
    its `docker save` archive loaded without a tag (load_evaluation_image); EmulationError for a built-in
    evaluator, which is no container."""
    if evaluation.archive is not None:
        return load_evaluation_image(evaluation.archive, engine)
    if evaluation.image is None:
        raise EmulationError(f"evaluation {evaluation.builtin}: a built-in evaluator, not an evaluation container")
    return evaluation.image


def run_evaluation_container(image: str | Launcher, eval_input: Path, ground_truth: Path, work: Path, *,
                             engine: str = "docker", limits: JobLimits = EVALUATION_LIMITS, gpu: bool = False,
                             name_prefix: str = NAME_PREFIX) -> ContainerEvaluation:
    """Run the evaluation container `image` (a tag or an image ID; a Launcher for a process without an engine) on
    `eval_input` and `ground_truth` (a folder or a ground_truth.tar.gz, see prepare_ground_truth), its job folder
    under `work` (new or empty). What the container does wrong is the result's one error line, the others' runs
    untouched; raised are only what is wrong before it runs (EmulationError: the input or ground truth given, a GPU
    asked for where there is none) and a failing engine (EngineFault)."""
    if not eval_input.is_dir():
        raise EmulationError(f"evaluation input {eval_input}: not a folder")
    _check_readable(eval_input, "evaluation input")
    truth = prepare_ground_truth(ground_truth, work / "ground-truth", limits.disk_bytes)
    launcher = DockerImage(image, name_prefix=name_prefix, engine=engine) if isinstance(image, str) else image
    try:
        image_notes = launcher.check()  # what grand-challenge refuses at upload: the image's fault
    except EngineFault:
        raise
    except EmulationError as exc:
        return ContainerEvaluation(None, str(exc), 0.0)
    result = run_job(launcher, [], [METRICS_SOCKET], work / "job", limits=limits, gpu=gpu, input_dir=eval_input,
                     ground_truth=truth, component="evaluation")
    logs = (*result.stdout_tail[-LOG_LINES:], *result.stderr_tail[-LOG_LINES:])
    notes = [*image_notes, *result.notes]
    if not result.succeeded:
        return ContainerEvaluation(None, result.error, result.wall_seconds, logs, tuple(notes))
    try:
        metrics, nulled = _load_metrics(work / "job" / "output" / METRICS_SOCKET.relative_path, METRICS_FILE)
    except InputError as exc:
        return ContainerEvaluation(None, str(exc), result.wall_seconds, logs, tuple(notes))
    if nulled:
        notes.append(_nulled_note(nulled))
    return ContainerEvaluation(metrics, None, result.wall_seconds, logs, tuple(notes))
