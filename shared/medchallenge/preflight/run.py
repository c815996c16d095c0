"""`medchallenge preflight`: run a participant's algorithm image once per case as grand-challenge would, then score
the jobs with the challenge's evaluator.

    medchallenge preflight --challenge NAME|FILE --image IMAGE[:TAG] --cases DIR [--ground-truth GT]
        [--model model.tar.gz] [--gpu auto|on|off] [--memory-gb 8] [--time-limit 1200] [--cpus N] [--disk-gb 30]
        [--edition E] [--bootstrap 1000] --output OUT

Each case is uploaded (panimg) and run as one job by the one job runner (medchallenge.jobs.run_job, the conditions
in medchallenge.jobs.conditions). With --ground-truth the successful jobs are scored by the challenge's evaluator, the
code of its evaluator image, on grand-challenge's evaluation input (a failed job is a missing prediction, which the
evaluator scores as an empty one), with percentile bootstrap intervals, then reviewed (medchallenge.review): the
convention check, and per case a figure of the predictions and the ground truth over the image, worst first. A
challenge defined by a file (docs/own-challenge.md) is scored by its evaluation container instead, its figures drawn
from the sockets' kinds (preflight/container.py).
Writes OUT/preflight.json, OUT/preflight.html (offline, no script, the figures embedded), OUT/review/ (the figures),
OUT/evaluation/ (metrics.json and figures), OUT/jobs/<pk>/ (each job's folders), OUT/storage/ (the uploads as
panimg converted them) and OUT/evaluation-input/; prints a table.
Ready (exit status 0) when every job succeeded, the scoring did and no check fired (the convention check, a value the
hospital gateway would refuse, an evaluator's warning); otherwise not ready (exit status 1), with the reason first in
the verdict, the terminal's last line and preflight.json's `warnings`.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import shutil
from pathlib import Path
from typing import Any

from .. import __version__
from ..challenges import check_ground_truth, load_challenge
from ..errors import InputError, report_errors
from ..evaluation import bootstrap as boot
from ..evaluation import build_parser, score, write_results
from ..evaluation.container import evaluation_image
from ..grand_challenge.emulator import CaseJob, definition_spec, find_cases, run_jobs, write_evaluation_input
from ..io import user_path, write_json_atomic, write_text_atomic
from ..jobs import CONDITIONS, ENGINES, DockerImage, JobLimits, value_rules
from ..jobs.conditions import add_limit_arguments, set_limit_defaults
from ..jobs.usage import usage_totals
from ..leaderboard import edition_environment
from ..logs import setup_logging
from ..registry import CHALLENGES
from ..review import review_jobs, write_figures
from .container import CONTAINER_WORK, REVIEW_FOLDER, score_jobs_by_container
from .page import render_page, verdict

log = logging.getLogger("medchallenge.preflight")
REPORT_FILES = ("preflight.json", "preflight.html")
GATEWAY_REFUSES = ("grand-challenge accepts this result and the evaluator scores it as written, but the hospital "
                   "gateway would refuse it")
EVALUATION_INPUT = "evaluation-input"  # the evaluator's --input, as grand-challenge gives it the jobs' outputs


def build_parser_preflight() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="medchallenge preflight", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--challenge", required=True, metavar="NAME|FILE",
                        help="a built-in challenge (tb-caverns, ribfrac, object-cxr, imageclef-caption) or the path "
                             "of a challenge definition (TOML, docs/own-challenge.md)")
    parser.add_argument("--image", required=True, help="the algorithm image, as `docker load` or `docker build` "
                                                       "made it (IMAGE[:TAG])")
    parser.add_argument("--cases", type=user_path, required=True, help="folder of case files, uploaded one per job")
    parser.add_argument("--ground-truth", type=user_path, default=None, help="score the jobs against this ground truth")
    parser.add_argument("--model", type=user_path, default=None, help="the model tarball (.tar.gz) for /opt/ml/model")
    parser.add_argument("--engine", choices=ENGINES, default="docker",
                        help="the container engine: docker (default) or podman (daemonless, as on clusters)")
    parser.add_argument("--gpu", choices=("auto", "on", "off"), default="auto",
                        help="pass the GPU: auto (when there is one, default), on (fail without), off")
    add_limit_arguments(parser)
    parser.add_argument("--edition", default=None, help="the evaluator's configuration (e.g. 2021 for "
                                                        "imageclef-caption, legacy for ribfrac)")
    parser.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="resamples (default 1000; 0: none)")
    parser.add_argument("--bootstrap-seed", type=int, default=boot.DEFAULT_SEED)
    parser.add_argument("--bootstrap-level", type=float, default=boot.DEFAULT_LEVEL)
    parser.add_argument("--output", type=user_path, required=True)
    return parser


def prepare_output(output: Path) -> None:
    """OUT exists, the previous report is gone (a failed run leaves none to be mistaken for this one), and the jobs
    and evaluation folders are fresh."""
    output.mkdir(parents=True, exist_ok=True)
    for name in REPORT_FILES:
        (output / name).unlink(missing_ok=True)
    for name in ("jobs", "storage", EVALUATION_INPUT, "evaluation", REVIEW_FOLDER, CONTAINER_WORK):
        if (output / name).is_symlink() or (output / name).is_file():
            raise InputError(f"{output / name}: expected a folder of a previous pre-flight, found something else")
        shutil.rmtree(output / name, ignore_errors=True)


def score_jobs(args: argparse.Namespace, jobs: list[CaseJob], eval_input: Path, evaluation: Path,
               records: Path | None = None) -> dict[str, Any]:
    """The successful jobs scored as the evaluator image scores them (its input written to `eval_input`, its
    metrics.json to `evaluation`, its records and bootstrap replicates to `records` where given); the report's
    `evaluation` section."""
    write_evaluation_input([job.result for job in jobs], eval_input, 1_000_000 + 1_000 * len(jobs))
    evaluator = importlib.import_module(CHALLENGES[args.challenge].evaluator_module).EVALUATOR
    argv = ["--input", str(eval_input), "--ground-truth", str(args.ground_truth), "--output",
            str(evaluation), "--no-progress", "--no-review", "--bootstrap", str(args.bootstrap),
            "--bootstrap-seed", str(args.bootstrap_seed), "--bootstrap-level", str(args.bootstrap_level),
            *(["--records", str(records)] if records is not None else [])]
    failed = [job.case.name for job in jobs if not job.result.succeeded]
    section: dict[str, Any] = {"evaluator": CHALLENGES[args.challenge].evaluator_module, "edition": args.edition,
                               "scored_as_missing": failed, "error": None}
    try:
        with edition_environment(args.challenge, args.edition):
            parsed = build_parser(evaluator).parse_args(argv)
        scored = score(evaluator, parsed)
        write_results(evaluator, parsed, scored)
    except InputError as exc:
        section["error"] = str(exc)
        return section
    review = review_jobs(args.challenge, evaluator, scored, [job.case for job in jobs])
    section["review"] = review.to_json(REVIEW_FOLDER)  # the figures beside the evaluation's folder
    (evaluation.parent / REVIEW_FOLDER).mkdir(exist_ok=True)
    write_figures(evaluation.parent, section["review"]["figures"], review.figures)
    section.update(aggregates=scored.summary.aggregates, intervals=scored.meta.get("bootstrap", {}),
                   num_cases=len(scored.case), notes=scored.meta["notes"], warnings=scored.meta["warnings"],
                   metrics="evaluation/metrics.json")
    if failed:
        section["notes"] = [f"{len(failed)} failed job(s) scored as the evaluator scores a missing prediction (an "
                            "empty one): " + ", ".join(failed), *section["notes"]]
    return section


def review_figures(folder: Path, evaluation: dict[str, Any] | None) -> dict[str, bytes]:
    """The review's figures of an evaluation section (files under `folder`), for the page to embed."""
    review = (evaluation or {}).get("review") or {"figures": []}
    return {entry["file"]: (folder / entry["file"]).read_bytes() for entry in review["figures"]}


