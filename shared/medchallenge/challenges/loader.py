"""The one loader of challenges: a built-in name (the definitions the project ships in `builtin/`) or the path of
an organiser's definition (TOML), both read by `read_definition`.

    definition = load_challenge("tb-caverns")               # a built-in
    definition = load_challenge("examples/lung-nodule/challenge.toml")
    builtin_definitions()                                   # {name: ChallengeDefinition} of the shipped ones

The file (docs/own-challenge.md lists every key):

    [challenge]     slug, title
    [interface]     [[interface.inputs]] and [[interface.outputs]]: slug, kind, super_kind, relative_path, title;
                    or pack_context = "pack-context.json" (grand-challenge-forge's, what grand-challenge hands an
                    organiser) and phase = its phase's slug, so that the sockets are not typed twice
    [cases]         patterns: which files of a cases folder are cases (globs, `**` allowed)
    [ground_truth]  patterns: the files the evaluation needs, each matched by at least one file
    [evaluation]    image (a tag) or archive (a `docker save` file beside the definition), or builtin and edition
    [leaderboard]   grand-challenge's phase fields under their own names (score_jsonpath, score_title,
                    score_default_sort, score_decimal_places, score_error_jsonpath, extra_results_columns,
                    scoring_method_choice, result_display_choice), and per column the per-case path and summary
                    the leaderboard bootstraps (score_case_jsonpath, score_case_summary; case_path, summary)
    [limits]        algorithm_requires_memory_gb, algorithm_time_limit, algorithm_cpus, algorithm_requires_gpu,
                    evaluation_requires_memory_gb, evaluation_time_limit

Each case is one image uploaded to the interface's one Image-kind input (as the phase and pre-flight run cases);
an interface of several inputs per case is refused with that reason.
"""

from __future__ import annotations

import functools
import hashlib
import tomllib
from importlib import resources
from pathlib import Path

from ..errors import InputError
from ..jobs.kinds import IMAGE_KINDS, SCHEMAS, super_kinds
from ..jobs.runner import printable
from ..limits import MAX_TEXT_BYTES, load_json
from ..sockets import Interface, Socket
from .definition import (ChallengeDefinition, EvaluationDefinition, LeaderboardDefinition, PhaseLimits,
                         ResultColumn)
from .fields import Table, distinct, file_inside, relative_pattern_problem

MAX_DEFINITION_BYTES = 1 << 20  # a definition file, or the pack-context.json it names
SORT = {"asc": "asc", "ascending": "asc", "desc": "desc", "descending": "desc"}  # Phase.ASCENDING, DESCENDING
SCORING = {"abs": "abs", "absolute": "abs", "avg": "avg", "mean": "avg", "med": "med", "median": "med"}
DISPLAY = {"all": "all", "rec": "rec", "most_recent": "rec", "bst": "bst", "best": "bst"}
SUMMARY = {"mean": "mean", "median": "median"}
MAX_MEMORY_GB = 1024
MAX_TIME_LIMIT_S = 24 * 3600
MAX_CPUS = 256
PHASES_SHOWN = 5  # of a pack context's phases, named in an error line


def read_bounded_text(path: Path, what: str) -> str:
    """The UTF-8 text of the regular file `path`, refused unread above MAX_DEFINITION_BYTES."""
    try:
        if not path.is_file():
            raise InputError(f"{path}: {what} not found (a file)")
        limit = min(MAX_DEFINITION_BYTES, MAX_TEXT_BYTES.value())
        size = path.stat().st_size
        if size > limit:
            raise InputError(f"{path}: {what} of {size} bytes, more than {limit}; not read")
        with path.open("rb") as handle:
            data = handle.read(limit + 1)  # a file growing meanwhile is read no further
        if len(data) > limit:
            raise InputError(f"{path}: {what} of more than {limit} bytes; not read")
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: {what} is not UTF-8 text") from None
    except OSError as exc:
        raise InputError(f"{path}: {what} unreadable ({exc.strerror})") from None


