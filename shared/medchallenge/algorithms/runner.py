"""The algorithm runner: the container contract of every algorithm image around one challenge's model.

Modes: `INPUT/inputs.json` present -> grand-challenge one-case mode: the set of input socket slugs selects one of the
algorithm's interfaces (as grand-challenge-forge's inference template dispatches), and each output socket's value is
written at its relative path under OUTPUT. Absent -> batch mode: every file of INPUT matching the algorithm's case
patterns is a case; per-case files as each case is done, then the run file(s), go to OUTPUT. DICOM input: when
no file matches the case patterns and the algorithm has a DICOM contract (`Algorithm.dicom`), the DICOM files under
INPUT are read instead (`medchallenge.dicom.series`: per study, its series of an accepted modality, checked and
ordered); each study is a case, named after its folder under INPUT (its StudyInstanceUID when studies share a
folder), and besides the challenge files its result objects (DICOM SR, SEG: the contract's writer) go to
OUTPUT/dicom/<SOPInstanceUID>.dcm. A case whose input is one DICOM file (a radiograph matching the case patterns)
gets its result objects the same way, on that image.

Model: `<model dir>/<model file>` when that file exists, the model dir being `--model`, else `$MODEL_DIR`, else
/opt/ml/model (a grand-challenge model tarball, a mounted folder); otherwise the model baked into the image
(/opt/app/model; the entry script passes the folder beside it, which is that folder in the image).
Device: `--device auto|cpu|cuda`, default `$MEDCHALLENGE_DEVICE` or auto (CUDA if ONNX Runtime offers it).
Every output file is written atomically (complete or absent); bad input is one `error:` line and exit status 1.
Output socket values and per-case files are JSON values, or an `ImageOutput` (a SimpleITK image: a per-case file
written in the format of its name, or, for an image socket, one file in the socket's folder).
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from ..contract import SocketValue, add_path_arguments, read_inputs_json
from ..dicom.series import DicomSeries, dicom_files, is_dicom_file, read_headers, read_volume, select_study_series
from ..errors import InputError, report_errors
from ..imaging import read_image
from ..io import write_dicom_atomic, write_image_atomic, write_json_atomic, write_text_atomic
from ..logs import setup_logging
from ..onnx_session import DEVICES, resolve_model
from ..sockets import Interface

log = logging.getLogger("medchallenge.algorithm")

BAKED_MODEL_DIR = Path("/opt/app/model")
DEVICE_VARIABLE = "MEDCHALLENGE_DEVICE"

Prediction = TypeVar("Prediction")
Prediction_co = TypeVar("Prediction_co", covariant=True)


@dataclass(frozen=True)
class ImageOutput:
    """An image output value: a SimpleITK image; `socket_file` is its file name in an image socket's folder."""

    image: object
    socket_file: str = "output.mha"


def write_output(path: Path, value: object) -> Path:
    """Write one output value atomically: an image (into `path` as a folder when `path` has no suffix, GC's image
    socket) or JSON; returns the file written."""
    if isinstance(value, ImageOutput):
        target = path / value.socket_file if not path.suffix else path
        write_image_atomic(target, value.image)
        return target
    write_json_atomic(path, value)
    return path


@dataclass(frozen=True)
class Case:
    """One case: its name (the uploaded file's name, e.g. `TST_001.nii.gz`) and its input files by socket slug; for
    DICOM input, the study's chosen series (slices in position order) and its slice spacing."""

    name: str
    inputs: Mapping[str, Path]
    dicom: tuple[DicomSeries, float] | None = None

    def read_image(self, slug: str, what: str):
        """The SimpleITK image of input `slug`: the DICOM series, else the file (with the header checks)."""
        if self.dicom is not None:
            return read_volume(*self.dicom)
        return read_image(self.inputs[slug], what)


