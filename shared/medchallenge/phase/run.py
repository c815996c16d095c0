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
from typing import Any

from ..challenges import ChallengeDefinition, check_ground_truth, definition_digest, load_challenge
from ..errors import InputError
from ..evaluation import bootstrap as boot
from ..grand_challenge.emulator import definition_spec, find_cases
from ..io import user_path, write_json_atomic
from ..jobs import JobLimits
from ..jobs.conditions import add_limit_arguments, set_limit_defaults
from ..jobs.docker_run import ENGINES, sweep_expired
from ..logs import setup_logging
from .archive import DEFAULT_MAX_IMAGE_GB, GIB
from .backend import BACKENDS, Backend, Handle
from .cases import convert_cases
from .evaluate import evaluation_current
from .hashes import HashCache, sha256_json
from .layout import PhaseLayout, owner_only
from .leaderboard import leaderboard_current
from .local import LocalBackend
from .plan import PhaseSettings, PlannedSubmission, existing_specs, plan_submission
from .records import PhaseRecords, is_final, read_state
from .slurm_options import DEFAULT_PREFIX, MAX_PARALLEL, check_sbatch_options, read_site_file
from .status import phase_status, render
from .submissions import read_submissions

log = logging.getLogger("medchallenge.phase")
MAX_JOBS = 1024  # --jobs: containers at once on one machine
MAX_RESAMPLES = 100_000  # --bootstrap: per submission, every aggregate
MAX_IMAGE_GB = 1024  # the largest --max-image-gb


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
    parser.add_argument("--challenge", required=True, metavar="NAME|FILE",
                        help="a built-in challenge (tb-caverns, ribfrac, object-cxr, imageclef-caption) or the path "
                             "of a challenge definition (TOML, docs/own-challenge.md)")
    parser.add_argument("--submissions", type=user_path, required=True, help="the submissions file (TOML)")
    parser.add_argument("--cases", type=user_path, required=True, help="folder of the phase's case files")
    parser.add_argument("--ground-truth", type=user_path, required=True)
    parser.add_argument("--output", type=user_path, required=True, help="the phase's folder (reused: a rerun resumes)")
    parser.add_argument("--backend", choices=BACKENDS, default="local")
    parser.add_argument("--engine", choices=ENGINES, default="docker", help="the container engine of the machines "
                                                                            "that run the jobs")
    parser.add_argument("--jobs", type=int, default=1, help="local backend: jobs at once (default 1)")
    add_limit_arguments(parser, unless="a submission's memory_gb overrides it")
    parser.add_argument("--gpu", choices=("off", "on"), default="off",
                        help="give each job a GPU unless its submission sets gpu (default off)")
    parser.add_argument("--max-image-gb", type=float, default=DEFAULT_MAX_IMAGE_GB, metavar="GB",
                        help="the largest uncompressed size of a submission's `docker save` archive, in GiB "
                             f"(default {DEFAULT_MAX_IMAGE_GB:g}: grand-challenge's image size limit)")
    parser.add_argument("--retry-failed", action="append", default=[], metavar="TEAM|all",
                        help="run the failed jobs of this submission (or of all) again, repeatable")
    parser.add_argument("--edition", default=None, help="the evaluator's configuration")
    parser.add_argument("--metric", default=None, help="rank by this metric alone (a built-in's aggregate, or a "
                                                       "column's title or path of a definition's leaderboard)")
    parser.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="resamples (default 1000)")
    parser.add_argument("--bootstrap-seed", type=int, default=boot.DEFAULT_SEED)
    parser.add_argument("--bootstrap-level", type=float, default=boot.DEFAULT_LEVEL)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    slurm = parser.add_argument_group("slurm backend (the site's options: these win over --slurm-config's)")
    slurm.add_argument("--slurm-config", type=user_path, default=None, metavar="SITE.toml",
                       help="the site's options of the Slurm backend (docs/scale.md)")
    slurm.add_argument("--partition", default=None)
    slurm.add_argument("--account", default=None)
    slurm.add_argument("--max-parallel", type=int, default=None, metavar="K",
                       help="tasks of one submission running at once (--array=...%%K)")
    slurm.add_argument("--sbatch-option", action="append", default=None, metavar="OPTION",
                       help="a further sbatch option a site sets, repeatable (--qos=, --constraint=, --gres=, "
                            "--time=, --reservation=, --nodelist=, ...: e.g. --sbatch-option=--qos=long)")
    slurm.add_argument("--job-name-prefix", default=None, metavar="PREFIX",
                       help=f"Slurm job names PREFIX<team>, PREFIXevaluate-<team>, ... (default {DEFAULT_PREFIX})")
    return parser


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def phase_limits(args: argparse.Namespace) -> JobLimits:
    """The command line's job limits (EmulationError, one line, where one is out of bounds)."""
    return JobLimits(memory_gb=args.memory_gb, time_limit_s=args.time_limit, cpus=args.cpus, disk_gb=args.disk_gb)


