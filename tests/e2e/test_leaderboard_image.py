"""The leaderboard where the evaluator runs: inside an evaluator image (its `medchallenge` command), offline and
hardened as on an organiser's machine, with the same board as a run without Docker."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import open_dir
from leaderboard_helpers import caption_teams

SERVICE = "caption-2022-evaluator"
ARGUMENTS = ["--challenge", "imageclef-caption", "--bootstrap", "200", "--bootstrap-seed", "3", "--no-progress"]


def test_leaderboard_runs_in_the_evaluator_image(docker_compose, tmp_path):
    docker_compose("build", SERVICE)
    image = json.loads(docker_compose("config", "--format", "json").stdout)["services"][SERVICE]["image"]
    ground_truth, submissions = caption_teams(tmp_path, 3)
    for path in [tmp_path, *tmp_path.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    output = open_dir(tmp_path / "board")
    result = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--read-only", "--tmpfs", "/tmp", "--cap-drop", "ALL",
         "--user", "1000:1000", "-v", f"{submissions}:/submissions:ro",
         "-v", f"{ground_truth}:/opt/ml/input/data/ground_truth:ro", "-v", f"{output}:/output",
         "--entrypoint", "medchallenge", image, "leaderboard", "--ground-truth", "/opt/ml/input/data/ground_truth",
         "--submissions", "/submissions", "--output", "/output", *ARGUMENTS], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    local = tmp_path / "local"
    subprocess.run([sys.executable, "-m", "medchallenge.cli", "leaderboard", "--ground-truth", str(ground_truth),
                    "--submissions", str(submissions), "--output", str(local), *ARGUMENTS], check=True)
    in_docker = json.loads((output / "leaderboard.json").read_text())
    here = json.loads((local / "leaderboard.json").read_text())
    assert in_docker["teams"] == here["teams"] and in_docker["significance"] == here["significance"]
    assert (output / "leaderboard.html").read_text() == (local / "leaderboard.html").read_text()
