"""`python -m medchallenge.synth CHALLENGE --out DIR ...`: generate a synthetic cohort for one challenge.

Each generator module `medchallenge.synth.<challenge with underscores>` provides
`add_arguments(parser)` and `run(args) -> int`.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ..logs import setup_logging

GENERATORS = {
    "tb-caverns": "tb_caverns",
    "ribfrac": "ribfrac",
    "object-cxr": "object_cxr",
    "imageclef-caption": "imageclef_caption",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m medchallenge.synth", description=__doc__)
    sub = parser.add_subparsers(dest="challenge", required=True)
    modules = {}
    for name, module_name in GENERATORS.items():
        try:
            module = importlib.import_module(f"medchallenge.synth.{module_name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"medchallenge.synth.{module_name}":
                raise
            continue
        modules[name] = module
        module.add_arguments(sub.add_parser(name, help=(module.__doc__ or "").strip().splitlines()[0]))
    args = parser.parse_args(argv)
    setup_logging()
    return modules[args.challenge].run(args)


if __name__ == "__main__":
    sys.exit(main())
