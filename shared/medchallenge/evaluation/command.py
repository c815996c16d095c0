"""The evaluator command, one for every challenge: flags, paths, logging, workers, records and metrics.json.

A challenge plugs in an `Evaluator`: its extra arguments, a reader (inputs -> `Cases`: the case ids in scoring
order and what scoring one case needs), a per-case step returning a typed `CaseRecord`, an aggregate step
(records -> `Summary`) and its figures (those types: cases.py). Stage 1 runs through records.compute_records
(worker processes, --records cache and resume, --shard); stage 2 aggregates every record. metrics.json is
`{"aggregates", "case", "meta"}` with the same `meta` keys for every challenge (META_KEYS).
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from .. import __version__
from ..contract import add_path_arguments
from ..errors import InputError, report_errors
from ..io import user_path, write_json_atomic, write_metrics
from ..logs import setup_logging
from ..registry import CHALLENGES
from ..review.evaluator_review import (add_review_arguments, images_folder, remove_review, review_wanted,
                                       write_review)
from .bootstrap import DEFAULT_LEVEL, DEFAULT_SEED, bootstrap, check_level
from .cases import CaseRecord, Cases, Summary
from .inputs import check_regular_files, input_fingerprint
from .records import compute_records, parse_shard

log = logging.getLogger("medchallenge.evaluation.command")

# --workers' default, first set first: grand-challenge's evaluation templates read the first.
WORKER_VARIABLES = ("GRAND_CHALLENGE_MAX_WORKERS", "EVAL_MAX_WORKERS")
MAX_WARNINGS_SHOWN = 20
META_KEYS = ("challenge", "evaluator", "evaluator_version", "layout", "options", "notes", "warnings", "details")

CasesT = TypeVar("CasesT", bound=Cases)
RecordT = TypeVar("RecordT", bound=CaseRecord)


def no_arguments(parser: argparse.ArgumentParser) -> None:
    """For a challenge without options of its own."""


def case_ids(cases: Cases) -> list[str]:
    """The bootstrap's units where a stage-1 case is what the metric calls a case."""
    return cases.ids


@dataclass(frozen=True)
class Evaluator(Generic[CasesT, RecordT]):
    """One challenge's evaluator, as the command runs it (the functions must be module-level: the per-case step
    is sent to worker processes)."""

    challenge: str  # its name in the registry
    description: str
    strict_help: str
    record: type[RecordT]
    read: Callable[[argparse.Namespace], CasesT]
    evaluate_case: Callable[[Any, str], RecordT]
    aggregate: Callable[[CasesT, dict[str, RecordT]], Summary]
    add_arguments: Callable[[argparse.ArgumentParser], None] = no_arguments
    write_figures: Callable[[Path, CasesT, dict[str, RecordT], Summary], None] | None = None
    figures: tuple[str, ...] = ()  # the files write_figures writes beside metrics.json (removed before a run)
    unit: str = "cases"  # what a case is, for the progress bar and the log
    # A case costs microseconds to milliseconds: unless --workers or a workers variable says otherwise, cases run in
    # this process, since worker processes would cost more to start than they save.
    cheap_cases: bool = False
    # --bootstrap: the units a resample draws (the ids of what the metric calls a case), the cases and records of a
    # drawn list of unit indices (re-keyed: a unit drawn twice is two cases), and optionally every resample's
    # aggregates at once (the same numbers as aggregate(resample(...)), faster). See bootstrap.py.
    bootstrap_units: Callable[[CasesT], list[str]] = case_ids
    bootstrap_unit: str = ""  # what a unit is, where it is not `unit` (object-CXR: images, its cases are blocks)
    resample: Callable[[CasesT, dict[str, RecordT], np.ndarray], tuple[CasesT, dict[str, RecordT]]] | None = None
    fast_bootstrap: Callable[[CasesT, dict[str, RecordT], np.ndarray], dict[str, np.ndarray]] | None = None
    # The leaderboard: the official ranking metrics in order of preference (the first every submission has ranks;
    # all are higher-is-better), and the per-unit scores of a metric that has them (for the Wilcoxon test).
    ranking: tuple[str, ...] = ()
    unit_scores: Callable[[CasesT, dict[str, RecordT], str], dict[str, float] | None] | None = None

    @property
    def resampling_unit(self) -> str:
        return self.bootstrap_unit or self.unit

    def main(self, argv: list[str] | None = None) -> int:
        """The evaluator command: `evaluate.py [--input ...] [--ground-truth ...] [--output ...] [options]`."""
        return run(self, argv)


