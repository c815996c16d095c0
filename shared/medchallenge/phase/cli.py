"""`medchallenge phase run ...` and `medchallenge phase status OUT`."""

from __future__ import annotations

import sys

from ..errors import report_errors

USAGE = "usage: medchallenge phase {run,status} ... (medchallenge phase run --help)"


@report_errors
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("run", "status"):
        print(USAGE, file=sys.stderr)
        return 2
    if argv[0] == "run":
        from .run import main as run

        return run(argv[1:])
    from .status import main as status

    return status(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
