"""Text inputs beyond the size limits (bytes, lines, bytes per line) are refused with one line before any parser
holds them in memory, for every evaluator (issue 10); at the limits they are read."""

from __future__ import annotations

import shutil

import pytest

from helpers import evaluator, evaluator_argv, one_error_line
from medchallenge.errors import InputError
from medchallenge.limits import MAX_LINE_BYTES, MAX_TEXT_BYTES, MAX_TEXT_LINES, check_text_size

def test_limits_count_lines_as_text_mode_does(tmp_path, monkeypatch):
    monkeypatch.setenv(MAX_TEXT_LINES.variable, "3")
    monkeypatch.setenv(MAX_LINE_BYTES.variable, "5")
    for name, data in (("lf.csv", b"a\nbb\nccccc\n"), ("crlf.csv", b"a\r\nbb\r\nccccc\r\n"), ("cr.csv", b"a\rbb\rccccc"),
                       ("unterminated.csv", b"a\nbb\nccccc")):
        (tmp_path / name).write_bytes(data)
        check_text_size(tmp_path / name)  # 3 lines of at most 5 bytes: at the limits
    for name, data, message in (
            ("four.csv", b"a\nb\nc\nd", r"4 lines, more than the limit of 3 lines"),
            ("four-crlf.csv", b"a\r\nb\r\nc\r\nd\r\n", r"at least 4 lines, more than the limit of 3 lines"),
            ("long.tsv", b"a\n123456\n", r"a line of 6 bytes, more than the limit of 5 bytes per line"),
            ("long-last.txt", b"a\n123456", r"a line of (at least )?6 bytes")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(InputError, match=rf"{name}: ({message})"):
            check_text_size(tmp_path / name)


def test_a_long_line_across_read_chunks_is_measured_whole(tmp_path, monkeypatch):
    monkeypatch.setenv(MAX_LINE_BYTES.variable, str(3 << 20))
    path = tmp_path / "run.csv"
    path.write_bytes(b"x" * (3 << 20) + b"\n" + b"y" * 10 + b"\n")
    check_text_size(path)
    path.write_bytes(b"y\n" + b"x" * ((3 << 20) + 1) + b"\n")
    with pytest.raises(InputError, match=r"run.csv: a line of (at least )?\d+ bytes, more than the limit"):
        check_text_size(path)


def test_size_limit_applies_to_json_and_text_but_not_images(tmp_path, monkeypatch):
    monkeypatch.setenv(MAX_TEXT_BYTES.variable, "10")
    for name in ("predictions.json", "run.txt"):
        (tmp_path / name).write_text("x" * 11)
        with pytest.raises(InputError, match=rf"{name}: 11 bytes, more than the limit of 10 bytes "
                                             rf"\(\${MAX_TEXT_BYTES.variable} sets it\)"):
            check_text_size(tmp_path / name)
    (tmp_path / "mask.nii.gz").write_bytes(b"x" * 100)
    check_text_size(tmp_path / "mask.nii.gz")


@pytest.mark.parametrize("name", ["tb-caverns", "ribfrac", "object-cxr", "imageclef-caption"])
@pytest.mark.parametrize("limit", [MAX_TEXT_LINES, MAX_LINE_BYTES, MAX_TEXT_BYTES])
def test_every_evaluator_refuses_a_run_file_over_a_limit_in_one_line(inputs, tmp_path, monkeypatch, capsys, name,
                                                                     limit):
    predictions = tmp_path / "predictions"
    shutil.copytree(inputs[name][0], predictions)
    texts = [path.read_bytes() for path in predictions.rglob("*") if path.suffix in (".csv", ".txt")]
    largest = max({MAX_TEXT_LINES: len(text.splitlines()), MAX_TEXT_BYTES: len(text),
                   MAX_LINE_BYTES: max(map(len, text.splitlines()))}[limit] for text in texts)
    monkeypatch.setenv(limit.variable, str(largest - 1))
    assert evaluator(name).main(evaluator_argv(inputs, name, tmp_path / "out", predictions)) == 1
    line = one_error_line(capsys)
    assert str(predictions) in line and f"more than the limit of {largest - 1} {limit.unit}" in line, line
    assert not (tmp_path / "out" / "metrics.json").exists()
    monkeypatch.setenv(limit.variable, str(largest))  # at the limit: scored
    assert evaluator(name).main(evaluator_argv(inputs, name, tmp_path / "out", predictions)) == 0


def test_a_million_doubtful_lines_are_not_a_million_warnings(inputs, tmp_path, caplog):
    import json

    from medchallenge.evaluation.command import MAX_WARNINGS_SHOWN

    predictions = tmp_path / "predictions"
    shutil.copytree(inputs["tb-caverns"][0], predictions)
    assert evaluator("tb-caverns").main(evaluator_argv(inputs, "tb-caverns", tmp_path / "out", predictions)) == 0
    before = len(json.loads((tmp_path / "out" / "metrics.json").read_text())["meta"]["warnings"])
    caplog.clear()
    with open(predictions / "submission.txt", "a") as handle:  # boxes of CTs not in the test set: one warning each
        handle.writelines(f"TST_{i:06d}.nii.gz,1,2,3,4,5,6\n" for i in range(1000, 1100))
    assert evaluator("tb-caverns").main(evaluator_argv(inputs, "tb-caverns", tmp_path / "out", predictions)) == 0
    warnings = json.loads((tmp_path / "out" / "metrics.json").read_text())["meta"]["warnings"]
    assert len(warnings) == MAX_WARNINGS_SHOWN + 1 and warnings[-1].startswith(f"... and {before + 80} more warning(s)")
    assert sum(r.getMessage().startswith("warning: ") for r in caplog.records) == MAX_WARNINGS_SHOWN + 1