def default_workers() -> int:
    """--workers' default: the first of WORKER_VARIABLES that is set, else 0 (one process per core; one process in
    all for an evaluator whose cases are cheap)."""
    for name in WORKER_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value:
            if not value.isdigit():
                raise InputError(f"${name} = {value!r}: expected a number of worker processes")
            return int(value)
    return 0


def build_parser(evaluator: Evaluator) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evaluate.py", description=evaluator.description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_path_arguments(parser, "input", "ground_truth", "output")
    evaluator.add_arguments(parser)
    parser.add_argument("--strict", action="store_true", help=evaluator.strict_help)
    parser.add_argument("--workers", type=int, default=default_workers(),
                        help=f"processes for the per-case step (0: one per core); default ${WORKER_VARIABLES[0]}, "
                             f"else ${WORKER_VARIABLES[1]}, else 0")
    parser.add_argument("--records", type=user_path, default=None,
                        help="folder for per-case records (and the bootstrap's replicates): reused on the next run "
                             "(resume), shared between shards")
    parser.add_argument("--shard", default=None, metavar="K/N",
                        help="compute only shard K of N (1-based) of the per-case records, then stop")
    parser.add_argument("--bootstrap", type=int, default=0, metavar="N",
                        help="add percentile bootstrap intervals over cases for every aggregate from N resamples "
                             "(meta.bootstrap; 1000 is a sensible choice; default 0: none)")
    parser.add_argument("--bootstrap-seed", type=int, default=DEFAULT_SEED, help="seed of the resamples (default 0)")
    parser.add_argument("--bootstrap-level", type=float, default=DEFAULT_LEVEL,
                        help="confidence level of the intervals (default 0.95)")
    parser.add_argument("--scores", type=user_path, default=None, metavar="FILE",
                        help="also write the aggregates as one flat JSON object {name: value} to FILE, just before "
                             "metrics.json (Codabench's scores.json)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-plots", action="store_true", help="do not draw the figures beside metrics.json")
    parser.add_argument("--no-plot", dest="no_plots", action="store_true", help=argparse.SUPPRESS)
    add_review_arguments(parser)
    return parser


def check_bootstrap_arguments(evaluator: Evaluator, args: argparse.Namespace) -> None:
    """--bootstrap N >= 0 and a level in (0, 1), checked before any work."""
    if args.bootstrap < 0:
        raise InputError(f"--bootstrap {args.bootstrap}: expected a number of resamples >= 0")
    check_level(args.bootstrap_level)
    if args.bootstrap and evaluator.resample is None and evaluator.fast_bootstrap is None:
        raise InputError(f"--bootstrap: the {evaluator.challenge} evaluator has no resampling step")


def _case_json(evaluate_case: Callable[[Any, str], CaseRecord], sources: Any, case_id: str) -> dict[str, Any]:
    return evaluate_case(sources, case_id).to_json()


def prepare_output(metrics: Path, figures: tuple[str, ...] = ()) -> None:
    """Before any work: the output folder exists and is writable, and the previous run's metrics.json and figures are
    gone, so that a failed run never leaves an old result to be read as the new one."""
    try:
        metrics.parent.mkdir(parents=True, exist_ok=True)
        for path in (metrics, *(metrics.parent / name for name in figures)):
            path.unlink(missing_ok=True)
        probe = metrics.parent / f".write-test-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise InputError(f"{exc.filename or metrics.parent}: the output folder cannot be written: "
                         f"{exc.strerror or exc}") from exc


def shown_warnings(warnings: list[str], limit: int = MAX_WARNINGS_SHOWN) -> list[str]:
    """The first `limit` warnings and a count of the rest: a run file of a million doubtful lines must not become a
    million lines of log and of metrics.json."""
    if len(warnings) <= limit:
        return warnings
    return [*warnings[:limit], f"... and {len(warnings) - limit} more warning(s) like these, not shown"]


