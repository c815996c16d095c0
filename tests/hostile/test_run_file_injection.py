"""A case file name that would forge run-file lines is refused before any work (issue 10): the TB algorithm writes
input names into submission.txt, whose lines are comma-separated."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from medchallenge.algorithms.runner import main
from medchallenge.algorithms.tb_caverns import ALGORITHM

MODEL = Path(__file__).resolve().parents[2] / "algorithms" / "tb_caverns" / "model"


@pytest.mark.parametrize("name", ["TST_001.nii.gz,1,2,3,4,5,6\nTST_002.nii.gz", "TST\r001.nii.gz",
                                  "TST,001.nii.gz"])
def test_a_name_that_would_forge_submission_lines_is_refused(tmp_path, capsys, name):
    cases = tmp_path / "input"
    cases.mkdir()
    for file in (name, "TST_009.nii.gz"):
        sitk.WriteImage(sitk.GetImageFromArray(np.full((8, 8, 8), -1000, np.int16)), str(cases / file))
    assert main(ALGORITHM, ["--input", str(cases), "--output", str(tmp_path / "out")], MODEL) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ") and "which the run file cannot carry" in line
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
