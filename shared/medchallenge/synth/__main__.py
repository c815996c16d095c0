"""`python -m medchallenge.synth CHALLENGE --out DIR ...`: generate a synthetic cohort for one challenge.

Each challenge's generator module (registry: `medchallenge.synth.<module>`), and an algorithm's generator of its
input files where it has one of its own (`Algorithm.generator`), provides `add_arguments(parser)` and
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
    generators = {name: challenge.generator_module for name, challenge in CHALLENGES.items()}
    generators.update({challenge.algorithm.generator: f"medchallenge.synth.{challenge.algorithm.generator.replace('-', '_')}"
                       for challenge in CHALLENGES.values() if challenge.algorithm and challenge.algorithm.generator})
    for name, generator_module in generators.items():
        try:
            module = importlib.import_module(generator_module)
        except ModuleNotFoundError as exc:
            if exc.name != generator_module:
                raise
            continue
        modules[name] = module
        module.add_arguments(sub.add_parser(name, help=(module.__doc__ or "").strip().splitlines()[0]))
    args = parser.parse_args(argv)
    setup_logging()
    return modules[args.challenge].run(args)


if __name__ == "__main__":
    sys.exit(main())