@dataclass
class Scored:
    """One submission scored: what stage 1 read and computed, stage 2's summary, and metrics.json's sections."""

    cases: Cases
    records: dict[str, CaseRecord]
    summary: Summary
    case: dict[str, dict[str, Any]]
    meta: dict[str, Any]


def score(evaluator: Evaluator, args: argparse.Namespace) -> Scored | None:
    """Read, score every case (stage 1), aggregate (stage 2) and, with --bootstrap, the intervals; None when only
    a shard of the records was asked for. The previous metrics.json and figures in --output are removed first."""
    shard = parse_shard(args.shard, args.records)
    check_bootstrap_arguments(evaluator, args)
    if shard is None:
        prepare_output(args.output / "metrics.json", evaluator.figures)
        remove_review(args.output)
        if args.scores is not None:
            prepare_output(args.scores)
    check_regular_files(args.input)
    cases = evaluator.read(args)
    warnings = shown_warnings(cases.warnings)
    for warning in warnings:
        log.warning("warning: %s", warning)
    log.info("%s: %d %s (%s)", evaluator.challenge, len(cases.ids), evaluator.unit, cases.layout)
    stored = compute_records(cases.ids, functools.partial(_case_json, evaluator.evaluate_case, cases.sources),
                             workers=args.workers or (1 if evaluator.cheap_cases else 0), records=args.records,
                             shard=shard, progress=not args.no_progress,
                             description=evaluator.unit,
                             fingerprint=input_fingerprint(args) if args.records else None)
    if shard is not None:
        log.info("shard %d/%d: %d record(s) in %s", *shard, len(stored), args.records)
        return None
    records = {case_id: evaluator.record.from_json(data) for case_id, data in stored.items()}
    summary = evaluator.aggregate(cases, records)
    meta = {
        "challenge": evaluator.challenge,
        "evaluator": CHALLENGES[evaluator.challenge].evaluator_module,
        "evaluator_version": __version__,
        "layout": cases.layout,
        "options": {"strict": args.strict, **cases.options()},
        "notes": cases.notes + summary.notes,
        "warnings": warnings,
        "details": summary.details,
    }
    if args.bootstrap:
        meta["bootstrap"] = bootstrap(evaluator, cases, records, args.bootstrap, args.bootstrap_seed,
                                      args.bootstrap_level, args.records)
    case = summary.case if summary.case is not None else {k: r.to_json() for k, r in records.items()}
    return Scored(cases, records, summary, case, meta)


def write_results(evaluator: Evaluator, args: argparse.Namespace, scored: Scored) -> Path:
    """metrics.json and, unless --no-plots, the figures in --output; review.html where asked for (review_wanted)."""
    output = args.output / "metrics.json"
    try:
        if evaluator.write_figures is not None and not args.no_plots:
            evaluator.write_figures(args.output, scored.cases, scored.records, scored.summary)
        if review_wanted(args):
            write_review(evaluator, scored, images_folder(args), args.output)
        if args.scores is not None:
            write_json_atomic(args.scores, scored.summary.aggregates)
        # last: metrics.json present = the run succeeded
        write_metrics(output, scored.summary.aggregates, scored.case, scored.meta)
    except OSError as exc:  # a full or read-only disk: nothing half-written (atomic writes), one line
        raise InputError(f"{exc.filename or args.output}: cannot write the results: {exc.strerror or exc}") from exc
    return output


@report_errors
def run(evaluator: Evaluator, argv: list[str] | None = None) -> int:
    """Read, score every case (stage 1), aggregate (stage 2), write metrics.json and the figures."""
    args = build_parser(evaluator).parse_args(argv)
    setup_logging()
    started = time.perf_counter()
    scored = score(evaluator, args)
    if scored is None:
        return 0
    output = write_results(evaluator, args, scored)
    log.info("%s: %d %s scored in %.2f s -> %s", evaluator.challenge, len(scored.cases.ids), evaluator.unit,
             time.perf_counter() - started, output)
    for key, value in scored.summary.aggregates.items():
        log.info("  %-26s %.6f", key, value)
    return 0