class Model(Protocol[Prediction_co]):
    """A challenge's model, loaded once per run."""

    provider: str  # the ONNX Runtime execution provider in use, logged

    def predict(self, case: Case) -> Prediction_co: ...

    # Optional, batch mode: `predict_all(cases) -> Iterator[prediction]`, the predictions of all cases in order, for a
    # model that reads ahead or batches its network (used instead of `predict` case by case when present).


DICOM_OUTPUT_FOLDER = "dicom"


@dataclass(frozen=True)
class DicomContract(Generic[Prediction]):
    """How an algorithm takes DICOM studies and gives DICOM results: the modalities of the series it reads, and the
    writer of its result objects (pydicom Datasets referencing the source series: SR, SEG)."""

    modalities: tuple[str, ...]
    write_results: Callable[[DicomSeries, Prediction], list]


@dataclass(frozen=True)
class Algorithm(Generic[Prediction]):
    """What a challenge plugs into the runner: its model and how its predictions are written."""

    description: str  # for --help
    interfaces: tuple[Interface, ...]  # the GC interfaces it serves; batch mode reads the first one's input socket
    model_file: str  # the file name inside a model folder
    load_model: Callable[..., Model[Prediction]]  # (model file, device, **options); InputError for an unusable one
    case_patterns: tuple[str, ...]  # batch mode: which files of the input folder are cases
    gc_outputs: Callable[[Prediction], dict[str, object]]  # GC mode: output socket slug -> JSON value/ImageOutput
    case_outputs: Callable[[Case, Prediction], dict[str, object]]  # batch: per-case file name -> JSON/ImageOutput
    run_files: Callable[[list[tuple[Case, Prediction]]], dict[str, str]]  # batch mode: run file name -> text
    describe: Callable[[Prediction], str]  # a prediction in a few words for the progress log, e.g. "2 box(es)"
    # characters a case name cannot hold in the run files (beyond control characters, which no line-based file can)
    name_forbidden: str = ""
    # batch mode: the cases a list file in the input folder names, as (name, path), or None without one (then
    # every file matching the case patterns is a case)
    list_cases: Callable[[Path], list[tuple[str, Path]] | None] | None = None
    # options of its own (e.g. an edition): added to the command line, their values passed to `load_model` as
    # keyword arguments named after their dests
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
    dicom: DicomContract[Prediction] | None = None  # DICOM studies in, DICOM result objects out (batch mode)

    def __post_init__(self) -> None:
        if len(self.interfaces[0].inputs) != 1:
            raise ValueError("batch mode reads one file per case: the first interface must have one input socket")


def model_location(model_file: str, model_dir: Path, baked_model_dir: Path) -> Path:
    """`model_dir/model_file` when it exists, else the baked one; an InputError when neither exists."""
    path = resolve_model(baked_model_dir / model_file, model_dir, model_file)
    if not path.is_file():
        raise InputError(f"{model_file}: no model file in {model_dir} or {baked_model_dir}")
    return path


def load_model(algorithm: Algorithm[Prediction], model_path: Path, device: str,
               options: Mapping[str, object] = {}) -> Model[Prediction]:
    """The challenge's model on `device` with its own options; the log names the model file and the provider."""
    model = algorithm.load_model(model_path, device, **options)
    log.info("model %s, provider %s", model_path, model.provider)
    return model


def gc_case(interfaces: tuple[Interface, ...], sockets: dict[str, SocketValue], input_dir: Path
            ) -> tuple[Interface, Case]:
    """The interface whose input sockets are exactly the job's, and the job's case; named after its first input."""
    slugs = set(sockets)
    interface = next((i for i in interfaces if {s.slug for s in i.inputs} == slugs), None)
    if interface is None:
        expected = " or ".join(str(sorted(s.slug for s in i.inputs)) for i in interfaces)
        raise InputError(f"{input_dir / 'inputs.json'}: input sockets {sorted(slugs)} match no interface of this "
                         f"algorithm (expected {expected})")
    inputs = {s.slug: sockets[s.slug].image_file() if s.super_kind == "Image" else sockets[s.slug].path
              for s in interface.inputs}
    first = sockets[interface.inputs[0].slug]
    return interface, Case(first.image_name or inputs[first.slug].name, inputs)


