"""A phase's bookkeeping and leaderboard from recorded jobs, without a container (tests/phase_records.py): every
record read once per command, task specs not rewritten or reread when unchanged, the evaluations' bootstrap replicates
reused by the leaderboard, and a leaderboard that shows what happened (failed jobs, warnings, reports, refused and
all-failed teams not ranked, one board per official ranking metric). The page in Chromium:
tests/test_leaderboard_page.py."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from phase_records import object_centres, record_jobs, submissions_file

from medchallenge.evaluation import bootstrap
from medchallenge.phase import evaluate, leaderboard, plan, records, status
from medchallenge.phase.layout import PhaseLayout
from medchallenge.phase.run import build_parser
from medchallenge.phase.run import plan as plan_phase
from medchallenge.synth.__main__ import main as synth_main

CASES = 12
SIZE = 96
TEAMS = {"good": {"found": 1.0}, "swapped": {"found": 1.0, "swap_xy": True},
         "partial": {"found": 0.6, "failed_every": 4}, "allfail": {"found": 1.0, "failed_every": 1}}


@pytest.fixture(scope="module")
def phase(tmp_path_factory) -> tuple[PhaseLayout, list[str]]:
    """A planned object-CXR phase (four teams and a refused one) whose jobs are recorded as run; (layout, the
    `phase run` arguments)."""
    root = tmp_path_factory.mktemp("phase")
    assert synth_main(["object-cxr-images", "--out", str(root / "cohort"), "--images", str(CASES), "--size",
                       str(SIZE), "--seed", "3"]) == 0
    toml = submissions_file(root / "submissions", list(TEAMS), ["refused"])
    argv = ["--challenge", "object-cxr", "--submissions", str(toml), "--cases", str(root / "cohort" / "input"),
            "--ground-truth", str(root / "cohort" / "ground_truth"), "--output", str(root / "out"), "--bootstrap",
            "50", "--no-progress"]
    layout = PhaseLayout.of(root / "out")
    plan_phase(build_parser().parse_args(argv), layout)
    centres = object_centres(root / "cohort" / "ground_truth")
    for seed, (team, how) in enumerate(TEAMS.items()):
        record_jobs(layout.out, team, centres, seed=seed, size=SIZE, **how)
    return layout, argv


@pytest.fixture(scope="module")
def ranked(phase) -> PhaseLayout:
    """The phase evaluated and ranked."""
    layout, _ = phase
    for team in TEAMS:
        assert evaluate.main([str(layout.out), team]) == 0
    assert leaderboard.main([str(layout.out)]) == 0
    return layout


def test_planning_again_neither_rewrites_nor_rereads_unchanged_task_specs(phase, monkeypatch):
    layout, argv = phase
    specs = sorted(layout.tasks.glob("*.json"))
    stamps = [p.stat().st_mtime_ns for p in specs]
    compared = []
    original = plan.write_if_changed
    monkeypatch.setattr(plan, "write_if_changed",
                        lambda path, value, **kw: (compared.append(path), original(path, value, **kw))[1])
    plan_phase(build_parser().parse_args(argv), layout)
    assert [p.stat().st_mtime_ns for p in specs] == stamps
    assert all(path.name == "submission.json" for path in compared) and len(compared) == len(TEAMS) + 1
    specs[0].unlink()  # a spec gone: its submission's specs are written again
    compared.clear()
    plan_phase(build_parser().parse_args(argv), layout)
    assert specs[0].is_file() and len(compared) == len(TEAMS) + 1 + CASES


def test_phase_status_and_the_leaderboards_check_read_each_jobs_state_once(ranked, monkeypatch):
    reads = []
    original = records.read_state
    monkeypatch.setattr(records, "read_state",
                        lambda layout, job_id: (reads.append(job_id), original(layout, job_id))[1])
    result = status.phase_status(ranked)
    assert result["leaderboard"] is not None  # complete and current: every evaluation's fingerprint checked too
    assert sorted(reads) == sorted({p.parent.name for p in ranked.out.glob("jobs/*/state.json")})
    assert len(reads) == len(TEAMS) * CASES


def test_the_leaderboard_reuses_each_evaluations_bootstrap_replicates(ranked, monkeypatch):
    assert all(list((ranked.out / "records" / team).glob("bootstrap-*.npz")) for team in TEAMS)

    def no_resampling(*_):
        raise AssertionError("resampled again")

    monkeypatch.setattr(bootstrap, "_replicates", no_resampling)
    for path in leaderboard.board_files(ranked.out):
        path.unlink(missing_ok=True)
    assert leaderboard.main([str(ranked.out)]) == 0
    board = json.loads((ranked.out / "leaderboard.json").read_text())
    for row in board["teams"]:
        metrics = json.loads((ranked.out / "submissions" / row["team"] / "evaluation" / "metrics.json").read_text())
        assert row["intervals"] == metrics["meta"]["bootstrap"]


def test_the_leaderboard_shows_failed_jobs_warnings_and_reports_and_lists_teams_not_ranked(ranked):
    boards = {metric: json.loads((ranked.out / name).read_text())
              for metric, name in (("auc", "leaderboard.json"), ("froc", "leaderboard-froc.json"))}
    for metric, board in boards.items():
        assert board["metric"] == metric
        assert board["boards"] == [{"metric": "auc", "file": "leaderboard.html"},
                                   {"metric": "froc", "file": "leaderboard-froc.html"}]
        rows = {row["team"]: row for row in board["teams"]}
        assert sorted(rows) == ["good", "partial", "swapped"]
        assert (rows["partial"]["jobs_failed"], rows["partial"]["jobs"]) == (CASES // 4, CASES)
        assert (rows["good"]["jobs_failed"], rows["good"]["warnings"]) == (0, [])
        for team, row in rows.items():
            assert row["report"] == f"submissions/{team}/report.html" and (ranked.out / row["report"]).is_file()
        assert any(w.startswith("convention check: ") and "swapped" in w for w in rows["swapped"]["warnings"])
        not_ranked = {row["team"]: row for row in board["not_ranked"]}
        assert list(not_ranked) == ["allfail", "refused"]
        assert not_ranked["allfail"]["reason"] == f"every job failed ({CASES} of {CASES})"
        assert not_ranked["refused"]["reason"].startswith("refused before any job: image archive refused.tar: ")
    assert boards["froc"]["teams"][0]["team"] != "swapped"  # its points are off: FROC ranks it low
    csv_rows = list(csv.DictReader((ranked.out / "leaderboard.csv").open()))
    assert [row["team"] for row in csv_rows][-2:] == ["allfail", "refused"]
    assert csv_rows[-1]["not_ranked"].startswith("refused before any job") and csv_rows[-1]["rank"] == ""
    html = (ranked.out / "leaderboard-froc.html").read_text()
    assert 'href="leaderboard.html"' in html and 'href="submissions/partial/report.html"' in html


def test_a_refusal_that_changes_makes_the_leaderboard_due_again(ranked):
    before = leaderboard.leaderboard_fingerprint(records.PhaseRecords(ranked), {})
    submission = json.loads(ranked.submission_file("refused").read_text())
    try:
        ranked.submission_file("refused").write_text(json.dumps({**submission, "refused": "another reason"}))
        assert leaderboard.leaderboard_fingerprint(records.PhaseRecords(ranked), {}) != before
    finally:
        ranked.submission_file("refused").write_text(json.dumps(submission))


def test_the_records_of_a_command_are_read_once_and_a_new_reading_sees_changes(ranked, tmp_path):
    snapshot = records.PhaseRecords(ranked)
    job = json.loads(ranked.submission_file("good").read_text())["jobs"][0]["job_id"]
    first = snapshot.state(job)
    path = ranked.state(job)
    saved = path.read_text()
    try:
        path.write_text(json.dumps({**first, "status": "interrupted"}))
        assert snapshot.state(job) == first
        assert records.PhaseRecords(ranked).state(job)["status"] == "interrupted"
    finally:
        path.write_text(saved)
    assert Path(snapshot.phase["ground_truth"]).is_dir() and snapshot.ground_truth_stamp


def test_a_phase_in_which_no_team_can_be_ranked_still_gets_its_board_listing_why(tmp_path):
    from medchallenge.leaderboard.table import TeamNotes, build_leaderboard_parser, write_boards

    (tmp_path / "inputs").mkdir()
    args = build_leaderboard_parser().parse_args([
        "--challenge", "object-cxr", "--ground-truth", str(tmp_path), "--submissions", str(tmp_path / "inputs"),
        "--output", str(tmp_path / "out"), "--bootstrap", "10", "--no-progress"])
    notes = {"sloth": TeamNotes(jobs=4, failed=4, not_ranked="every job failed (4 of 4)"),
             "bad": TeamNotes(jobs=0, failed=0, not_ranked="refused before any job: not an archive")}
    [board] = write_boards(args, [], notes)
    written = json.loads((tmp_path / "out" / "leaderboard.json").read_text())
    assert written == board and written["teams"] == []
    assert [(row["team"], row["reason"]) for row in written["not_ranked"]] == [
        ("sloth", "every job failed (4 of 4)"), ("bad", "refused before any job: not an archive")]
    rows = list(csv.DictReader((tmp_path / "out" / "leaderboard.csv").open()))
    assert [(row["team"], row["rank"], row["not_ranked"]) for row in rows] == [
        ("sloth", "", "every job failed (4 of 4)"), ("bad", "", "refused before any job: not an archive")]
    page = (tmp_path / "out" / "leaderboard.html").read_text()
    assert "No team could be ranked" in page and page.count("<tr><td>") == 2


def test_an_organisers_definition_scored_by_a_built_in_evaluator_ranks_as_the_built_in_does(ranked, phase,
                                                                                              tmp_path):
    """A definition file of its own (slug, title) with object-CXR's sockets and `builtin = "object-cxr"`: the same
    jobs, evaluations and leaderboard values as the built-in phase."""
    from medchallenge.challenges.loader import builtin_files

    _, argv = phase
    definition = tmp_path / "my-cxr.toml"
    definition.write_text(builtin_files()["object-cxr"].read_text().replace('slug = "object-cxr"', 'slug = "my-cxr"'))
    own = [*argv]
    own[own.index("--challenge") + 1] = str(definition)
    own[own.index("--output") + 1] = str(tmp_path / "out")
    layout = PhaseLayout.of(tmp_path / "out")
    plan_phase(build_parser().parse_args(own), layout)
    centres = object_centres(Path(own[own.index("--ground-truth") + 1]))
    for seed, (team, how) in enumerate(TEAMS.items()):
        record_jobs(layout.out, team, centres, seed=seed, size=SIZE, **how)
        assert evaluate.main([str(layout.out), team]) == 0
    assert leaderboard.main([str(layout.out)]) == 0
    board = json.loads((layout.out / "leaderboard.json").read_text())
    built_in = json.loads((ranked.out / "leaderboard.json").read_text())
    assert [(r["team"], r["value"], r["low"], r["high"]) for r in board["teams"]] == \
        [(r["team"], r["value"], r["low"], r["high"]) for r in built_in["teams"]]
    assert json.loads(layout.phase_file.read_text())["challenge"] == "my-cxr"
