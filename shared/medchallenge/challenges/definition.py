"""A challenge as data: what an organiser declares for one grand-challenge phase, read from a definition file
(TOML, or grand-challenge-forge's `pack-context.json`) or from the definitions the project ships for its built-in
challenges (`medchallenge.challenges.load_challenge`, the one loader).

Field names follow grand-challenge's `Phase` model where one exists, so that an organiser copies them across:
`score_jsonpath`, `score_title`, `score_default_sort`, `score_decimal_places`, `extra_results_columns`,
`scoring_method_choice`, `result_display_choice`, `evaluation_time_limit`, `evaluation_requires_memory_gb`, ...
Every value here has already been checked by the loader: code reading a `ChallengeDefinition` trusts it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..sockets import Interface

SortOrder = Literal["asc", "desc"]  # grand-challenge's Phase.ASCENDING / DESCENDING
ScoringMethod = Literal["abs", "avg", "med"]  # Phase.ABSOLUTE / MEAN (mean position) / MEDIAN (median position)
ResultDisplay = Literal["all", "rec", "bst"]  # Phase.ALL / MOST_RECENT / BEST
CaseSummary = Literal["mean", "median"]


@dataclass(frozen=True)
class ResultColumn:
    """One leaderboard column: a dotted JSON path into metrics.json (grand-challenge's jsonpath semantics), its
    title, its order (asc: lower is better), its decimal places. `case_path`, where given, is the path of the
    same metric inside each per-case entry of metrics.json's `case`, and `summary` says the column is the mean
    or median of those per-case values: the leaderboard then bootstraps the cases for intervals and ranks."""

    title: str
    path: str
    order: SortOrder
    decimal_places: int = 4
    error_path: str | None = None  # score_error_jsonpath / an extra column's error_path: shown as +/-
    exclude_from_ranking: bool = False
    case_path: str | None = None
    summary: CaseSummary | None = None


@dataclass(frozen=True)
class LeaderboardDefinition:
    """The phase's leaderboard fields. `score` is score_jsonpath/score_title/score_default_sort/
    score_decimal_places (and score_error_jsonpath); `extra_results_columns` the further columns in order."""

    score: ResultColumn
    extra_results_columns: tuple[ResultColumn, ...] = ()
    scoring_method_choice: ScoringMethod = "abs"
    result_display_choice: ResultDisplay = "all"

    @property
    def columns(self) -> tuple[ResultColumn, ...]:
        return (self.score, *self.extra_results_columns)

    @property
    def ranked_columns(self) -> tuple[ResultColumn, ...]:
        """The columns a mean or median position ranks over (the score and every extra column not excluded)."""
        return (self.score, *(c for c in self.extra_results_columns if not c.exclude_from_ranking))


@dataclass(frozen=True)
class EvaluationDefinition:
    """How the phase is scored: a built-in evaluator (`builtin`, with its `edition`), or an evaluation container
    speaking grand-challenge's evaluation contract, given as an image tag (`image`) or a `docker save` archive
    (`archive`, verified as a submission's archive is). Exactly one of builtin, image, archive is set."""

    builtin: str | None = None
    edition: str | None = None
    image: str | None = None
    archive: Path | None = None


@dataclass(frozen=True)
class PhaseLimits:
    """What each algorithm job and the evaluation run under, as a grand-challenge phase sets them."""

    algorithm_memory_gb: float = 8
    algorithm_time_limit_s: int = 20 * 60
    algorithm_cpus: int | None = None  # None: the vCPUs of the instance grand-challenge picks for the memory
    algorithm_gpu: bool = False
    evaluation_memory_gb: float = 8
    evaluation_time_limit_s: int = 60 * 60


@dataclass(frozen=True)
class ChallengeDefinition:
    """One challenge phase: its name (a slug), title, interface (input and output sockets; the ground-truth
    patterns, each of which must match at least one file, checked before any job runs), which files of a cases
    folder are cases, how it is scored, ranked and limited. `source` is the file it was read from (None for a
    built-in); `builtin` says it is one of the project's own challenges (which alone have synthetic data,
    algorithm images and a DICOM mapping, in medchallenge.registry)."""

    name: str
    title: str
    interface: Interface
    case_patterns: tuple[str, ...]
    evaluation: EvaluationDefinition
    leaderboard: LeaderboardDefinition
    limits: PhaseLimits = PhaseLimits()
    source: Path | None = None
    builtin: bool = False
