"""Submissions with the same jobs (one image on several teams) are evaluated once (issue 37, item 11): `phase run`
names them in one evaluation step, which scores the first and gives the others a copy, each under its own name."""

from __future__ import annotations

import json
from pathlib import Path

from phase_records import image_archive, object_centres, record_jobs

from medchallenge.phase import evaluate, leaderboard
from medchallenge.phase.layout import PhaseLayout
from medchallenge.phase.run import build_parser, plan, same_jobs
from medchallenge.synth.__main__ import main as synth_main

TWINS = ["twin-a", "twin-b", "twin-c"]


def _phase(root: Path) -> tuple[PhaseLayout, list]:
    """An object-CXR phase of three teams on one archive and one of their own, every job recorded as run."""
    assert synth_main(["object-cxr-images", "--out", str(root / "cohort"), "--images", "6", "--size", "96",
                       "--seed", "5"]) == 0
    folder = root / "submissions"
    folder.mkdir()
    image_archive(folder / "shared.tar", "shared")
    image_archive(folder / "own.tar", "own")
    lines = [f'[[submission]]\nteam = "{team}"\nimage = "shared.tar"\n' for team in TWINS]
    lines.append('[[submission]]\nteam = "own"\nimage = "own.tar"\n')
    (folder / "submissions.toml").write_text("\n".join(lines))
    argv = ["--challenge", "object-cxr", "--submissions", str(folder / "submissions.toml"), "--cases",
            str(root / "cohort" / "input"), "--ground-truth", str(root / "cohort" / "ground_truth"), "--output",
            str(root / "out"), "--bootstrap", "40", "--no-progress"]
    layout = PhaseLayout.of(root / "out")
    planned = plan(build_parser().parse_args(argv), layout)
    centres = object_centres(root / "cohort" / "ground_truth")
    record_jobs(layout.out, TWINS[0], centres, found=0.8, seed=1, size=96)
    record_jobs(layout.out, "own", centres, found=0.5, seed=2, size=96)
    return layout, planned


def test_teams_on_one_image_are_grouped_and_scored_once(tmp_path, monkeypatch):
    layout, planned = _phase(tmp_path)
    assert [teams for teams, _ in same_jobs(planned)] == [TWINS, ["own"]]
    scored = []
    original = evaluate.evaluate
    monkeypatch.setattr(evaluate, "evaluate", lambda records, team: (scored.append(team), original(records, team))[1])
    assert evaluate.main([str(layout.out), *TWINS]) == 0
    assert evaluate.main([str(layout.out), "own"]) == 0
    assert scored == [TWINS[0], "own"]
    reports = {team: json.loads((layout.submission(team) / "report.json").read_text()) for team in [*TWINS, "own"]}
    for team in TWINS[1:]:
        assert {**reports[team], "team": TWINS[0]} == reports[TWINS[0]]
        assert reports[team]["team"] == team
        assert f"Submission {team}" in (layout.submission(team) / "report.html").read_text()
        assert ((layout.submission(team) / "evaluation" / "metrics.json").read_bytes()
                == (layout.submission(TWINS[0]) / "evaluation" / "metrics.json").read_bytes())
        state = json.loads(layout.evaluation_state(team).read_text())
        assert state["status"] == "evaluated" and state["fingerprint"] is not None
    assert reports["own"]["evaluation"] != reports[TWINS[0]]["evaluation"]
    # a rerun finds every evaluation current, and one team's evaluation removed is copied again, not scored
    scored.clear()
    layout.evaluation_state(TWINS[2]).unlink()
    assert evaluate.main([str(layout.out), *TWINS]) == 0
    assert scored == [] and layout.evaluation_state(TWINS[2]).is_file()
    assert leaderboard.main([str(layout.out)]) == 0
    board = json.loads((layout.out / "leaderboard.json").read_text())
    rows = {row["team"]: row for row in board["teams"]}
    assert len({rows[team]["value"] for team in TWINS}) == 1
    assert len({rows[team]["rank"] for team in TWINS}) == 1


def test_one_refused_team_of_several_is_one_error_line_and_the_others_are_evaluated(tmp_path, capsys):
    layout, _ = _phase(tmp_path)
    record = layout.submission_file("own")
    submission = json.loads(record.read_text())
    record.write_text(json.dumps({**submission, "refused": "a test's refusal"}))
    assert evaluate.main([str(layout.out), "own", *TWINS]) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert errors == ["error: submission own: refused before any job: a test's refusal"]
    assert all(json.loads(layout.evaluation_state(t).read_text())["status"] == "evaluated" for t in TWINS)