def check_arguments(args: argparse.Namespace) -> None:
    """Every number of the command line within its bounds, before anything is read or written."""
    if not args.ground_truth.exists():
        raise InputError(f"--ground-truth {args.ground_truth}: not found")
    if not 1 <= args.bootstrap <= MAX_RESAMPLES:
        raise InputError(f"--bootstrap {args.bootstrap}: the leaderboard needs 1 to {MAX_RESAMPLES} resamples")
    if args.bootstrap_seed < 0:
        raise InputError(f"--bootstrap-seed {args.bootstrap_seed}: expected a whole number >= 0")
    boot.check_level(args.bootstrap_level)
    if not 1 <= args.jobs <= MAX_JOBS:
        raise InputError(f"--jobs {args.jobs}: expected 1 to {MAX_JOBS}")
    if args.max_parallel is not None and not 1 <= args.max_parallel <= MAX_PARALLEL:
        raise InputError(f"--max-parallel {args.max_parallel}: expected 1 to {MAX_PARALLEL}")
    if not 0 < args.max_image_gb <= MAX_IMAGE_GB:
        raise InputError(f"--max-image-gb {args.max_image_gb:g}: expected a size above 0 and at most {MAX_IMAGE_GB} "
                         "GiB")
    phase_limits(args)


def backend_options(args: argparse.Namespace) -> dict:
    """The backend's options: the local one's, or the site's Slurm options (its file's, the command line's win)."""
    if args.backend == "local":
        return {"jobs": args.jobs, "progress": not args.no_progress}
    site = read_site_file(args.slurm_config) if args.slurm_config else {}
    given = {"partition": args.partition, "account": args.account, "max_parallel": args.max_parallel,
             "options": check_sbatch_options(args.sbatch_option, "--sbatch-option") if args.sbatch_option else None,
             "job_name_prefix": args.job_name_prefix}
    return {**site, **{k: v for k, v in given.items() if v is not None}}


def challenge_id(definition: ChallengeDefinition) -> str:
    """What a job's id records of the challenge: a built-in's name, a definition's name and interface (a changed
    socket runs the jobs again, a changed leaderboard does not)."""
    if definition.builtin:
        return definition.name
    return f"{definition.name}:{sha256_json([definition.interface.as_json(), definition.case_patterns])[:16]}"


def plan(args: argparse.Namespace, layout: PhaseLayout,
         definition: ChallengeDefinition | None = None) -> list[PlannedSubmission]:
    """Read the submissions, convert the cases once, write every task spec and phase.json (`definition`: the
    challenge `args.challenge` names, where already loaded)."""
    definition = definition or load_challenge(args.challenge)
    submissions_file = read_submissions(args.submissions)
    spec = definition_spec(definition)
    files = find_cases(spec, args.cases)
    layout.out.mkdir(parents=True, exist_ok=True)
    hashes = HashCache(layout.file_hashes)
    cases = convert_cases(files, layout, hashes)
    settings = PhaseSettings(challenge_id(definition), args.engine, phase_limits(args), args.gpu == "on",
                             int(args.max_image_gb * GIB))
    existing = existing_specs(layout)
    planned = [plan_submission(layout, settings, spec, s, cases, hashes, existing)
               for s in submissions_file.submissions]
    hashes.save()
    write_json_atomic(layout.phase_file, {
        "challenge": definition.name, "definition": str(definition.source) if definition.source else None,
        "definition_sha256": definition_digest(definition), "metric": args.metric,
        "edition": args.edition, "ground_truth": str(args.ground_truth.absolute()),
        "cases": [c.to_json() for c in cases], "engine": args.engine,
        "bootstrap": {"n": args.bootstrap, "seed": args.bootstrap_seed, "level": args.bootstrap_level},
        "submissions": [p.team for p in planned]})
    return planned


def retry_failed(layout: PhaseLayout, planned: list[PlannedSubmission], teams: list[str]) -> int:
    """The failed jobs of the named submissions (`all`: of every one) made to run again (their state removed);
    returns their number. InputError for a team the phase does not have."""
    known = {p.team for p in planned}
    unknown = sorted(set(teams) - known - {"all"})
    if unknown:
        raise InputError(f"--retry-failed {unknown[0][:64]}: no such submission in this phase")
    retried = 0
    for submission in planned:
        if "all" in teams or submission.team in teams:
            for _, identity in submission.jobs:
                state = read_state(layout, identity)
                if state is not None and state.get("status") == "failed":
                    layout.state(identity).unlink(missing_ok=True)
                    retried += 1
    return retried


