"""Faults in the evaluation machinery (issue 10): records of changed inputs are never reused, a killed worker and an
exhausted memory are one line each."""

from __future__ import annotations

import argparse
import os

import pytest

from medchallenge.errors import InputError
from medchallenge.evaluation.inputs import input_fingerprint, input_state
from medchallenge.evaluation.records import compute_records


def test_fingerprint_and_state_see_an_edit_in_the_middle_of_a_large_file(tmp_path):
    # both read every byte: a same-size edit inside a large file, with the mtime put back, changes both (records
    # of the old contents must not be reused)
    (tmp_path / "in").mkdir()
    (tmp_path / "gt").mkdir()
    big = tmp_path / "in" / "run.csv"
    big.write_bytes(b"a" * (3 << 20))
    args = argparse.Namespace(input=tmp_path / "in", ground_truth=tmp_path / "gt")
    fingerprint, state = input_fingerprint(args), input_state(args.input, args.ground_truth)
    assert input_state(args.input, args.ground_truth) == state and input_fingerprint(args) == fingerprint
    info = big.stat()
    with open(big, "r+b") as handle:
        handle.seek(1 << 20)
        handle.write(b"b")
    os.utime(big, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert input_fingerprint(args) != fingerprint
    assert input_state(args.input, args.ground_truth) != state


def test_a_killed_worker_is_one_clear_error_naming_the_cases():
    from helpers import record_or_die

    with pytest.raises(InputError, match=r"a worker process died \(killed, e.g. out of memory\) while scoring one "
                                         r"of .*die.*--workers 1"):
        compute_records(["a", "b", "die", "c"], record_or_die, workers=2, progress=False)


def test_out_of_memory_is_one_line(capsys):
    from medchallenge.errors import report_errors

    @report_errors
    def main() -> int:
        raise MemoryError

    assert main() == 1
    assert capsys.readouterr().err.startswith("error: out of memory")
