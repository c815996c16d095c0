"""The one loader of challenges: the built-in definitions it ships agree with the registry, the example
definition reads as written, every tool that takes --challenge takes a built-in name or a definition file."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from medchallenge.challenges import builtin_definitions, check_ground_truth, load_challenge
from medchallenge.errors import InputError
from medchallenge.grand_challenge.emulator import ALGORITHMS, definition_spec
from medchallenge.registry import CHALLENGES

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "lung-nodule" / "challenge.toml"


def test_every_built_in_challenge_is_a_shipped_definition_that_agrees_with_the_registry():
    definitions = builtin_definitions()
    assert set(definitions) == set(CHALLENGES)
    for name, definition in definitions.items():
        challenge = CHALLENGES[name]
        assert definition.builtin and definition.source is None and definition.title == challenge.title
        assert definition.interface == challenge.interface
        assert set(definition.case_patterns) == set(challenge.algorithm.plugin().case_patterns)
        assert definition.evaluation.builtin == name
        ranking = importlib.import_module(challenge.evaluator_module).EVALUATOR.ranking
        assert [c.path for c in definition.leaderboard.columns] == [f"aggregates.{m}" for m in ranking]
        assert definition_spec(definition) is ALGORITHMS[name]
        assert load_challenge(name) is definition


def test_the_example_definition_reads_its_sockets_from_the_pack_context():
    definition = load_challenge(EXAMPLE)
    assert not definition.builtin and definition.source == EXAMPLE.resolve()
    context = json.loads((EXAMPLE.parent / "pack-context.json").read_text())
    interface = context["challenge"]["phases"][0]["algorithm_interfaces"][0]
    for sockets, declared in ((definition.interface.inputs, interface["inputs"]),
                              (definition.interface.outputs, interface["outputs"])):
        assert [(s.slug, s.kind, s.super_kind, s.relative_path) for s in sockets] == \
            [(d["slug"], d["kind"], d["super_kind"], d["relative_path"]) for d in declared]
    board = definition.leaderboard
    assert (board.score.order, board.extra_results_columns[0].order) == ("desc", "asc")
    assert definition.limits.algorithm_memory_gb == 4 and definition.limits.evaluation_time_limit_s == 600
    spec = definition_spec(definition)
    assert spec.case_patterns == ("*.mha",) and spec.image == ""


def test_ground_truth_is_checked_against_the_definitions_patterns(tmp_path):
    definition = load_challenge(EXAMPLE)
    with pytest.raises(InputError, match=r"no file matches \*\.mha"):
        check_ground_truth(definition, tmp_path)
    (tmp_path / "lung-001.mha").write_bytes(b"")
    check_ground_truth(definition, tmp_path)
    tb = load_challenge("tb-caverns")
    (tmp_path / "gt_boxes.csv").write_text("")
    with pytest.raises(InputError, match="all_ids.csv"):
        check_ground_truth(tb, tmp_path)


@pytest.mark.parametrize("command", ["preflight", "phase", "leaderboard", "emulator"])
def test_each_tool_says_in_one_line_what_is_neither_a_challenge_nor_a_definition(command, tmp_path, capsys):
    from medchallenge.grand_challenge import emulator
    from medchallenge.leaderboard import main as leaderboard
    from medchallenge.phase import run
    from medchallenge.preflight import run as preflight

    folder = str(tmp_path)
    argv = {"preflight": ["--challenge", "lung", "--image", "x", "--cases", folder, "--output", folder],
            "phase": ["--challenge", "lung", "--submissions", folder, "--cases", folder, "--ground-truth", folder,
                      "--output", str(tmp_path / "out")],
            "leaderboard": ["--challenge", "lung", "--ground-truth", folder, "--submissions", folder, "--output",
                            folder],
            "emulator": ["lung", "--cases", folder, "--work", folder]}[command]
    main = {"preflight": preflight.main, "phase": run.main, "leaderboard": leaderboard, "emulator": emulator.main}
    if command == "phase":
        with pytest.raises(InputError, match="neither a built-in challenge"):
            main[command](argv)
        return
    assert main[command](argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: --challenge lung: neither a built-in challenge (imageclef-caption, ")
