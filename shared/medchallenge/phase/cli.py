"""`medchallenge phase run ...` and `medchallenge phase status OUT`."""

from __future__ import annotations

import contextlib
import importlib
import sys

from ..errors import report_errors

USAGE = "usage: medchallenge phase {run,status} ... (medchallenge phase run --help)"
COMMANDS = {"run": "medchallenge.phase.run", "status": "medchallenge.phase.status"}
SUMMARY = """usage: medchallenge phase {run,status} ...

A challenge phase: every submission's algorithm container on every case, each submission evaluated, then the
leaderboard, on this machine or a Slurm cluster; resumable (docs/phase.md, docs/scale.md).

commands:
  run      run what is missing of the phase, evaluate, rank
  status   per team: done, running, queued, failed (and why), what to do"""


def print_help() -> None:
    """The commands, then each command's own options (its --help)."""
    print(SUMMARY)
    for command, module in COMMANDS.items():
        print(f"\n--- medchallenge phase {command} ---")
        with contextlib.suppress(SystemExit):  # argparse's --help exits once it has printed
            importlib.import_module(module).main(["--help"])


@report_errors
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print_help()
        return 0
    if not argv or argv[0] not in COMMANDS:
        print(USAGE, file=sys.stderr)
        return 2
    return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
