"""`medchallenge COMMAND ...`: one entry point for the package's tools.

  synth CHALLENGE ...      generate a synthetic cohort          (python -m medchallenge.synth)
  evaluate CHALLENGE ...   run an evaluator                     (evaluators/<challenge>/evaluate.py)
  infer CHALLENGE ...      run an algorithm                     (algorithms/<challenge>/inference.py)
  gc-emulate CHALLENGE ... run an algorithm as grand-challenge does (python -m medchallenge.grand_challenge.emulator)
  preflight --challenge NAME|FILE --image IMAGE --cases DIR ...  check an algorithm image before uploading it
  phase run|status ...     a challenge phase: every submission on every case, evaluated, ranked (medchallenge.phase)
  demo                     every challenge end to end with docker compose
  leaderboard ...          rank a folder of submissions with intervals (python -m medchallenge.leaderboard)
  gateway --config FILE    DICOM gateway between a PACS and the detectors (python -m medchallenge.gateway)
  aicrowd-evaluator ...    an AIcrowd evaluator folder of a scoring configuration (medchallenge.platforms.aicrowd)
  codabench ...            Codabench competition bundles (python -m medchallenge.platforms.codabench)
"""

from __future__ import annotations

import importlib
import sys

from .registry import CHALLENGES

EVALUATORS = {name: challenge.evaluator_module for name, challenge in CHALLENGES.items()}
ALGORITHMS = {name: challenge.algorithm.module for name, challenge in CHALLENGES.items() if challenge.algorithm}


def _run(module: str, argv: list[str]) -> int:
    return importlib.import_module(module).main(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "synth":
        return _run("medchallenge.synth.__main__", rest)
    if command == "gc-emulate":
        return _run("medchallenge.grand_challenge.emulator", rest)
    if command == "preflight":
        return _run("medchallenge.preflight", rest)
    if command == "phase":
        return _run("medchallenge.phase.cli", rest)
    if command == "demo":
        return _run("medchallenge.demo", rest)
    if command == "leaderboard":
        return _run("medchallenge.leaderboard", rest)
    if command == "gateway":
        return _run("medchallenge.gateway", rest)
    if command == "aicrowd-evaluator":
        return _run("medchallenge.platforms.aicrowd", rest)
    if command == "codabench":
        return _run("medchallenge.platforms.codabench", rest)
    modules = {"evaluate": EVALUATORS, "infer": ALGORITHMS}.get(command)
    if command == "infer" and rest and rest[0] in ALGORITHMS:
        from .algorithms import runner

        return runner.main(CHALLENGES[rest[0]].algorithm.plugin(), rest[1:])
    if modules and rest and rest[0] in modules:
        return _run(modules[rest[0]], rest[1:])
    if modules:
        print(f"usage: medchallenge {command} {{{','.join(modules)}}} ...", file=sys.stderr)
        return 2
    print(f"unknown command {command!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