def same_jobs(planned: list[PlannedSubmission]) -> list[tuple[list[str], list[str]]]:
    """The submissions not refused, grouped by their job ids (the submissions of one image and model on one tag or
    several: the same jobs, so the same evaluation), in the order of their first submission: (teams, job ids)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for submission in planned:
        if not submission.refused:
            groups.setdefault(tuple(job_id for _, job_id in submission.jobs), []).append(submission.team)
    return [(teams, list(ids)) for ids, teams in groups.items()]


def submit(layout: PhaseLayout, planned: list[PlannedSubmission], backend) -> tuple[list[Handle], int]:
    """Each submission's jobs without a final result that no earlier run's work still holds (backend.held: those
    are waited for), then one evaluation for the submissions with the same jobs where one of them is not current
    (phase.evaluate scores them once), then the leaderboard where it is not; a job two submissions share is
    submitted once. Returns the handles and the number of jobs submitted."""
    python, out = sys.executable, str(layout.out)
    records = PhaseRecords(layout)
    by_team = {submission.team: submission for submission in planned}
    for submission in planned:
        if submission.refused:
            log.warning("warning: submission %s refused: %s", submission.team, submission.refused)
    held = backend.held()
    submitted: dict[str, Handle] = {}
    evaluations: list[Handle] = []
    for teams, ids in same_jobs(planned):
        todo = [i for i in dict.fromkeys(ids)
                if i not in submitted and i not in held and not is_final(records.state(i))]
        if todo:
            handle = backend.submit_tasks(teams[0], [layout.task(i) for i in todo], by_team[teams[0]].resources)
            submitted.update(dict.fromkeys(todo, handle))
        waits_for = list({id(h): h for h in ({**held, **submitted}[i] for i in ids
                                             if i in submitted or i in held)}.values())
        if waits_for or not all(evaluation_current(records, team) for team in teams):
            evaluations.append(backend.submit_after(waits_for, [python, "-m", "medchallenge.phase.evaluate", out,
                                                                *teams], f"evaluate-{teams[0]}"))
    handles = [*{id(h): h for h in [*held.values(), *submitted.values()]}.values(), *evaluations]
    if evaluations or not leaderboard_current(records):
        handles.append(backend.submit_after(evaluations, [python, "-m", "medchallenge.phase.leaderboard", out],
                                            "leaderboard"))
    return handles, len(submitted)


@contextlib.contextmanager
def only_run(layout: PhaseLayout) -> Iterator[None]:
    """One `phase run` per phase folder at a time (a lock held while it runs); SIGTERM stops it as Ctrl-C does. OUT
    is its owner's only."""
    layout.out.mkdir(parents=True, exist_ok=True)
    layout.out.chmod(0o700)
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


def parse_arguments(argv: list[str] | None) -> tuple[argparse.Namespace, ChallengeDefinition]:
    """The command line and its challenge; a definition's [limits] are the job limits' defaults (the command line's
    options win)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    definition = load_challenge(args.challenge)
    if not definition.builtin:
        set_limit_defaults(parser, definition.limits)
        parser.set_defaults(gpu="on" if definition.limits.algorithm_gpu else "off")
        args = parser.parse_args(argv)
    if args.edition is not None and not definition.evaluation.builtin:
        raise InputError(f"--edition {args.edition[:40]}: editions are a built-in evaluator's; {definition.source} "
                         "has its own evaluation")
    return args, definition


def main(argv: list[str] | None = None) -> int:
    args, definition = parse_arguments(argv)
    setup_logging()
    check_arguments(args)
    layout = PhaseLayout.of(args.output)
    with owner_only(), only_run(layout):
        backends: list[Backend] = []
        try:
            return run(args, layout, definition, backends)
        except KeyboardInterrupt:
            print(backends[0].interrupted() if backends else "interrupted before any job was submitted; run the "
                  "same command again to resume", file=sys.stderr)
            return 130


def run(args: argparse.Namespace, layout: PhaseLayout, definition: ChallengeDefinition, opened: list[Backend]) -> int:
    """Plan, submit, wait, print the status; the backend is put in `opened` once open (for Ctrl-C's message)."""
    options = backend_options(args)  # a site's mistake is said before the cases are converted
    check_ground_truth(definition, args.ground_truth)  # before any job runs
    planned = plan(args, layout, definition)
    if args.retry_failed:
        log.info("%d failed job(s) to run again (--retry-failed)", retry_failed(layout, planned, args.retry_failed))
    backend = open_backend(args.backend, layout, options)
    opened.append(backend)
    if args.backend == "local":  # containers of this engine's jobs left past their deadline (their watchdog killed)
        sweep_expired(args.engine)
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