def default_relative_path(slug: str, kind: str) -> str | None:
    """grand-challenge's default relative path of a socket: images/<slug> for an image, <slug>.json for JSON."""
    if kind in IMAGE_KINDS:
        return f"images/{slug}"
    return f"{slug}.json" if kind in SCHEMAS else None


def read_socket(table: Table, extra_keys: tuple[str, ...] = ()) -> Socket:
    """One socket: its slug and kind, its super kind (the kind's first where not given) and relative path (the
    kind's default where not given), checked as grand-challenge checks them (components/models.py)."""
    slug = table.slug("slug")
    kind = table.take("kind", str)
    allowed = super_kinds(kind)
    if not allowed:
        raise table.error("kind", f"{printable(kind, 40)}: not a kind of grand-challenge's (docs/own-challenge.md "
                                  "lists them)")
    super_kind = table.take("super_kind", str, allowed[0])
    if super_kind not in allowed:
        raise table.error("super_kind", f"a {kind} socket is of super kind {' or '.join(allowed)}")
    relative_path = table.take("relative_path", str, default_relative_path(slug, kind))
    if relative_path is None:
        raise table.error("relative_path", f"required for a {kind} socket")
    if relative_pattern_problem(relative_path) or any(c in relative_path for c in "*?[]"):
        raise table.error("relative_path", "expected a relative path (no leading /, no .., no wildcards)")
    if kind in IMAGE_KINDS and not relative_path.startswith("images/"):
        raise table.error("relative_path", "Relative paths for image kinds must start with images/ (grand-challenge)")
    if kind in SCHEMAS and super_kind == "Value" and not relative_path.endswith(".json"):
        raise table.error("relative_path", "Relative paths for JSON kinds must end with .json (grand-challenge)")
    title = table.take("title", str, "")
    for key in extra_keys:  # what grand-challenge's serializer adds, which a pack-context may carry
        table.take(key, (str, int, float, bool, list, dict, type(None)), None)
    table.finish()
    return Socket(slug, kind, super_kind, relative_path, title)


# grand-challenge's ComponentInterfaceSerializer fields beyond a socket's own (a pack-context may hold them)
SERIALIZER_KEYS = ("pk", "description", "default_value", "overlay_segments", "look_up_table", "example_value")


def read_pack_context(path: Path, phase_slug: str | None) -> tuple[tuple[Socket, ...], tuple[Socket, ...]]:
    """The input and output sockets of one phase of grand-challenge-forge's pack-context.json (its schema: a
    challenge of phases, each with `algorithm_interfaces` of inputs and outputs)."""
    where = f"{path}: pack context"
    context = Table(load_json(read_bounded_text(path, "pack context"), where), path, "")
    challenge = context.table("challenge")
    phases = challenge.tables("phases")
    chosen = [p for p in phases if p.data.get("slug") == phase_slug] if phase_slug else phases
    if len(chosen) != 1:
        names = ", ".join(printable(str(p.data.get("slug")), 40) for p in phases[:PHASES_SHOWN])
        names += f" and {len(phases) - PHASES_SHOWN} more" if len(phases) > PHASES_SHOWN else ""
        raise InputError(f"{where}: {'no phase ' + printable(phase_slug, 40) if phase_slug else 'several phases'}"
                         f" (its phases: {names}); [interface] phase names one")
    for key in ("evaluation_additional_inputs", "evaluation_additional_outputs"):
        if chosen[0].take(key, list, []):
            raise chosen[0].error(key, "sockets of the evaluation beyond the algorithm's: not supported here yet")
    interfaces = chosen[0].tables("algorithm_interfaces")
    if len(interfaces) != 1:
        raise InputError(f"{where}: the phase has {len(interfaces)} algorithm interfaces; a phase here runs one")
    sockets = []
    for direction in ("inputs", "outputs"):
        sockets.append(tuple(read_socket(t, SERIALIZER_KEYS) for t in interfaces[0].tables(direction)))
    return sockets[0], sockets[1]