def check_case_name(algorithm: Algorithm, name: str, where: str) -> None:
    """Refuse a case name the run file cannot carry."""
    unsafe = sorted({c for c in name if c in algorithm.name_forbidden or not c.isprintable()})
    if unsafe:
        raise InputError(f"{where!r}: the case name {name!r} holds {', '.join(map(repr, unsafe))}, which the run "
                         "file cannot carry (it would forge or break its lines); rename the case")


def batch_cases(algorithm: Algorithm, input_dir: Path) -> list[Case]:
    """The cases of the algorithm's list file in `input_dir`, else every file matching the case patterns, named by
    their path relative to `input_dir`, as cases of the first interface's input; when there is no such file, the
    DICOM studies under it (if the algorithm takes DICOM)."""
    if not input_dir.is_dir():
        raise InputError(f"{input_dir}: input folder does not exist")
    listed = algorithm.list_cases(input_dir) if algorithm.list_cases else None
    if listed is None:
        paths = sorted({p for pattern in algorithm.case_patterns for p in input_dir.glob(pattern) if p.is_file()})
        if not paths:
            files = dicom_files(input_dir) if algorithm.dicom else []
            if files:
                return dicom_cases(algorithm, input_dir, files)
            dicom = " or DICOM files" if algorithm.dicom else ""
            raise InputError(f"{input_dir}: no {' or '.join(algorithm.case_patterns)}{dicom} files (and no "
                             "inputs.json)")
        listed = [(path.relative_to(input_dir).as_posix(), path) for path in paths]
    for name, path in listed:
        check_case_name(algorithm, name, str(path))
    slug = algorithm.interfaces[0].inputs[0].slug
    return [Case(name, {slug: path}) for name, path in listed]


def _top_folder(path: Path, input_dir: Path) -> str:
    """The first folder of `path` under `input_dir` ('' for a file directly in it)."""
    parts = path.relative_to(input_dir).parts
    return parts[0] if len(parts) > 1 else ""


def dicom_cases(algorithm: Algorithm, input_dir: Path, files: list[Path]) -> list[Case]:
    """One case per DICOM study under `input_dir`, named after the study's own folder under it, else its UID."""
    series = read_headers(files)
    studies_in_folder: dict[str, set[str]] = defaultdict(set)
    for s in series:
        for path in s.files:
            studies_in_folder[_top_folder(path, input_dir)].add(s.study_uid)
    slug = algorithm.interfaces[0].inputs[0].slug
    cases = []
    for chosen, spacing in select_study_series(series, algorithm.dicom.modalities):
        folders = {_top_folder(path, input_dir) for path in chosen.files}
        folder = folders.pop() if len(folders) == 1 else ""
        name = folder if folder and studies_in_folder[folder] == {chosen.study_uid} else chosen.study_uid
        check_case_name(algorithm, name, str(input_dir / name))
        cases.append(Case(name, {slug: chosen.files[0].parent}, (chosen, spacing)))
    log.info("DICOM input: %s", ", ".join(f"{c.name} ({c.dicom[0].modality}, {len(c.dicom[0].files)} slices)"
                                          for c in cases))
    return sorted(cases, key=lambda c: c.name)


def dicom_source(algorithm: Algorithm, case: Case) -> DicomSeries | None:
    """What a case's DICOM results refer to: its study's series, or its input file when that is one DICOM image;
    None without a DICOM contract or DICOM input."""
    if algorithm.dicom is None:
        return None
    if case.dicom is not None:
        return case.dicom[0]
    paths = list(case.inputs.values())
    return read_headers(paths)[0] if len(paths) == 1 and is_dicom_file(paths[0]) else None


