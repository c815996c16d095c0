"""The job runner against what a job or the host does to it (issue 29): a job printing without end, and the watcher
of the job-runner service against a full disk and a failing job."""

from __future__ import annotations

import sys
import tracemalloc

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
