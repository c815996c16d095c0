"""Submissions of several teams on one synthetic ground truth, for the leaderboard tests."""

from __future__ import annotations

import random
from pathlib import Path

from medchallenge.synth.__main__ import main as synth_main


def caption_teams(root: Path, teams: int, images: int = 30, seed: int = 2) -> tuple[Path, Path]:
    """(ground truth, submissions): a caption 2022 cohort and `teams` runs made from its predictions, team k
    dropping each concept and caption word with probability 0.15 k (team-A: the predictions as generated)."""
    assert synth_main(["imageclef-caption", "--out", str(root / "cohort"), "--images", str(images),
                       "--seed", str(seed)]) == 0
    predictions, submissions = root / "cohort" / "predictions", root / "submissions"
    rng = random.Random(seed)
    for k in range(teams):
        folder = submissions / f"team-{chr(65 + k)}"
        folder.mkdir(parents=True)
        for name, separator in (("concepts.csv", ";"), ("captions.csv", " ")):
            lines = []
            for line in (predictions / name).read_text().splitlines():
                case, _, rest = line.partition("|")
                kept = [token for token in rest.split(separator) if token and rng.random() >= 0.15 * k]
                lines.append(f"{case}|{separator.join(kept)}")
            (folder / name).write_text("\n".join(lines) + "\n")
    return root / "cohort" / "ground_truth", submissions