def read_interface(table: Table, source: Path) -> tuple[tuple[Socket, ...], tuple[Socket, ...]]:
    pack_context = file_inside(source, table, "pack_context")
    phase = table.take("phase", str, None)
    if pack_context is not None:
        inputs, outputs = read_pack_context(pack_context, phase)
    else:
        if phase is not None:
            raise table.error("phase", "a phase of a pack_context: name the pack_context too")
        inputs = tuple(read_socket(t) for t in table.tables("inputs"))
        outputs = tuple(read_socket(t) for t in table.tables("outputs"))
    table.finish()
    sockets = (*inputs, *outputs)
    distinct([s.slug for s in sockets], table, "inputs", "socket slug")
    distinct([s.relative_path for s in sockets], table, "inputs", "relative_path")
    images = [s for s in inputs if s.super_kind == "Image"]
    if len(inputs) != 1 or len(images) != 1:
        raise table.error("inputs", f"{len(inputs)} input socket(s): a case here is one image, so the interface "
                                    "has exactly one input, of an image kind")
    if not outputs:
        raise table.error("outputs", "at least one output socket")
    return inputs, outputs


def read_column(table: Table, prefix: str = "") -> ResultColumn:
    """A leaderboard column: the score's (`score_` keys) or one of extra_results_columns (title, path, order)."""
    if prefix:
        path, title = table.json_path("score_jsonpath"), table.take("score_title", str)
        order = table.choice("score_default_sort", SORT, "desc")
        places = table.number("score_decimal_places", 0, 12, 4, whole=True)
        error_path = table.json_path("score_error_jsonpath", None)
        case_path, summary = table.json_path("score_case_jsonpath", None), table.choice("score_case_summary", SUMMARY,
                                                                                        None)
        exclude = False
    else:
        path, title = table.json_path("path"), table.take("title", str)
        order = table.choice("order", SORT, "desc")
        places = table.number("decimal_places", 0, 12, 4, whole=True)
        error_path = table.json_path("error_path", None)
        case_path, summary = table.json_path("case_path", None), table.choice("summary", SUMMARY, None)
        exclude = table.take("exclude_from_ranking", bool, False)
    if (case_path is None) != (summary is None):
        raise table.error("score_case_jsonpath" if prefix else "case_path",
                          "the per-case path and its summary (mean or median) go together")
    return ResultColumn(title, path, order, places, error_path, exclude, case_path, summary)


def read_leaderboard(table: Table) -> LeaderboardDefinition:
    score = read_column(table, prefix="score_")
    extra = []
    for column_table in table.tables("extra_results_columns", []):
        extra.append(read_column(column_table))
        column_table.finish()
    board = LeaderboardDefinition(score, tuple(extra), table.choice("scoring_method_choice", SCORING, "abs"),
                                  table.choice("result_display_choice", DISPLAY, "all"))
    table.finish()
    distinct([c.title for c in board.columns], table, "extra_results_columns", "column title")
    distinct([c.path for c in board.columns], table, "extra_results_columns", "column path")
    return board


def read_evaluation(table: Table, source: Path, outputs: tuple[Socket, ...]) -> EvaluationDefinition:
    builtin = table.take("builtin", str, None)
    edition = table.take("edition", str, None)
    image = table.take("image", str, None)
    archive = file_inside(source, table, "archive")
    table.finish()
    given = [key for key, value in (("builtin", builtin), ("image", image), ("archive", archive)) if value]
    if len(given) != 1:
        raise table.error("", "expected exactly one of builtin, image (a tag) or archive (a `docker save` file)"
                              + (f"; found {' and '.join(given)}" if given else ""))
    if edition is not None and builtin is None:
        raise table.error("edition", "an edition of a builtin evaluator")
    if builtin is not None:
        from ..registry import CHALLENGES  # the built-in evaluators
        if builtin not in CHALLENGES:
            raise table.error("builtin", f"expected one of {', '.join(sorted(CHALLENGES))}")
        editions = [c.edition.suffix for c in CHALLENGES[builtin].configurations]
        if edition is not None and edition not in editions:
            raise table.error("edition", f"{builtin} has {', '.join(repr(e) for e in editions)}")
        missing = [s.slug for s in CHALLENGES[builtin].interface.outputs if s not in outputs]
        if missing:
            raise table.error("builtin", f"the {builtin} evaluator reads the output socket(s) {', '.join(missing)}: "
                                         "declare them in [interface] as that challenge has them")
    return EvaluationDefinition(builtin, edition, image, archive)


