"""A job container's watchdog: `python -I watchdog.py ENGINE TOKEN SECONDS`, started by the job runner (docker_run)
in its own session before the container, its standard input a pipe from the runner. It removes the container
labelled `WATCH_LABEL=TOKEN` when the runner dies (the pipe ends without "done": a SIGKILL, an OOM kill) or when
SECONDS pass (the job's time limit and a margin: a runner that lost track of it), and exits at once when the runner
says "done" (it removed its container itself). The runner may also send "pid N" (its `ENGINE run` client): after the
runner's death the watchdog removes what that client still makes until it has ended. What it inherits from the
runner stays open while it runs (a phase's slot lock: the slot is free only once the container is gone).

Standard library only, run without the package (`-I`): it starts in milliseconds."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

WATCH_LABEL = "medchallenge.watch"
CLIENT_WAIT_S = 60  # after the runner's death: the `run` client's end awaited this long, removing what it makes
RETRY_S = 1.0
ENGINE_TIMEOUT_S = 60


def remove(engine: str, token: str) -> bool:
    """Remove the containers labelled with `token` (running or not); whether the engine answered."""
    try:
        listed = subprocess.run([engine, "ps", "--all", "--quiet", "--filter", f"label={WATCH_LABEL}={token}"],
                                capture_output=True, text=True, timeout=ENGINE_TIMEOUT_S)
        ids = listed.stdout.split()
        if ids:
            subprocess.run([engine, "rm", "--force", *ids], capture_output=True, timeout=ENGINE_TIMEOUT_S)
        return listed.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def watch(engine: str, token: str, seconds: float) -> int:
    """Wait for the runner's word, its death or the deadline; 0 when the runner finished, 1 when it removed."""
    deadline = time.monotonic() + seconds
    said, client = b"", None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        readable, _, _ = select.select([0], [], [], left)
        if not readable:
            continue
        chunk = os.read(0, 4096)
        said += chunk
        for line in said.split(b"\n"):
            if line == b"done":
                return 0
            if line.startswith(b"pid ") and line[4:].isdigit():
                client = int(line[4:])
        said = said[-4096:]
        if not chunk:  # the runner died without a word
            break
    ends = time.monotonic() + CLIENT_WAIT_S
    while True:
        running = _alive(client)
        remove(engine, token)
        if not running or time.monotonic() > ends:
            return 1
        time.sleep(RETRY_S)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: watchdog.py ENGINE TOKEN SECONDS", file=sys.stderr)
        return 2
    for stop in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):  # outlives the runner's stop, its terminal's end
        signal.signal(stop, signal.SIG_IGN)
    return watch(argv[0], argv[1], float(argv[2]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
