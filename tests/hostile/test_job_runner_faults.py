"""The job runner against what a job or the host does to it (issue 29): a job printing without end, and the watcher
of the job-runner service against a full disk and a failing job."""

from __future__ import annotations

import errno
import json
import logging
import os
import sys
import threading
import time
import tracemalloc
from pathlib import Path

from medchallenge.inbox import watch_inbox
from medchallenge.jobs import LocalProcess, run_job

PRINTED_LINES = 1_000_000  # 100 MB on stdout, then one 20 MB line without an end on stderr
FLOOD = (f"import sys\nfor start in range(0, {PRINTED_LINES}, 10000):\n"
         "    sys.stdout.write(''.join(f'{i:09d}' + 'x' * 90 + '\\n' for i in range(start, start + 10000)))\n"
         "sys.stderr.write('y' * (20 << 20))\n")


def test_a_local_job_printing_100_mb_is_read_as_a_bounded_tail(tmp_path):
    tracemalloc.start()
    try:
        result = run_job(LocalProcess([sys.executable, "-c", FLOOD]), [], [], tmp_path / "job")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.succeeded
    assert result.stdout_tail[-1] == f"{PRINTED_LINES - 1:09d}" + "x" * 90  # the last lines are the job's last
    assert len(result.stderr_tail) == 1 and len(result.stderr_tail[0]) <= 300  # cut as the report quotes it
    assert peak < 24 << 20  # 2 x 500 lines of at most 4 kB kept; not the whole output (100 MB as bytes, as text)


def _watch(inbox: Path, process, stop: threading.Event) -> threading.Thread:
    """The job-runner service's watcher of `inbox` in a thread, retrying a full disk every 0.2 s."""
    thread = threading.Thread(target=watch_inbox, args=(inbox, process, stop.is_set, 0.2), daemon=True)
    thread.start()
    return thread


def test_a_full_disk_keeps_the_job_queued_and_a_failing_job_is_its_status_not_the_watcher_s_end(tmp_path, caplog):
    inbox = tmp_path / "inbox"
    for job in ("first", "runner-bug", "last"):
        (inbox / "pending" / job / "input").mkdir(parents=True)
    attempts = []

    def process(job: Path) -> None:  # the disk is full for the first 3 attempts, whichever job they are
        attempts.append(job.name)
        (job / "output").mkdir()
        (job / "output" / "result.json").write_text("{}")
        if len(attempts) <= 3:  # as writing result.json on a full disk
            raise OSError(errno.ENOSPC, "No space left on device", str(job / "output" / "result.json"))
        if job.name == "runner-bug":
            raise KeyError("a bug of the job runner's")

    stop = threading.Event()
    with caplog.at_level(logging.INFO, logger="medchallenge.inbox"):
        watcher = _watch(inbox, process, stop)
        deadline = time.monotonic() + 60
        while len(list((inbox / "done").glob("*"))) < 3 and time.monotonic() < deadline and watcher.is_alive():
            time.sleep(0.1)
        assert watcher.is_alive()  # today: OSError ends the watcher ("job runner stopped"), the job left in running/
        stop.set()
        watcher.join(10)
    assert sorted(p.name for p in (inbox / "done").iterdir()) == ["first", "last", "runner-bug"]
    assert len(attempts) == 6 and not any((inbox / "running").iterdir()) and not any((inbox / "pending").iterdir())
    status = {job.name: json.loads((job / "status.json").read_text()) for job in (inbox / "done").iterdir()}
    assert status["first"] == status["last"] == {"returncode": 0, "error": None}
    assert status["runner-bug"] == {"returncode": 1, "error": "the job runner failed on this job: KeyError: "
                                                             "\"a bug of the job runner's\""}
    assert all(sorted(p.name for p in job.iterdir()) == ["input", "output", "status.json"]
               for job in (inbox / "done").iterdir())
    messages = [r.getMessage() for r in caplog.records]
    assert sum("disk full" in m for m in messages) == 1  # said once, not at every retry
    assert sum("disk space back" in m for m in messages) == 1
