"""`medchallenge phase run`: every submission's algorithm on every case, each submission evaluated, then the
leaderboard; resumable (see the package's docstring)."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import importlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..evaluation import bootstrap as boot
from ..grand_challenge.emulator import ALGORITHMS, find_cases
from ..io import write_json_atomic
from ..jobs import JobLimits
from ..jobs.conditions import add_limit_arguments
from ..logs import setup_logging
from .backend import BACKENDS, Backend, Handle
from .cases import convert_cases
from .evaluate import evaluation_current
from .hashes import HashCache
from .layout import PhaseLayout
from .leaderboard import leaderboard_current
from .local import LocalBackend
from .plan import PhaseSettings, PlannedSubmission, existing_specs, plan_submission
from .records import PhaseRecords, is_final
from .status import phase_status, render
from .submissions import read_submissions

log = logging.getLogger("medchallenge.phase")
ENGINES = ("docker", "podman")


def open_backend(name: str, layout: PhaseLayout, options: dict[str, Any]) -> Backend:
    """The backend `name` with its options (the local backend: jobs, progress; Slurm: its own)."""
    if name == "local":
        return LocalBackend(layout, **options)
    if name == "slurm":
        try:
            module = importlib.import_module("medchallenge.phase.slurm")
        except ModuleNotFoundError as exc:
            if exc.name != "medchallenge.phase.slurm":
                raise
            raise InputError("--backend slurm: this installation of medchallenge has no Slurm backend") from None
        return module.SlurmBackend(layout, **options)
    raise InputError(f"--backend {name}: expected one of {', '.join(BACKENDS)}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="medchallenge phase run", description=__doc__)
    parser.add_argument("--challenge", required=True, choices=sorted(ALGORITHMS))
    parser.add_argument("--submissions", type=Path, required=True, help="the submissions file (TOML)")
    parser.add_argument("--cases", type=Path, required=True, help="folder of the phase's case files")
    parser.add_argument("--ground-truth", type=Path, required=True)
    parser.add_argument("--output", type=Path, required=True, help="the phase's folder (reused: a rerun resumes)")
    parser.add_argument("--backend", choices=BACKENDS, default="local")
    parser.add_argument("--engine", choices=ENGINES, default="docker", help="the container engine of the machines "
                                                                            "that run the jobs")
    parser.add_argument("--jobs", type=int, default=1, help="local backend: jobs at once (default 1)")
    add_limit_arguments(parser, unless="a submission's memory_gb overrides it")
    parser.add_argument("--gpu", choices=("off", "on"), default="off",
                        help="give each job a GPU unless its submission sets gpu (default off)")
    parser.add_argument("--edition", default=None, help="the evaluator's configuration")
    parser.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="resamples (default 1000)")
    parser.add_argument("--bootstrap-seed", type=int, default=boot.DEFAULT_SEED)
    parser.add_argument("--bootstrap-level", type=float, default=boot.DEFAULT_LEVEL)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    slurm = parser.add_argument_group("slurm backend (also from the submissions file's [slurm] table)")
    slurm.add_argument("--partition", default=None)
    slurm.add_argument("--account", default=None)
    slurm.add_argument("--max-parallel", type=int, default=None, metavar="K",
                       help="tasks of one submission running at once (--array=...%%K)")
    slurm.add_argument("--sbatch-option", action="append", default=None, metavar="OPTION",
                       help="an extra sbatch option, repeatable (e.g. --sbatch-option=--qos=long)")
    return parser


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def check_arguments(args: argparse.Namespace) -> None:
    if not args.ground_truth.exists():
        raise InputError(f"--ground-truth {args.ground_truth}: not found")
    if args.bootstrap < 1:
        raise InputError(f"--bootstrap {args.bootstrap}: the leaderboard needs at least one resample")
    boot.check_level(args.bootstrap_level)
    if args.jobs < 1:
        raise InputError(f"--jobs {args.jobs}: expected at least 1")


def backend_options(args: argparse.Namespace, slurm_table: dict) -> dict:
    if args.backend == "local":
        return {"jobs": args.jobs, "progress": not args.no_progress}
    given = {"partition": args.partition, "account": args.account, "max_parallel": args.max_parallel,
             "extra": args.sbatch_option}
    return {**slurm_table, **{k: v for k, v in given.items() if v is not None}}


def plan(args: argparse.Namespace, layout: PhaseLayout) -> tuple[list[PlannedSubmission], dict]:
    """Read the submissions, convert the cases once, write every task spec and phase.json."""
    submissions_file = read_submissions(args.submissions)
    spec = ALGORITHMS[args.challenge]
    files = find_cases(spec, args.cases)
    layout.out.mkdir(parents=True, exist_ok=True)
    hashes = HashCache(layout.file_hashes)
    cases = convert_cases(files, layout, hashes)
    settings = PhaseSettings(args.challenge, args.engine,
                             JobLimits(memory_gb=args.memory_gb, time_limit_s=args.time_limit, cpus=args.cpus,
                                       disk_gb=args.disk_gb),
                             args.gpu == "on")
    existing = existing_specs(layout)
    planned = [plan_submission(layout, settings, spec, s, cases, hashes, existing)
               for s in submissions_file.submissions]
    hashes.save()
    write_json_atomic(layout.phase_file, {
        "challenge": args.challenge, "edition": args.edition, "ground_truth": str(args.ground_truth.absolute()),
        "cases": [c.to_json() for c in cases], "engine": args.engine,
        "bootstrap": {"n": args.bootstrap, "seed": args.bootstrap_seed, "level": args.bootstrap_level},
        "submissions": [p.team for p in planned]})
    return planned, submissions_file.slurm


def submit(layout: PhaseLayout, planned: list[PlannedSubmission], backend) -> tuple[list[Handle], int]:
    """Each submission's jobs without a final result, its evaluation where it is not current, then the leaderboard
    where it is not; a job two submissions share is submitted once. Returns the handles and the number of jobs."""
    python, out = sys.executable, str(layout.out)
    records = PhaseRecords(layout)
    submitted: dict[str, Handle] = {}
    evaluations: list[Handle] = []
    for submission in planned:
        if submission.refused:
            log.warning("warning: submission %s refused: %s", submission.team, submission.refused)
            continue
        ids = [job_id for _, job_id in submission.jobs]
        todo = [i for i in dict.fromkeys(ids) if i not in submitted and not is_final(records.state(i))]
        if todo:
            handle = backend.submit_tasks(submission.team, [layout.task(i) for i in todo], submission.resources)
            submitted.update(dict.fromkeys(todo, handle))
        waits_for = list({id(h): h for h in (submitted[i] for i in ids if i in submitted)}.values())
        if waits_for or not evaluation_current(records, submission.team):
            evaluations.append(backend.submit_after(waits_for, [python, "-m", "medchallenge.phase.evaluate", out,
                                                                submission.team], f"evaluate-{submission.team}"))
    handles = [*{id(h): h for h in submitted.values()}.values(), *evaluations]
    if evaluations or not leaderboard_current(records):
        handles.append(backend.submit_after(evaluations, [python, "-m", "medchallenge.phase.leaderboard", out],
                                            "leaderboard"))
    return handles, len(submitted)


@contextlib.contextmanager
def only_run(layout: PhaseLayout) -> Iterator[None]:
    """One `phase run` per phase folder at a time (a lock held while it runs); SIGTERM stops it as Ctrl-C does."""
    layout.out.mkdir(parents=True, exist_ok=True)
    with open(layout.out / "run.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(f"{layout.out}: another `medchallenge phase run` is using this folder "
                             f"(`medchallenge phase status {layout.out}`)") from None
        previous = signal.signal(signal.SIGTERM, lambda signum, _: sys.exit(128 + signum))
        try:
            yield
        finally:
            signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging()
    check_arguments(args)
    layout = PhaseLayout.of(args.output)
    with only_run(layout):
        try:
            return run(args, layout)
        except KeyboardInterrupt:
            print(f"interrupted: the running jobs were stopped and their containers removed; run the same command "
                  f"again to resume (`medchallenge phase status {layout.out}`)", file=sys.stderr)
            return 130


def run(args: argparse.Namespace, layout: PhaseLayout) -> int:
    planned, slurm_table = plan(args, layout)
    backend = open_backend(args.backend, layout, backend_options(args, slurm_table))
    run_marker = {"host": socket.gethostname(), "pid": os.getpid(), "backend": args.backend, "started": _now(),
                  "finished": None}
    write_json_atomic(layout.out / "run.json", run_marker)
    handles, num_jobs = submit(layout, planned, backend)
    log.info("%d job(s) to run (%s backend)", num_jobs, args.backend)
    try:
        backend.wait(handles)
    finally:
        write_json_atomic(layout.out / "run.json", {**run_marker, "finished": _now()})
    status = phase_status(layout)
    print(render(status, layout.out))
    return 0 if status["leaderboard"] else 1
