"""Hostile prediction folders and output faults through the one evaluator command (issue 10): predictions are never
read through links or special files, a failed run leaves no metrics.json, and an output that cannot be written is
one line with nothing half-written."""

from __future__ import annotations

import shutil

import pytest

from helpers import evaluator, evaluator_argv, one_error_line


@pytest.mark.parametrize("kind", ["symlink to the ground truth", "hard link", "fifo"])
def test_predictions_are_never_read_through_links_or_special_files(inputs, tmp_path, capsys, kind):
    import os

    predictions = tmp_path / "predictions"
    shutil.copytree(inputs["ribfrac"][0], predictions)
    target = predictions / "RibFrac901.nii.gz"
    target.unlink()
    if kind == "symlink to the ground truth":  # would score froc_average 1.0 if followed
        target.symlink_to(inputs["ribfrac"][1] / "RibFrac901-label.nii.gz")
    elif kind == "hard link":
        shutil.copy(inputs["ribfrac"][1] / "RibFrac901-label.nii.gz", tmp_path / "copy.nii.gz")
        os.link(tmp_path / "copy.nii.gz", target)
    else:
        os.mkfifo(target)
    assert evaluator("ribfrac").main(evaluator_argv(inputs, "ribfrac", tmp_path / "out", predictions)) == 1
    line = one_error_line(capsys)
    assert str(target) in line and ("link" in line or "not a regular file" in line)
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_a_failed_run_leaves_no_old_metrics(inputs, tmp_path, capsys):
    out = tmp_path / "out"
    assert evaluator("tb-caverns").main(evaluator_argv(inputs, "tb-caverns", out)) == 0
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "submission.txt").write_text("TST_001.nii.gz,1,2\n")  # a short row: the official code crashes
    assert evaluator("tb-caverns").main(evaluator_argv(inputs, "tb-caverns", out, broken)) == 1
    one_error_line(capsys)
    assert not (out / "metrics.json").exists()


def test_output_that_is_a_file_or_cannot_be_written_is_one_line(inputs, tmp_path, capsys, monkeypatch):
    import errno

    import medchallenge.evaluation.command as command

    a_file = tmp_path / "taken"
    a_file.write_text("x")
    assert evaluator("tb-caverns").main(evaluator_argv(inputs, "tb-caverns", a_file)) == 1
    assert "the output folder cannot be written" in one_error_line(capsys)

    def disk_full(path, *args):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(command, "write_metrics", disk_full)
    assert evaluator("tb-caverns").main(evaluator_argv(inputs, "tb-caverns", tmp_path / "out")) == 1
    line = one_error_line(capsys)
    assert "cannot write the results: No space left on device" in line
    assert [p.name for p in (tmp_path / "out").iterdir()] == []


def test_a_failed_run_leaves_no_old_figures_either(inputs, tmp_path, capsys):
    out = tmp_path / "out"
    argv = evaluator_argv(inputs, "ribfrac", out)
    argv.remove("--no-plots")
    argv[argv.index("--no-review")] = "--review"  # without case images too
    assert evaluator("ribfrac").main(argv) == 0
    assert sorted(p.name for p in out.iterdir()) == ["confusion_matrix.png", "froc.png", "metrics.json", "review",
                                                     "review.html"]  # review/: its figures at full resolution
    broken = tmp_path / "broken"
    shutil.copytree(inputs["ribfrac"][0], broken)
    next(broken.glob("*.csv")).write_text("public_id,label_id\n")
    assert evaluator("ribfrac").main([*argv[:1], str(broken), *argv[2:]]) == 1
    one_error_line(capsys)
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("name", ["tb-caverns", "ribfrac", "object-cxr", "imageclef-caption"])
def test_each_evaluator_declares_the_figures_it_writes(inputs, tmp_path, name):
    # prepare_output removes exactly these (and review.html) before a run: an undeclared figure could outlive a
    # failed run
    argv = evaluator_argv(inputs, name, tmp_path / "out")
    argv.remove("--no-plots")
    argv[argv.index("--no-review")] = "--review"  # without case images too
    assert evaluator(name).main(argv) == 0
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == sorted(["metrics.json", "review.html", *(["review"] if "review" in written else []),
                              *evaluator(name).figures])  # review/: review.html's figures at full resolution
