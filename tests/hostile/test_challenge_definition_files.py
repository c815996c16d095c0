"""A hostile challenge definition file: each problem is one InputError line naming the file and the key, nothing
read outside the definition's folder, nothing allocated from a size the file claims (issue 39 section 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medchallenge.challenges import load_challenge
from medchallenge.errors import InputError

VALID = """
[challenge]
slug = "spleen"
title = "Spleen segmentation"

[[interface.inputs]]
slug = "ct-image"
kind = "Image"

[[interface.outputs]]
slug = "spleen-mask"
kind = "Segmentation"

[[interface.outputs]]
slug = "spleen-volume"
kind = "Float"

[cases]
patterns = ["*.mha", "**/*.nii.gz"]

[ground_truth]
patterns = ["*.mha"]

[evaluation]
image = "spleen-evaluation:1"

[leaderboard]
score_jsonpath = "aggregates.dice.mean"
score_title = "Dice"

[[leaderboard.extra_results_columns]]
title = "HD95"
path = "aggregates.hd95.mean"
order = "asc"
"""


def definition(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "challenge.toml"
    path.write_text(text)
    return path


def refused(tmp_path: Path, text: str) -> str:
    path = definition(tmp_path, text)
    with pytest.raises(InputError) as caught:
        load_challenge(path)
    line = str(caught.value)
    named = (f"{path}: ", f"{tmp_path / 'pack-context.json'}: ")  # the definition, or the pack context it names
    assert "\n" not in line and line.startswith(named), line
    return line


def test_the_valid_definition_loads_with_grand_challenges_defaults(tmp_path):
    loaded = load_challenge(definition(tmp_path, VALID))
    mask, volume = loaded.interface.outputs
    assert (mask.super_kind, mask.relative_path) == ("Image", "images/spleen-mask")
    assert (volume.super_kind, volume.relative_path) == ("Value", "spleen-volume.json")
    assert loaded.leaderboard.score.order == "desc" and loaded.leaderboard.extra_results_columns[0].order == "asc"


@pytest.mark.parametrize(("old", "new", "expected"), [
    ('kind = "Segmentation"', 'kind = "Segmentation mask"', r"outputs\[0\] kind: Segmentation mask: not a kind"),
    ('kind = "Float"', 'kind = "Float"\nsuper_kind = "Image"', r"outputs\[1\] super_kind: a Float socket is of super"),
    ('slug = "spleen-volume"', 'slug = "spleen-mask"', "socket slug spleen-mask declared twice"),
    ('slug = "spleen-volume"', 'slug = "ct-image"', "socket slug ct-image declared twice"),
    ('slug = "spleen-mask"', 'slug = "Spleen Mask!"', r"outputs\[0\] slug: expected a slug"),
    ('kind = "Segmentation"', 'kind = "Segmentation"\nrelative_path = "../escape"', "relative_path: expected a rel"),
    ('kind = "Segmentation"', 'kind = "Segmentation"\nrelative_path = "/etc/passwd"', "relative_path: expected a rel"),
    ('kind = "Segmentation"', 'kind = "Segmentation"\nrelative_path = "masks/spleen"', "must start with images/"),
    ('kind = "Float"', 'kind = "Float"\nrelative_path = "volume.txt"', "JSON kinds must end with .json"),
    ('patterns = ["*.mha", "**/*.nii.gz"]', 'patterns = ["../other/*.mha"]', r"\[cases\] patterns: \.\./other"),
    ('patterns = ["*.mha"]', 'patterns = ["/data/*.mha"]', r"\[ground_truth\] patterns: /data/\*\.mha: expected"),
    ('patterns = ["*.mha"]', "patterns = []", r"\[ground_truth\] patterns: expected a non-empty list"),
    ('image = "spleen-evaluation:1"', 'archive = "../evaluation.tar.gz"', "archive: expected a path relative to"),
    ('image = "spleen-evaluation:1"', 'archive = "/etc/hostname"', "archive: expected a path relative to"),
    ('image = "spleen-evaluation:1"', 'archive = "missing.tar.gz"', "archive: missing.tar.gz: not found beside"),
    ('image = "spleen-evaluation:1"', 'image = "a:1"\nbuiltin = "tb-caverns"', "exactly one of builtin, image"),
    ('image = "spleen-evaluation:1"', 'builtin = "tb-caverns"',
     r"builtin: the tb-caverns evaluator reads the output socket\(s\) tb-cavern-boxes"),
    ('image = "spleen-evaluation:1"', "", r"\[evaluation\]: expected exactly one of builtin"),
    ('score_jsonpath = "aggregates.dice.mean"', 'score_jsonpath = "aggregates..dice"', "score_jsonpath: expected"),
    ('score_jsonpath = "aggregates.dice.mean"', 'score_jsonpath = "$.aggregates[0]"', "score_jsonpath: expected"),
    ('path = "aggregates.hd95.mean"', 'path = "aggregates.dice.mean"', "path aggregates.dice.mean declared twice"),
    ('order = "asc"', 'order = "lower"', r"extra_results_columns\[0\] order: expected one of asc, ascending"),
    ('order = "asc"', 'order = "asc"\ncase_path = "hd95"', r"extra_results_columns\[0\] case_path: the per-case path"),
    ('score_title = "Dice"', 'score_title = "Dice"\nscoring_method_choice = "best"', "scoring_method_choice: expected"),
    ('score_title = "Dice"', 'score_title = "Dice"\nscore_decimal_places = 1e9', "score_decimal_places: expected a wh"),
    ('score_title = "Dice"', 'score_title = "Dice"\nscore_decimal_places = 99', "score_decimal_places: expected 0 to"),
    ('score_title = "Dice"', 'score_title = "Dice"\nscore_sort = "desc"', r"\[leaderboard\] score_sort: unknown key"),
    ('title = "Spleen segmentation"', 'title = "Spleen"\nowner = "x"', r"\[challenge\] owner: unknown key"),
    ('slug = "spleen"', 'slug = "tb-caverns"', "slug: a built-in challenge's name"),
    ("[cases]", "[limits]\nalgorithm_requires_memory_gb = 1e6\n\n[cases]", "algorithm_requires_memory_gb: expected"),
    ("[cases]", "[limits]\nalgorithm_time_limit = nan\n\n[cases]", "algorithm_time_limit: expected a whole number"),
    ("[cases]", "[limits]\nevaluation_requires_memory_gb = inf\n\n[cases]", "evaluation_requires_memory_gb: ex"),
    ("[cases]", "[limits]\nalgorithm_requires_gpu = 1\n\n[cases]", "algorithm_requires_gpu: expected true or false"),
])
def test_each_problem_is_one_line_naming_the_file_and_key(tmp_path, old, new, expected):
    assert VALID.count(old) >= 1
    assert __import__("re").search(expected, refused(tmp_path, VALID.replace(old, new, 1)))


def test_an_interface_of_several_inputs_per_case_is_refused_with_the_reason(tmp_path):
    text = VALID.replace("[[interface.outputs]]", '[[interface.inputs]]\nslug = "age"\nkind = "Integer"\n\n'
                                                  "[[interface.outputs]]", 1)
    assert "a case here is one image" in refused(tmp_path, text)


def test_not_toml_not_utf8_too_large_and_a_folder_are_one_line_each(tmp_path):
    assert "not valid TOML" in refused(tmp_path, VALID + "\n[challenge\n")
    path = tmp_path / "challenge.toml"
    path.write_bytes(b"\xff\xfe" + VALID.encode())
    with pytest.raises(InputError, match="not UTF-8 text"):
        load_challenge(path)
    path.write_text(VALID + "#" * (1 << 20))
    with pytest.raises(InputError, match="more than 1048576; not read"):
        load_challenge(path)
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    with pytest.raises(InputError, match="not found"):
        load_challenge(folder)


def pack_context(phases: list) -> dict:
    return {"challenge": {"slug": "spleen", "url": "https://x", "archives": [], "phases": phases}}


def phase(slug: str, inputs: list, outputs: list) -> dict:
    return {"slug": slug, "archive": {"slug": "a", "url": "https://x"},
            "algorithm_interfaces": [{"inputs": inputs, "outputs": outputs}], "evaluation_additional_inputs": [],
            "evaluation_additional_outputs": []}


CT = {"slug": "ct-image", "relative_path": "images/ct", "kind": "Image", "super_kind": "Image", "pk": 3}
MASK = {"slug": "spleen-mask", "relative_path": "images/spleen-mask", "kind": "Segmentation", "super_kind": "Image"}
WITH_PACK = VALID.split("[[interface.inputs]]")[0] + '[interface]\npack_context = "pack-context.json"\n' \
    + "\n[cases]" + VALID.split("[cases]")[1]


def test_a_pack_context_gives_the_sockets_and_its_problems_name_it(tmp_path):
    context = tmp_path / "pack-context.json"
    context.write_text(json.dumps(pack_context([phase("test", [CT], [MASK])])))
    loaded = load_challenge(definition(tmp_path, WITH_PACK))
    assert [s.slug for s in loaded.interface.outputs] == ["spleen-mask"]
    context.write_text(json.dumps(pack_context([phase("a", [CT], [MASK]), phase("b", [CT], [MASK])])))
    assert "several phases (its phases: a, b); [interface] phase names one" in refused(tmp_path, WITH_PACK)
    text = WITH_PACK.replace('pack_context = "pack-context.json"', 'pack_context = "pack-context.json"\nphase = "c"')
    assert "no phase c" in refused(tmp_path, text)
    context.write_text(json.dumps(pack_context([phase("a", [CT], [{**MASK, "kind": "Mask"}])])))
    assert "outputs[0] kind: Mask: not a kind" in refused(tmp_path, WITH_PACK)
    context.write_text(json.dumps(pack_context([{**phase("a", [CT], [MASK]), "evaluation_additional_inputs": [CT]}])))
    assert "evaluation_additional_inputs: sockets of the evaluation beyond the algorithm's" in refused(tmp_path,
                                                                                                     WITH_PACK)
    context.write_text("[" * 100_000)
    assert "nested" in refused(tmp_path, WITH_PACK)
    outside = WITH_PACK.replace('"pack-context.json"', '"../pack-context.json"')
    assert "pack_context: expected a path relative to the definition's folder" in refused(tmp_path, outside)
    (tmp_path / "link.json").symlink_to("/etc/hostname")
    linked = WITH_PACK.replace('"pack-context.json"', '"link.json"')
    assert "pack_context: expected a path relative to the definition's folder" in refused(tmp_path, linked)


def test_a_definition_given_to_phase_run_is_refused_before_anything_is_written(tmp_path):
    from medchallenge.phase.run import main

    bad = definition(tmp_path, VALID.replace('kind = "Float"', 'kind = "Number"'))
    out = tmp_path / "out"
    with pytest.raises(InputError, match="kind: Number: not a kind"):
        main(["--challenge", str(bad), "--submissions", str(bad), "--cases", str(tmp_path), "--ground-truth",
              str(tmp_path), "--output", str(out)])
    assert not out.exists()
