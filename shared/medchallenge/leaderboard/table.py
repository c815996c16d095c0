"""`medchallenge leaderboard`: score every submission, rank them, and show how certain the ranking is.

    medchallenge leaderboard --challenge NAME|FILE [--edition E] --ground-truth GT --submissions DIR --output OUT
        [--metric M] [--bootstrap N] [--bootstrap-seed S] [--bootstrap-level L] [--test auto|wilcoxon|bootstrap]
        [--alpha A] [--records DIR] [-- EVALUATOR OPTIONS]

Every folder under DIR is one submission (its name is the team), scored by the challenge's evaluator as the
evaluator command scores it (records kept per team in OUT/records/<team>, reused on the next run; metrics.json
with bootstrap intervals in OUT/teams/<team>). Ranked by the challenge's official ranking metric (the first of
`Evaluator.ranking` that every submission has, or --metric; higher is better; equal values share the better rank).
Uncertainty, as challengeR (Wiesenfarth et al., Sci Rep 2021) shows it: the same bootstrap resamples of the cases
for every team (paired), each team's percentile interval, its rank in every resample (rank distribution, blob
plot), and one-sided pairwise tests with Holm's adjustment over all ordered pairs (significance map): Wilcoxon
signed-rank over per-case scores where the metric is a mean of per-case scores, else the paired bootstrap.
Writes OUT/leaderboard.json, OUT/leaderboard.csv and OUT/leaderboard.html (static, self-contained, offline).
A challenge defined by a file is scored by its evaluation container and ranked by its leaderboard fields instead
(container_board.py, definition_board.py; `command.py` picks).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib
import io
import logging
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..evaluation import Evaluator, Scored, build_parser, score, write_results
from ..evaluation import bootstrap as boot
from ..io import user_path, write_json_atomic, write_text_atomic
from ..jobs.docker_run import ENGINES
from ..registry import CHALLENGES
from .page import render, team_label
from .significance import bootstrap_greater, holm, kendall_tau_b, wilcoxon_greater

log = logging.getLogger("medchallenge.leaderboard")
TESTS = ("auto", "wilcoxon", "bootstrap")
MAX_PAIRWISE_TEAMS = 100  # the pairwise tests and significance map: among the first of the ranking at most


@dataclass
class Team:
    name: str
    folder: Path
    scored: Scored | None = None
    error: str | None = None
    parsed: argparse.Namespace | None = None  # its evaluator arguments


def build_leaderboard_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="medchallenge leaderboard", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--challenge", required=True, metavar="NAME|FILE",
                        help="a built-in challenge (tb-caverns, ribfrac, object-cxr, imageclef-caption) or the path "
                             "of a challenge definition (TOML): then each submission folder is a team's evaluation "
                             "input, scored by the definition's evaluation container")
    parser.add_argument("--edition", default=None,
                        help="the challenge's configuration (e.g. 2021 for imageclef-caption, legacy for ribfrac)")
    parser.add_argument("--ground-truth", type=user_path, required=True)
    parser.add_argument("--submissions", type=user_path, required=True, help="one folder per submission (team)")
    parser.add_argument("--output", type=user_path, required=True)
    parser.add_argument("--metric", default=None,
                        help="rank by this aggregate (default: the official ranking metric)")
    parser.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="resamples (default 1000)")
    parser.add_argument("--bootstrap-seed", type=int, default=boot.DEFAULT_SEED)
    parser.add_argument("--bootstrap-level", type=float, default=boot.DEFAULT_LEVEL)
    parser.add_argument("--test", choices=TESTS, default="auto",
                        help="pairwise test: wilcoxon (per-case scores), bootstrap (paired resamples of the "
                             "aggregate) or auto: wilcoxon where the metric has per-case scores (default)")
    parser.add_argument("--alpha", type=float, default=0.05,
                        help="significance level: Holm-adjusted p <= alpha, as challengeR decides (default 0.05)")
    parser.add_argument("--records", type=user_path, default=None, help="records folder (default OUT/records)")
    parser.add_argument("--workers", type=int, default=None, help="the evaluator's --workers")
    parser.add_argument("--engine", choices=ENGINES, default="docker",
                        help="the container engine of a definition's evaluation container (default docker)")
    parser.add_argument("--no-progress", action="store_true")
    return parser


@contextlib.contextmanager
def edition_environment(challenge: str, edition: str | None) -> Iterator[None]:
    """With --edition, the configuration's build arguments (the environment its evaluator image runs with) while
    its evaluator's parser takes its defaults; without, the environment as it is (inside an evaluator image: its
    baked configuration)."""
    if edition is None:
        yield
        return
    configurations = {c.edition.suffix: c for c in CHALLENGES[challenge].configurations}
    if edition not in configurations:
        raise InputError(f"--edition {edition!r}: {challenge} has {', '.join(repr(k) for k in configurations)}")
    saved = dict(os.environ)
    os.environ.update(configurations[edition].edition.build_args)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def find_teams(submissions: Path) -> list[Team]:
    if not submissions.is_dir():
        raise InputError(f"{submissions}: not a folder of submissions")
    teams = [Team(p.name, p) for p in sorted(submissions.iterdir())
             if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")]
    if not teams:
        raise InputError(f"{submissions}: no submission folder in it")
    return teams


def score_team(evaluator: Evaluator, args: argparse.Namespace, team: Team, extra: list[str]) -> None:
    """The evaluator command on one submission (records reused), its metrics.json written without intervals
    (added later from the shared resamples); a bad submission is noted, not fatal."""
    argv = ["--input", str(team.folder), "--ground-truth", str(args.ground_truth),
            "--output", str(args.output / "teams" / team.name), "--records", str(args.records / team.name),
            "--no-plots", *(["--no-progress"] if args.no_progress else []),
            *(["--workers", str(args.workers)] if args.workers is not None else []), *extra]
    with edition_environment(args.challenge, args.edition):
        try:
            parsed = build_parser(evaluator).parse_args(argv)
        except SystemExit:
            raise InputError(f"evaluator options {' '.join(extra)!r}: not options of the {args.challenge} "
                             "evaluator") from None
    team.parsed = parsed
    try:
        team.scored = score(evaluator, parsed)
    except InputError as exc:
        team.error = str(exc)
        log.warning("warning: submission %s not ranked: %s", team.name, exc)


def board_metrics(evaluator: Evaluator, teams: list[Team], requested: str | None) -> list[str]:
    """The aggregates to rank by, one board each: --metric, else every official ranking metric (the challenge's
    published boards, `Evaluator.ranking`) that every submission has, the first one the main board."""
    shared = set.intersection(*(set(t.scored.summary.aggregates) for t in teams))
    if requested is not None:
        if requested not in shared:
            raise InputError(f"--metric {requested}: not an aggregate of every submission "
                             f"(shared: {', '.join(sorted(shared)) or 'none'})")
        return [requested]
    metrics = [metric for metric in evaluator.ranking if metric in shared]
    if not metrics:
        raise InputError(f"no official ranking metric ({', '.join(evaluator.ranking)}) in every submission; "
                         "name one with --metric")
    return metrics


def board_stem(metrics: list[str], metric: str) -> str:
    """The file name (without suffix) of a metric's board: `leaderboard` for the first, `leaderboard-<metric>`."""
    return "leaderboard" if metric == metrics[0] else f"leaderboard-{re.sub(r'[^A-Za-z0-9_]', '_', metric)}"


