"""`medchallenge COMMAND ...`: one entry point for the package's tools.

  synth CHALLENGE ...      generate a synthetic cohort          (python -m medchallenge.synth)
  evaluate CHALLENGE ...   run an evaluator                     (evaluators/<challenge>/evaluate.py)
  infer CHALLENGE ...      run an algorithm                     (algorithms/<challenge>/inference.py)
  gc-emulate CHALLENGE ... run an algorithm as grand-challenge does (python -m medchallenge.gc_emulator)
  demo                     every challenge end to end with docker compose
"""

from __future__ import annotations

import importlib
import sys

EVALUATORS = {"tb-caverns": "tb_caverns", "ribfrac": "ribfrac", "object-cxr": "object_cxr",
              "imageclef-caption": "imageclef_caption"}
ALGORITHMS = {"tb-caverns": "tb_caverns"}


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
        return _run("medchallenge.gc_emulator", rest)
    if command == "demo":
        return _run("medchallenge.demo", rest)
    table = {"evaluate": (EVALUATORS, "evaluators"), "infer": (ALGORITHMS, "algorithms")}.get(command)
    if table and rest and rest[0] in table[0]:
        return _run(f"medchallenge.{table[1]}.{table[0][rest[0]]}", rest[1:])
    if table:
        print(f"usage: medchallenge {command} {{{','.join(table[0])}}} ...", file=sys.stderr)
        return 2
    print(f"unknown command {command!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