def check_warnings(entries: list[dict[str, Any]], evaluation: dict[str, Any] | None) -> list[str]:
    """Every check of the pre-flight that fired on jobs that succeeded: the convention check's findings first (a
    mistake that costs the whole score), then each value the hospital gateway would refuse, then the evaluator's
    warnings."""
    review = (evaluation or {}).get("review") or {}
    refused = [f"{job['case']}: {note}" for job in entries for note in job["notes"] if note.startswith(GATEWAY_REFUSES)]
    return [*(f"convention check: {line}" for line in review.get("conventions", [])), *refused,
            *(evaluation or {}).get("warnings", [])]


def report(args: argparse.Namespace, jobs: list[CaseJob], limits: JobLimits, image_notes: list[str],
           evaluation: dict[str, Any] | None) -> dict[str, Any]:
    results = [job.result for job in jobs]
    entries = [{"case": job.case.name, **job.result.to_json()} for job in jobs]
    usage = usage_totals(entries)
    failed = [r for r in results if not r.succeeded]
    warnings = check_warnings(entries, evaluation)
    gpu_passed = any(r.gpu_passed for r in results)
    instance, vcpus = limits.instance(gpu_passed)
    return {
        "tool": f"medchallenge {__version__} preflight",
        "challenge": args.challenge,
        "image": args.image,
        "model": args.model.name if args.model else None,
        "ready": not failed and (evaluation is None or evaluation["error"] is None) and not warnings,
        "warnings": warnings,
        "summary": {"num_jobs": len(results), "num_succeeded": len(results) - len(failed),
                    "num_failed": len(failed), "total_wall_seconds": usage["wall_seconds"] or 0.0,
                    "max_wall_seconds": round(max((r.wall_seconds for r in results), default=0.0), 3),
                    "total_cpu_seconds": usage["cpu_seconds"], "total_gpu_seconds": usage["gpu_seconds"] or 0.0,
                    "max_peak_memory_bytes": usage["max_peak_memory_bytes"],
                    "gpu_passed": any(r.gpu_passed for r in results),
                    "used_gpu": any(bool(r.used_gpu) for r in results)},
        "limits": {**limits.to_json(), "cpus": limits.effective_cpus(gpu_passed), "cpus_asked": limits.cpus,
                   "gc_instance": instance, "gc_instance_vcpus": vcpus},
        "conditions": [{"condition": c, "how": how, "source": source} for c, how, source in CONDITIONS],
        "image_notes": image_notes,
        "jobs": entries,
        "evaluation": evaluation,
    }