def competition_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks along axis 0, higher value better, ties share the better rank (1 + number strictly better); an
    undefined value (NaN) ranks below every defined one."""
    v = np.where(np.isfinite(values), values, -np.inf)
    return 1 + (v[None, ...] > v[:, None, ...]).sum(axis=1)


def paired_draws(evaluator: Evaluator, teams: list[Team], num_resamples: int, seed: int) -> tuple[list[str], list]:
    """One draw of the ground-truth units for all teams: the units in the first team's order (so a team in that
    order gets the resamples and intervals of `evaluate.py --bootstrap N --bootstrap-seed S`), and per team the
    draws as indices into its own unit order."""
    units = [evaluator.bootstrap_units(t.scored.cases) for t in teams]
    canonical = list(units[0])
    for team, team_units in zip(teams, units):
        if sorted(team_units) != sorted(canonical) or len(set(team_units)) != len(team_units):
            raise InputError(f"submission {team.name}: scored on other cases than {teams[0].name} (same ground "
                             "truth expected)")
    draws = boot.draw_resamples(len(canonical), num_resamples, seed)
    per_team = []
    for team_units in units:
        position = {unit: index for index, unit in enumerate(team_units)}
        per_team.append(np.array([position[u] for u in canonical], dtype=np.int64)[draws])
    return canonical, per_team


def tested_teams(order: np.ndarray) -> np.ndarray:
    """The teams the pairwise tests compare, in leaderboard order (`order`: team indices): the first
    MAX_PAIRWISE_TEAMS of the ranking, for the tests and the significance map grow with the square of the teams."""
    return order[:MAX_PAIRWISE_TEAMS]


def pairwise_tests(evaluator: Evaluator, teams: list[Team], metric: str, replicate: np.ndarray,
                   method: str) -> tuple[str, np.ndarray]:
    """p-values (one-sided: row better than column) for every ordered pair of `teams` (`replicate`: their
    resamples' values, row by row), diagonal NaN, and the test used."""
    scores = [evaluator.unit_scores(t.scored.cases, t.scored.records, metric) if evaluator.unit_scores else None
              for t in teams]
    has_scores = all(s is not None for s in scores)
    if method == "wilcoxon" and not has_scores:
        raise InputError(f"--test wilcoxon: {metric} has no per-case scores; use --test bootstrap")
    use = "wilcoxon" if method == "wilcoxon" or (method == "auto" and has_scores) else "bootstrap"
    n = len(teams)
    p = np.full((n, n), np.nan)
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            if use == "wilcoxon":
                common = sorted(set(scores[i]) & set(scores[j]))
                p[i, j] = wilcoxon_greater([scores[i][u] for u in common], [scores[j][u] for u in common])[1]
            else:
                p[i, j] = bootstrap_greater(replicate[i], replicate[j])
    return use, p


def mean_kendall_tau(observed: np.ndarray, ranks: np.ndarray) -> float | None:
    """challengeR's ranking stability: Kendall's tau between the observed ranking and each resample's, averaged
    (None with fewer than two teams or where every ranking is constant)."""
    if len(observed) < 2:
        return None
    taus = [kendall_tau_b(observed, column) for column in ranks.T]
    finite = [t for t in taus if np.isfinite(t)]
    return float(np.mean(finite)) if finite else None


@dataclass
class Resamples:
    """The paired bootstrap of every team, shared by the boards: the units, each team's replicates of every
    aggregate (in the teams' order) and its intervals."""

    units: list[str]
    values: list[dict[str, np.ndarray]]
    intervals: list[dict[str, Any]]
    seconds: float


def resample_teams(evaluator: Evaluator, args: argparse.Namespace, teams: list[Team]) -> Resamples:
    """The paired bootstrap of every aggregate of every team, once; each team's metrics.json gets its intervals."""
    started = time.perf_counter()
    units, draws = paired_draws(evaluator, teams, args.bootstrap, args.bootstrap_seed)
    values = [boot.replicates(evaluator, t.scored.cases, t.scored.records, d, t.parsed.records)
              for t, d in zip(teams, draws)]
    seconds = time.perf_counter() - started
    intervals = []
    for team, team_values in zip(teams, values):
        intervals.append(boot.intervals(team_values, args.bootstrap_level, args.bootstrap_seed))
        team.scored.meta["bootstrap"] = intervals[-1]
        write_results(evaluator, team.parsed, team.scored)
    return Resamples(units, values, intervals, seconds)


def rank_statistics(ranks: np.ndarray, level: float) -> list[dict[str, Any]]:
    """Per team (rows of `ranks`, its rank in each resample): the median rank, the `level` rank interval, how often
    it ranks first and how often it takes each rank (the blob plot's discs)."""
    distribution = np.array([np.bincount(r, minlength=len(ranks) + 1)[1:] for r in ranks])
    return [{"median_rank": float(np.median(team_ranks)),
             "rank_low": float(np.quantile(team_ranks, (1 - level) / 2)),
             "rank_high": float(np.quantile(team_ranks, 1 - (1 - level) / 2)),
             "p_first": float(np.mean(team_ranks == 1)),
             "rank_distribution": counts.tolist()} for team_ranks, counts in zip(ranks, distribution)]


def significance(names: list[str], test: str, p: np.ndarray, alpha: float, ranked: int) -> dict[str, Any]:
    """The significance map's data: p (row better than column) and Holm's adjustment over all ordered pairs of the
    tested teams (`names`, in leaderboard order, and `p` in that order: tested_teams); `ranked` the number of teams
    ranked, said where more than were tested."""
    off_diagonal = ~np.eye(len(names), dtype=bool)
    adjusted = np.full_like(p, np.nan)
    adjusted[off_diagonal] = holm(p[off_diagonal]) if off_diagonal.any() else []

    def matrix(a: np.ndarray) -> list[list[float | None]]:
        return [[None if not np.isfinite(value) else float(value) for value in row] for row in a]

    return {"test": test, "alternative": "row better than column", "correction": "holm",
            "alpha": alpha, "teams": list(names), "p": matrix(p),
            "p_holm": matrix(adjusted),
            "significant": [[bool(value <= alpha) for value in row] for row in adjusted],
            **({"teams_ranked": ranked} if ranked > len(names) else {})}


def build(evaluator: Evaluator, args: argparse.Namespace, teams: list[Team], failed: list[Team], metric: str,
          resamples: Resamples) -> dict[str, Any]:
    """One board: ranks by `metric`, intervals, rank distributions and pairwise tests."""
    units, values = resamples.units, resamples.values
    replicate = np.array([v.get(metric, np.full(args.bootstrap, np.nan)) for v in values])
    observed = np.array([t.scored.summary.aggregates[metric] for t in teams])
    rank = competition_ranks(observed)
    ranks = competition_ranks(replicate)  # (teams, resamples)
    statistics = rank_statistics(ranks, args.bootstrap_level)
    order = np.lexsort((np.arange(len(teams)), rank))
    tested = tested_teams(order)
    test, p = pairwise_tests(evaluator, [teams[i] for i in tested], metric, replicate[tested], args.test)
    rows = []
    for index in order:
        team = teams[index]
        intervals = resamples.intervals[index]
        interval = intervals.get(metric, {})
        rows.append({
            "team": team.name, "rank": int(rank[index]), "value": float(observed[index]),
            "low": interval.get("low"), "high": interval.get("high"), **statistics[index],
            "aggregates": team.scored.summary.aggregates, "intervals": intervals,
        })
    return {
        "challenge": args.challenge,
        "edition": args.edition,
        "metric": metric,
        "higher_is_better": True,
        "ties": "equal values share the better rank; no tie-break rule of the challenge is known",
        "num_units": len(units),
        "unit": evaluator.resampling_unit,
        "bootstrap": {"n": args.bootstrap, "seed": args.bootstrap_seed, "level": args.bootstrap_level,
                      "paired": True, "seconds": round(resamples.seconds, 3)},
        "mean_kendall_tau": mean_kendall_tau(rank, ranks),
        "teams": rows,
        "significance": significance([teams[i].name for i in tested], test, p, args.alpha, len(teams)),
        "failed": {t.name: t.error for t in failed},
    }


CSV_COLUMNS = ("rank", "team", "value", "low", "high", "median_rank", "rank_low", "rank_high", "p_first", "jobs",
               "jobs_failed", "warnings", "report", "not_ranked")
TEXT_COLUMNS = ("team", "warnings", "report", "not_ranked")


@dataclass(frozen=True)
class TeamNotes:
    """What a phase knows of a team beyond its scores, shown beside it: its jobs and how many failed, its
    pre-flight warnings (convention check, the evaluator's warnings on its values), its report (a path relative to
    the leaderboard's folder) and why it is not ranked (refused, every job failed), if so."""

    jobs: int
    failed: int
    warnings: tuple[str, ...] = ()
    report: str | None = None
    not_ranked: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"jobs": self.jobs, "jobs_failed": self.failed, "warnings": list(self.warnings),
                "report": self.report}


