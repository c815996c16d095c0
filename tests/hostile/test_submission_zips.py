"""Zip members that name one file in two ways (`a.csv` and `./a.csv`, `sub//x` and `sub/x`), name no file (`.`), or
need a file as a folder are refused by the zip check with one line, before anything is written; the AIcrowd class
refuses them with that line and no path of the grader's (issue 29, item 8). Honest spellings (`./a.csv` alone) are
unpacked under the name they mean."""

from __future__ import annotations

import warnings
import zipfile
from pathlib import Path

import pytest

from medchallenge.platforms.aicrowd import AIcrowdRun, SubmissionRefused
from medchallenge.platforms.submissions import place_submission

OBJECT_CXR = ("classification.csv", "localization.csv")


def zip_of(path: Path, members: dict[str, bytes]) -> Path:
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as archive:
        warnings.simplefilter("ignore")  # zipfile warns of a duplicate name
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def object_cxr_members(predictions: Path, prefix: str = "") -> dict[str, bytes]:
    return {prefix + name: (predictions / name).read_bytes() for name in OBJECT_CXR}


@pytest.mark.parametrize("extra, message", [
    ({"./classification.csv": b"x"}, "the members 'classification.csv' and './classification.csv' both name "
                                     "'classification.csv'"),
    ({"sub/x": b"1", "sub//x": b"2"}, "the members 'sub/x' and 'sub//x' both name 'sub/x'"),
    ({"sub/./x": b"1", "sub/x": b"2"}, "the members 'sub/./x' and 'sub/x' both name 'sub/x'"),
    ({".": b"x"}, "the member '.' names no file"),
    ({"./": b""}, "the member './' names no file"),
    ({"classification.csv/x": b"x"}, "the member 'classification.csv' is a file, and the member "
                                     "'classification.csv/x' needs it as a folder"),
    ({"a": b"x", "a.b": b"x", "a/./b/c": b"x"}, "the member 'a' is a file, and the member 'a/./b/c' needs it as a "
                                                "folder"),
])
def test_members_naming_one_file_twice_are_refused_before_extraction(inputs, tmp_path, extra, message):
    predictions, ground_truth = inputs["object-cxr"]
    submission = zip_of(tmp_path / "submission.zip", {**object_cxr_members(predictions), **extra})
    run = AIcrowdRun("object-cxr", ground_truth)
    with pytest.raises(SubmissionRefused) as refused:
        run.evaluate(submission)
    line = str(refused.value)
    assert line == (f"error: {submission}: {message}; each member of a submission zip must name a file of its own"), \
        line
    assert "medchallenge-aicrowd-" not in line and "\n" not in line
    with pytest.raises(Exception, match=message):
        place_submission(run.submission, submission, tmp_path / "placed")
    assert not (tmp_path / "placed").exists()


def test_dot_slash_names_alone_are_unpacked_under_the_name_they_mean(inputs, tmp_path):
    predictions, ground_truth = inputs["object-cxr"]
    plain = AIcrowdRun("object-cxr", ground_truth).evaluate(zip_of(tmp_path / "plain.zip",
                                                                   object_cxr_members(predictions)))
    for prefix in ("./", "run//", "./run/./"):
        submission = zip_of(tmp_path / "dotted.zip", object_cxr_members(predictions, prefix))
        assert AIcrowdRun("object-cxr", ground_truth).evaluate(submission) == plain


def test_a_member_the_file_system_cannot_hold_is_one_line_without_the_grader_s_paths(inputs, tmp_path):
    predictions, ground_truth = inputs["object-cxr"]
    long_name = "n" * 300 + ".csv"  # more than a file name may hold (255 bytes)
    submission = zip_of(tmp_path / "submission.zip", {**object_cxr_members(predictions), long_name: b"x"})
    with pytest.raises(SubmissionRefused) as refused:
        AIcrowdRun("object-cxr", ground_truth).evaluate(submission)
    assert str(refused.value) == f"error: {submission}: cannot unpack the member '{long_name}' (File name too long)"