def _size(value: int | None) -> str:
    return "–" if value is None else f"{value / (1 << 20):.0f} MiB"


def terminal_table(data: dict[str, Any]) -> str:
    """The short table printed at the end: one line per job, then the aggregates."""
    lines = [f"{'case':<28} {'status':<9} {'seconds':>8} {'CPU s':>7} {'memory':>9} {'GPU':>4}  error"]
    for job in data["jobs"]:
        gpu = "yes" if job["used_gpu"] else "no" if job["used_gpu"] is False else "?"
        cpu = "–" if job["cpu_seconds"] is None else f"{job['cpu_seconds']:.1f}"
        lines.append(f"{job['case'][:28]:<28} {job['status']:<9} {job['wall_seconds']:>8.1f} {cpu:>7} "
                     f"{_size(job['peak_memory_bytes']):>9} {gpu:>4}  {(job['error'] or '')[:160]}")
    lines.extend(f"note: {job['case']}: {note}" for job in data["jobs"] for note in job["notes"]
                 if note.startswith(GATEWAY_REFUSES))
    evaluation = data["evaluation"]
    if evaluation and evaluation["error"]:
        lines.append(f"scoring failed: {evaluation['error']}")
    elif evaluation:
        for key, value in evaluation["aggregates"].items():
            interval = evaluation["intervals"].get(key)
            ci = f"  [{interval['low']:.4f}, {interval['high']:.4f}]" if interval else ""
            lines.append(f"  {key:<30} {value:.4f}{ci}")
        lines.extend(f"convention check: {line}" for line in evaluation["review"]["conventions"])
    summary = data["summary"]
    level, words = verdict(data)
    lines.append(f"{summary['num_succeeded']}/{summary['num_jobs']} jobs succeeded; "
                 + {"ready": "ready to upload", "warning": f"NOT ready, {words}",
                    "failed": "NOT ready: see the errors above"}[level])
    return "\n".join(lines)


@report_errors
def main(argv: list[str] | None = None) -> int:
    parser = build_parser_preflight()
    args = parser.parse_args(argv)
    setup_logging()
    definition = load_challenge(args.challenge)
    if not definition.builtin:  # its [limits], where the command line gives none
        set_limit_defaults(parser, definition.limits)
        args = parser.parse_args(argv)
    spec = definition_spec(definition)
    for name, path in (("--model", args.model), ("--ground-truth", args.ground_truth)):
        if path is not None and not path.exists():
            raise InputError(f"{name} {path}: not found")
    if args.ground_truth is not None:
        check_ground_truth(definition, args.ground_truth)
    if args.edition is not None and not definition.evaluation.builtin:
        raise InputError(f"--edition {args.edition[:40]}: editions are a built-in evaluator's; {definition.source} "
                         "has its own evaluation")
    args.challenge = definition.evaluation.builtin or definition.name  # the evaluator's, where built in
    args.edition = args.edition or definition.evaluation.edition
    if args.bootstrap < 0:
        raise InputError(f"--bootstrap {args.bootstrap}: expected a number of resamples >= 0")
    boot.check_level(args.bootstrap_level)
    limits = JobLimits(memory_gb=args.memory_gb, time_limit_s=args.time_limit, cpus=args.cpus, disk_gb=args.disk_gb)
    cases = find_cases(spec, args.cases)
    launcher = DockerImage(args.image, name_prefix="medchallenge-preflight", engine=args.engine)
    image_notes = launcher.check()  # GC's upload checks first: a root image is refused before any job
    prepare_output(args.output)
    jobs = []
    for job in run_jobs(spec, cases, args.output, launcher, model=args.model, limits=limits, gpu=args.gpu):
        refusal = value_rules.gateway_refusal(definition.name, job.result.inputs, job.result.outputs) \
            if job.result.succeeded and definition.builtin else None
        if refusal:
            job.result.notes.append(f"{GATEWAY_REFUSES}: {refusal}")
        jobs.append(job)
    if args.ground_truth is None:
        evaluation = None
    elif definition.evaluation.builtin:
        evaluation = score_jobs(args, jobs, args.output / EVALUATION_INPUT, args.output / "evaluation")
    else:
        evaluation = score_jobs_by_container(definition, evaluation_image(definition.evaluation, args.engine), jobs,
                                             args.ground_truth, args.output / EVALUATION_INPUT,
                                             args.output / "evaluation", args.engine)
    data = report(args, jobs, limits, image_notes, evaluation)
    write_json_atomic(args.output / "preflight.json", data)
    write_text_atomic(args.output / "preflight.html", render_page(data, review_figures(args.output, evaluation)))
    print(terminal_table(data))
    print(f"report: {args.output / 'preflight.html'}")
    return 0 if data["ready"] else 1