NO_NOTES = {"jobs": None, "jobs_failed": None, "warnings": [], "report": None}


# a spreadsheet evaluates a cell starting so as a formula (OWASP's other two, tab and CR, team_label makes visible)
FORMULA_STARTS = ("=", "+", "-", "@")


def spreadsheet_text(text: str) -> str:
    """A text cell no spreadsheet takes for a formula (OWASP's CSV injection advice: a leading `'`), with
    bidirectional formatting characters made visible (`team_label`)."""
    text = team_label(text)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def leaderboard_csv(board: dict[str, Any]) -> str:
    """The ranking as CSV, then the teams not ranked (no rank, the reason in `not_ranked`); text cells (team names,
    warnings: anyone's text) neutralised by `spreadsheet_text`."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    titles = [column["title"] for column in board.get("columns", [])]  # a definition's board: every column's value
    writer.writerow([*CSV_COLUMNS[:2], spreadsheet_text(board["metric"]), *CSV_COLUMNS[3:],
                     *map(spreadsheet_text, titles)])
    for row in [*board["teams"], *board.get("not_ranked", [])]:
        warnings = row.get("warnings")
        cells = {**row, "value": row.get("value"), "not_ranked": row.get("reason"),
                 "warnings": ("; ".join(warnings) or None) if isinstance(warnings, list) else warnings}
        values = [(row.get("aggregates") or {}).get(title) for title in titles]
        writer.writerow(["" if cells.get(c) is None else spreadsheet_text(str(cells[c])) if c in TEXT_COLUMNS
                         else cells[c] for c in CSV_COLUMNS] + ["" if v is None else v for v in values])
    return out.getvalue()


def write_boards(args: argparse.Namespace, extra: list[str], notes: dict[str, TeamNotes]) -> list[dict[str, Any]]:
    """Score every submission of args.submissions but those `notes` says are not ranked, then one board per
    ranking metric (`board_metrics`) from one paired bootstrap: leaderboard.json, .csv, .html for the first,
    leaderboard-<metric>.* for the others, each naming all (`boards`). `notes`: what a phase knows of each team
    (`TeamNotes`; a team it names that has no folder is listed as not ranked). Returns the boards."""
    boot.check_level(args.bootstrap_level)
    if args.bootstrap < 1:
        raise InputError(f"--bootstrap {args.bootstrap}: the leaderboard needs at least one resample")
    if not 0 < args.alpha < 1:
        raise InputError(f"--alpha {args.alpha}: expected a number between 0 and 1")
    args.records = args.records or args.output / "records"
    evaluator = importlib.import_module(CHALLENGES[args.challenge].evaluator_module).EVALUATOR
    ranked_by_phase = [name for name, note in notes.items() if note.not_ranked is None]
    found = find_teams(args.submissions) if ranked_by_phase or not notes else []  # a phase may have none to rank
    teams = [t for t in found if t.name not in notes or notes[t.name].not_ranked is None]
    for team in teams:
        score_team(evaluator, args, team, extra)
    scored = [t for t in teams if t.scored is not None]
    failed = [t for t in teams if t.error is not None]
    not_ranked = [{"team": name, "reason": note.not_ranked, **note.to_json()} for name, note in notes.items()
                  if note.not_ranked is not None]
    not_ranked += [{"team": t.name, "reason": f"not scored: {t.error}",
                    **(notes[t.name].to_json() if t.name in notes else NO_NOTES)} for t in failed]
    if not scored and not notes:
        first = not_ranked[0] if not_ranked else {"team": "-", "reason": "no submission"}
        raise InputError(f"{args.submissions}: no submission could be ranked ({first['team']}: {first['reason']})")
    if not scored:  # a phase whose every team was refused or failed every job: the board says so
        board = {"challenge": args.challenge, "edition": args.edition, "metric": args.metric or evaluator.ranking[0],
                 "higher_is_better": True, "teams": [], "failed": {t.name: t.error for t in failed},
                 "not_ranked": not_ranked, "boards": []}
        write_json_atomic(args.output / "leaderboard.json", board)
        write_text_atomic(args.output / "leaderboard.csv", leaderboard_csv(board))
        write_text_atomic(args.output / "leaderboard.html", render(board))
        log.info("no submission could be ranked (%d not ranked) -> %s", len(not_ranked),
                 args.output / "leaderboard.html")
        return [board]
    metrics = board_metrics(evaluator, scored, args.metric)
    resamples = resample_teams(evaluator, args, scored)
    boards = []
    for metric in metrics:
        board = build(evaluator, args, scored, failed, metric, resamples)
        for row in board["teams"]:
            row.update(notes[row["team"]].to_json() if row["team"] in notes else NO_NOTES)
        board["not_ranked"] = not_ranked
        board["boards"] = [{"metric": m, "file": f"{board_stem(metrics, m)}.html"} for m in metrics]
        stem = board_stem(metrics, metric)
        write_json_atomic(args.output / f"{stem}.json", board)
        write_text_atomic(args.output / f"{stem}.csv", leaderboard_csv(board))
        write_text_atomic(args.output / f"{stem}.html", render(board))
        boards.append(board)
    board = boards[0]
    for row in board["teams"]:
        log.info("%3d  %-24s %s = %.4f [%.4f, %.4f]  median rank %.1f", row["rank"], team_label(row["team"]),
                 board["metric"], row["value"], row["low"] if row["low"] is not None else float("nan"),
                 row["high"] if row["high"] is not None else float("nan"), row["median_rank"])
    for row in not_ranked:
        log.info("     %-24s not ranked: %s", team_label(row["team"]), team_label(row["reason"]))
    log.info("leaderboard of %d submission(s) -> %s", len(scored), args.output / "leaderboard.html")
    return boards
