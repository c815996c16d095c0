"""`python -m medchallenge.synth CHALLENGE --out DIR ...`: generate a synthetic cohort for one challenge.

Each generator module of the registry (`Challenge.generators`: the challenge's own, `medchallenge.synth.<module>`, and its
algorithm's input generator if it has one) provides `add_arguments(parser)` and
`run(args) -> int`.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ..logs import setup_logging
from ..registry import CHALLENGES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m medchallenge.synth", description=__doc__)
    sub = parser.add_subparsers(dest="challenge", required=True)
    modules = {}
    for challenge in CHALLENGES.values():
        for name, module_name in challenge.generators.items():
            try:
                module = importlib.import_module(module_name)
            except ModuleNotFoundError as exc:
                if exc.name != module_name:
                    raise
                continue
            modules[name] = module
            module.add_arguments(sub.add_parser(name, help=(module.__doc__ or "").strip().splitlines()[0]))
    args = parser.parse_args(argv)
    setup_logging()
    return modules[args.challenge].run(args)


if __name__ == "__main__":
    sys.exit(main())