def write_dicom_results(algorithm: Algorithm, source: DicomSeries, prediction, output_dir: Path) -> list[Path]:
    """The case's DICOM result objects, each as OUTPUT/dicom/<SOPInstanceUID>.dcm written atomically."""
    return [write_dicom_atomic(output_dir / DICOM_OUTPUT_FOLDER / f"{dataset.SOPInstanceUID}.dcm", dataset)
            for dataset in algorithm.dicom.write_results(source, prediction)]


def run_gc_case(algorithm: Algorithm, model: Model, interface: Interface, case: Case, output_dir: Path) -> None:
    """Predict the job's case and write every output socket of its interface."""
    started = time.perf_counter()
    prediction = model.predict(case)
    values = algorithm.gc_outputs(prediction)
    written = [write_output(output_dir / socket.relative_path, values[socket.slug]) for socket in interface.outputs]
    log.info("%s: %s in %.1f s -> %s", case.inputs[interface.inputs[0].slug].name, algorithm.describe(prediction),
             time.perf_counter() - started, ", ".join(map(str, written)))


def run_batch(algorithm: Algorithm, model: Model, cases: list[Case], output_dir: Path) -> None:
    """Predict every case, writing its files as it is done, then the run file(s)."""
    results = []
    predict_all = getattr(model, "predict_all", None)
    predictions = iter(predict_all(cases) if predict_all else map(model.predict, cases))
    for number, case in enumerate(cases, start=1):
        started = time.perf_counter()
        prediction = next(predictions)
        for name, value in algorithm.case_outputs(case, prediction).items():
            write_output(output_dir / name, value)
        source = dicom_source(algorithm, case)
        if source is not None:
            write_dicom_results(algorithm, source, prediction, output_dir)
        results.append((case, prediction))
        log.info("[%d/%d] %s: %s in %.1f s", number, len(cases), case.name, algorithm.describe(prediction),
                 time.perf_counter() - started)
    written = []
    for name, text in algorithm.run_files(results).items():
        write_text_atomic(output_dir / name, text)
        written.append(output_dir / name)
    log.info("wrote %s (%d cases)", ", ".join(map(str, written)), len(cases))


def build_parser(algorithm: Algorithm) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=algorithm.description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_path_arguments(parser, "input", "output", "model")
    parser.add_argument("--device", choices=DEVICES, default=os.environ.get(DEVICE_VARIABLE) or "auto",
                        help=f"ONNX Runtime device (default ${DEVICE_VARIABLE} or auto: CUDA if available)")
    if algorithm.add_arguments is not None:
        algorithm.add_arguments(parser.add_argument_group("model options"))
    return parser


RUNNER_OPTIONS = ("input", "output", "model", "device")


def model_options(args: argparse.Namespace) -> dict[str, object]:
    """The values of the algorithm's own options, by dest."""
    return {name: value for name, value in vars(args).items() if name not in RUNNER_OPTIONS}


@report_errors
def main(algorithm: Algorithm, argv: list[str] | None = None, baked_model_dir: Path = BAKED_MODEL_DIR) -> int:
    """Entry point of an algorithm image: GC one-case mode when INPUT/inputs.json exists, batch mode otherwise."""
    args = build_parser(algorithm).parse_args(argv)
    options = model_options(args)
    setup_logging()
    if args.device not in DEVICES:  # argparse does not check a default against the choices
        raise InputError(f"{DEVICE_VARIABLE}={args.device!r}: expected one of {', '.join(DEVICES)}")
    model_path = model_location(algorithm.model_file, args.model, baked_model_dir)
    sockets = read_inputs_json(args.input)
    if sockets is None:
        cases = batch_cases(algorithm, args.input)
        run_batch(algorithm, load_model(algorithm, model_path, args.device, options), cases, args.output)
    else:
        interface, case = gc_case(algorithm.interfaces, sockets, args.input)
        run_gc_case(algorithm, load_model(algorithm, model_path, args.device, options), interface, case, args.output)
    return 0
