"""The ground truth a challenge's evaluation needs, checked before any job runs: each of the definition's patterns
matches at least one file of the folder (one line naming what is missing)."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from .definition import ChallengeDefinition

MAX_LISTED = 5  # missing patterns named in the error line


def check_ground_truth(definition: ChallengeDefinition, ground_truth: Path) -> None:
    """InputError unless every ground-truth pattern of `definition` matches a file under the folder `ground_truth`
    (a ground_truth.tar.gz, which only an evaluation container takes, is checked when it is unpacked)."""
    if ground_truth.is_file() and not definition.evaluation.builtin:
        return
    if not ground_truth.is_dir():
        raise InputError(f"--ground-truth {ground_truth}: not a folder")
    missing = [p for p in definition.interface.ground_truth
               if not any(path.is_file() for path in ground_truth.glob(p))]
    if missing:
        shown = ", ".join(missing[:MAX_LISTED]) + (f" and {len(missing) - MAX_LISTED} more"
                                                    if len(missing) > MAX_LISTED else "")
        raise InputError(f"--ground-truth {ground_truth}: no file matches {shown} (the ground truth the "
                         f"{definition.name} evaluation needs)")