def read_limits(table: Table) -> PhaseLimits:
    defaults = PhaseLimits()
    limits = PhaseLimits(
        algorithm_memory_gb=table.number("algorithm_requires_memory_gb", 0.25, MAX_MEMORY_GB,
                                         defaults.algorithm_memory_gb),
        algorithm_time_limit_s=table.number("algorithm_time_limit", 1, MAX_TIME_LIMIT_S,
                                            defaults.algorithm_time_limit_s, whole=True),
        algorithm_cpus=table.number("algorithm_cpus", 1, MAX_CPUS, defaults.algorithm_cpus, whole=True),
        algorithm_gpu=table.take("algorithm_requires_gpu", bool, defaults.algorithm_gpu),
        evaluation_memory_gb=table.number("evaluation_requires_memory_gb", 0.25, MAX_MEMORY_GB,
                                          defaults.evaluation_memory_gb),
        evaluation_time_limit_s=table.number("evaluation_time_limit", 1, MAX_TIME_LIMIT_S,
                                             defaults.evaluation_time_limit_s, whole=True))
    table.finish()
    return limits


def read_definition(source: Path, builtin: bool = False) -> ChallengeDefinition:
    """The definition file `source`, every value checked (InputError: one line naming the file and key)."""
    try:
        data = tomllib.loads(read_bounded_text(source, "challenge definition"))
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{source}: not valid TOML ({printable(str(exc), 120)})") from None
    root = Table(data, source, "")
    challenge = root.table("challenge")
    name, title = challenge.slug("slug"), challenge.take("title", str)
    challenge.finish()
    if builtin != (name in builtin_files()) or builtin and source.stem != name:
        raise challenge.error("slug", "a built-in challenge's name: choose another slug" if not builtin
                              else "a built-in definition named after its file")
    inputs, outputs = read_interface(root.table("interface"), source)
    cases = root.table("cases")
    case_patterns = cases.strings("patterns", relative_pattern_problem)
    cases.finish()
    truth = root.table("ground_truth")
    truth_patterns = truth.strings("patterns", relative_pattern_problem)
    truth.finish()
    evaluation = read_evaluation(root.table("evaluation"), source, outputs)
    leaderboard = read_leaderboard(root.table("leaderboard"))
    limits = read_limits(root.table("limits", required=False))
    root.finish()
    return ChallengeDefinition(name, title, Interface(inputs, outputs, truth_patterns), case_patterns, evaluation,
                               leaderboard, limits, source=None if builtin else source.resolve(), builtin=builtin)


def builtin_files() -> dict[str, Path]:
    """The shipped definition of each built-in challenge, by its name."""
    folder = resources.files("medchallenge.challenges") / "builtin"
    return {Path(str(f)).stem: Path(str(f)) for f in folder.iterdir() if str(f).endswith(".toml")}


@functools.cache
def builtin_definitions() -> dict[str, ChallengeDefinition]:
    return {name: read_definition(path, builtin=True) for name, path in sorted(builtin_files().items())}


def load_challenge(name_or_path: str | Path) -> ChallengeDefinition:
    """A built-in challenge by its name, else the definition file at the path (InputError: one line)."""
    builtins = builtin_definitions()
    if str(name_or_path) in builtins:
        return builtins[str(name_or_path)]
    path = Path(name_or_path)
    if path.suffix != ".toml" and not path.exists():
        raise InputError(f"--challenge {printable(str(name_or_path), 80)}: neither a built-in challenge "
                         f"({', '.join(builtins)}) nor a challenge definition file (.toml)")
    return read_definition(path)


def definition_digest(definition: ChallengeDefinition) -> str:
    """What a phase's evaluations and leaderboard depend on of the definition: all of it, and the size and time of
    its evaluation archive (a new `docker save` under the same name scores again)."""
    archive = definition.evaluation.archive
    stamp = [archive.stat().st_size, archive.stat().st_mtime_ns] if archive is not None else None
    return hashlib.sha256(repr((definition, stamp)).encode()).hexdigest()
