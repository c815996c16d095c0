"""ImageCLEFmed Caption 2021/2022 under Python 3.9's Unicode 13.0 (issue 24): the project's text operations
(medchallenge.official.unicode13) against Python 3.9.18 for every one of the 0x110000 code points, the shipped table
against a fresh one, and the whole caption pipeline of both editions (tokens, BLEU, ROUGE-1, concept F1) against NLTK
3.7, rouge-score 0.1.2 and scikit-learn 1.0.2 on Python 3.9, for every code point assigned after Unicode 13.0, every
code point whose behaviour changed, their case partners and one code point in 16 across the whole range (the 2022
concept F1: every code point), each in contexts where a difference shows (after "cannot", before "gonna", after
"wanna", around a capital sigma, between words, inside a word the 2021 stemmer lower-cases, as a concept)."""

from __future__ import annotations

import importlib.util
import json
import random
import re
import unicodedata

import pytest

from medchallenge.official import unicode13
from medchallenge.metrics import imageclef_caption as m
from reference.envs import REPO

pytestmark = pytest.mark.reference

STOPWORDS = m.load_stopwords()
ALL_CODE_POINTS = 0x110000
SAMPLE_STRIDE = 16  # the range-wide sample of the pipeline test: one code point in 16, at a seeded offset
GROUP = 16  # code points per caption or concept list
WHOLE_RANGE_GROUP = 1024  # code points per concept list when the whole range goes through the 2022 concept F1
PROPERTIES = 8  # lower, sigma class, upper, split whitespace, strip whitespace, \w, \s, (?i): per code point


def _table_tool():
    spec = importlib.util.spec_from_file_location("make_unicode13_table", REPO / "tools" / "make_unicode13_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _table_tool()


@pytest.fixture(scope="module")
def python39_facts(py39) -> dict:
    """What Python 3.9.18 does for every code point (tools/make_unicode13_table.py --dump in the reference venv)."""
    facts = TOOL.run_dump(py39.python)
    assert facts["unidata_version"] == "13.0.0"
    return facts


@pytest.fixture(scope="module")
def runtime_facts() -> dict:
    """What the running interpreter's built-ins do (the same dump, in-process)."""
    return json.loads(json.dumps(TOOL.dump()))


def project_facts() -> dict:
    """What medchallenge.official.unicode13 does for every code point, in the dump's shape."""
    everything = "".join(map(chr, range(ALL_CODE_POINTS)))
    facts: dict = {"lower": {}, "upper": {}, "sigma": {}}
    for cp, ch in enumerate(everything):
        lowered, uppered = unicode13.lower(ch), unicode13.upper(ch)
        if lowered != ch:
            facts["lower"][str(cp)] = lowered
        if uppered != ch:
            facts["upper"][str(cp)] = uppered
        if unicode13.lower("A\u03a3" + ch)[1] == "\u03c3":
            facts["sigma"][str(cp)] = "cased"
        elif unicode13.lower("A\u03a3" + ch + "A")[1] == "\u03c3":
            facts["sigma"][str(cp)] = "ignorable"
    facts["space"] = [cp for cp, ch in enumerate(everything) if unicode13.split(f"a{ch}b") == ["a", "b"]]
    not_stripped = [cp for cp, ch in enumerate(everything) if unicode13.strip(ch) == ""]
    assert not_stripped == facts["space"], "strip() and split() disagree on whitespace"
    facts["word"] = [match.start() for match in re.finditer(unicode13.WORD, everything)]
    facts["re_space"] = [match.start() for match in re.finditer(unicode13.SPACE, everything)]
    facts["ignorecase"] = {letter: "".join(re.findall(unicode13.ignorecase(letter), everything))
                           for letter in "abcdefghijklmnopqrstuvwxyz"}
    return facts


def _differences(expected: dict, found: dict) -> list[tuple[str, str, object, object]]:
    """(property, U+XXXX, Python 3.9's value, the project's) for every code point where they differ."""
    out = []
    for key in ("lower", "upper", "sigma"):
        for cp in sorted(set(expected[key]) | set(found[key]), key=int):
            if expected[key].get(cp) != found[key].get(cp):
                out.append((key, f"U+{int(cp):04X}", expected[key].get(cp), found[key].get(cp)))
    for key in ("space", "word", "re_space"):
        for cp in sorted(set(expected[key]) ^ set(found[key])):
            out.append((key, f"U+{cp:04X}", cp in expected[key], cp in found[key]))
    for letter, chars in expected["ignorecase"].items():
        if found["ignorecase"][letter] != chars:
            out.append(("ignorecase", letter, chars, found["ignorecase"][letter]))
    return out


def test_text_operations_match_python39_on_every_code_point(py39, python39_facts, record):
    """lower (alone and around a capital sigma), upper, whitespace of split/strip, re's \\w and \\s, (?i): the
    project's against Python 3.9.18's, all 0x110000 code points (surrogates included)."""
    found = project_facts()
    mismatches = _differences(python39_facts, found)
    record("unicode13 text operations", py39, ALL_CODE_POINTS * PROPERTIES, mismatches,
           code_points=ALL_CODE_POINTS, properties=PROPERTIES, runtime_unidata=unicodedata.unidata_version)


def test_shipped_table_is_current(py39, python39_facts, runtime_facts, record):
    """The running interpreter's entry of official/data/unicode13.json equals one regenerated now from Python 3.9.18
    and this interpreter, and the running interpreter differs from Python 3.9 where (and only where) the entry says."""
    shipped = json.loads(TOOL.TABLE.read_text(encoding="utf-8"))
    fresh = TOOL.table(python39_facts, [runtime_facts])
    version = unicodedata.unidata_version
    mismatches = [key for key in fresh["runtimes"][version] if key != "python"
                  and fresh["runtimes"][version][key] != shipped["runtimes"][version][key]]
    if fresh["reference"]["ignorecase"] != shipped["reference"]["ignorecase"]:
        mismatches.append("reference ignorecase")
    builtin_differences = len(_differences(python39_facts, runtime_facts))
    record("unicode13 table current", py39, len(fresh["runtimes"][version]) - 1,
           mismatches, runtime_unidata=version, builtin_differences_from_python39=builtin_differences)


# ---------------------------------------------------------------------------------------------------------------
# The whole pipeline
# ---------------------------------------------------------------------------------------------------------------

CONTEXTS = ["cannot{c}", "{c}gonna", "wanna{c}x", "\u0391\u03a3{c}", "\u0391\u03a3{c}\u0391", "\u0391{c}\u03a3",
            "x{c}y", "{c}ations", "{c}", "Gotta{c}"]
LIGHT_CONTEXTS = ["cannot{c}", "\u0391\u03a3{c}", "{c}ations"]


def focus_code_points(python39: dict, runtime: dict) -> list[int]:
    """Every code point assigned after Unicode 13.0 (unassigned in Python 3.9, assigned here), every one whose
    behaviour differs between Python 3.9 and this interpreter's built-ins, and their case partners both ways."""
    added = set(python39["unassigned"]) - set(runtime["unassigned"])
    changed = {int(cp) for key in ("lower", "upper", "sigma") for cp in set(python39[key]) | set(runtime[key])
               if python39[key].get(cp) != runtime[key].get(cp)}
    changed |= {cp for key in ("space", "word", "re_space") for cp in set(python39[key]) ^ set(runtime[key])}
    focus = added | changed
    for cp in list(focus):
        for facts in (python39, runtime):
            for key in ("lower", "upper"):
                focus.update(ord(ch) for ch in facts[key].get(str(cp), ""))
    return sorted(focus)


def sample_code_points(seed: int) -> list[int]:
    """One code point in SAMPLE_STRIDE across the whole range, at a random offset in each stride."""
    rng = random.Random(seed)
    return [start + rng.randrange(SAMPLE_STRIDE) for start in range(0, ALL_CODE_POINTS, SAMPLE_STRIDE)]


def partner(ch: str) -> str:
    """The running interpreter's case partner of a character: upper-case if that changes it, else lower-case."""
    return ch.upper() if ch.upper() != ch else ch.lower()


def caption_pairs(code_points: list[int], contexts: list[str], both_ways: bool) -> list[tuple[str, str]]:
    """Per group of code points, (ground truth, run): every context of every code point, the run with each
    character replaced by its case partner, and when `both_ways` the pair the other way round."""
    pairs = []
    for start in range(0, len(code_points), GROUP):
        chars = [chr(cp) for cp in code_points[start:start + GROUP]]
        truth = " ".join(context.format(c=ch) for ch in chars for context in contexts)
        run = " ".join(context.format(c=partner(ch)) for ch in chars for context in contexts)
        pairs += [(truth, run), (run, truth)] if both_ways else [(truth, run)]
    return pairs


def concept_pairs(code_points: list[int], group: int) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """(ground truth, prediction) concept tuples: per `group` characters, the characters and "C" + each as the
    ground truth, their case partners and "c" + each as the prediction, and the pair the other way round."""
    pairs = []
    for start in range(0, len(code_points), group):
        chars = [chr(cp) for cp in code_points[start:start + group]]
        truth = tuple(f"C{ch}" for ch in chars) + tuple(chars)
        predicted = tuple(f"c{partner(ch)}" for ch in chars) + tuple(partner(ch) for ch in chars)
        pairs += [(truth, predicted), (predicted, truth)]
    return pairs


def whole_range_concepts() -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Every code point of the range as a concept against its case partner, WHOLE_RANGE_GROUP per image."""
    return [(tuple(map(chr, range(start, start + WHOLE_RANGE_GROUP))),
             tuple(partner(chr(cp)) for cp in range(start, start + WHOLE_RANGE_GROUP)))
            for start in range(0, ALL_CODE_POINTS, WHOLE_RANGE_GROUP)]


def ours(gt: str, run: str, stem) -> dict:
    gt22, run22 = m.preprocess_caption(gt, STOPWORDS), m.preprocess_caption(run, STOPWORDS)
    return {"bleu_2022": m.caption_bleu(gt22, run22), "rouge1_2022": m.caption_rouge1(gt22, run22),
            "bleu_2021": m.caption_bleu(m.preprocess_caption(gt, STOPWORDS, stem),
                                        m.preprocess_caption(run, STOPWORDS, stem))}


def test_caption_pipeline_matches_python39_over_unicode(py39, python39_facts, runtime_facts, record):
    """Tokens of both editions, per-image BLEU 2022/2021 and ROUGE-1 2022, from raw captions."""
    focus = focus_code_points(python39_facts, runtime_facts)
    pairs = caption_pairs(focus, CONTEXTS, both_ways=True)
    pairs += caption_pairs(sample_code_points(seed=2413), LIGHT_CONTEXTS, both_ways=False)
    texts = list(dict.fromkeys(text for pair in pairs for text in pair))
    items = [{"text": text, "stem": stem} for text in texts for stem in (False, True)]
    stem = m.snowball_stemmer()
    expected_tokens = py39.run("preprocess", items, stopwords=sorted(STOPWORDS))
    mismatches = [("tokens", item, found, expected) for item, expected in zip(items, expected_tokens)
                  if (found := m.preprocess_caption(item["text"], STOPWORDS, stem if item["stem"] else None))
                  != expected]
    expected_scores = py39.run("caption_image", pairs, stopwords=sorted(STOPWORDS))
    mismatches += [("scores", pair, found, expected) for pair, expected in zip(pairs, expected_scores)
                   if (found := ours(*pair, stem)) != expected]
    record("caption pipeline, Unicode", py39, len(items) + len(pairs), mismatches,
           focus_code_points=len(focus), sampled_code_points=ALL_CODE_POINTS // SAMPLE_STRIDE,
           characters=sum(len(text) for text in texts))


def test_concept_f1_matches_python39_over_unicode(py39, python39_facts, runtime_facts, record):
    """Concept F1 of both editions (upper-casing, strip) over the focus code points (GROUP per image) and the
    range-wide sample (WHOLE_RANGE_GROUP per image), and for 2022 every code point of the range. (The official code
    looks concepts up in tuples: time grows with the square of the concepts per image.)"""
    focus = focus_code_points(python39_facts, runtime_facts)
    pairs_2022 = concept_pairs(focus, GROUP) + whole_range_concepts()
    pairs_2021 = [(";".join(truth), ";".join(predicted)) for truth, predicted in
                  concept_pairs(focus, GROUP) + concept_pairs(sample_code_points(seed=2414), WHOLE_RANGE_GROUP // 2)]
    # 2021: a field holding one character is blank or not by Python 3.9's whitespace
    pairs_2021 += [(chr(cp), "C1") for cp in focus] + [(f" {chr(cp)} ", f"C1;{chr(cp)}") for cp in focus]
    expected_2022 = py39.run("concept_f1_2022", pairs_2022)
    expected_2021 = py39.run("concept_f1_2021", pairs_2021)
    mismatches = [("2022", pair, m.concept_f1_2022(*pair), expected)
                  for pair, expected in zip(pairs_2022, expected_2022) if m.concept_f1_2022(*pair) != expected]
    mismatches += [("2021", pair, m.concept_f1_2021(*pair), expected)
                   for pair, expected in zip(pairs_2021, expected_2021) if m.concept_f1_2021(*pair) != expected]
    record("concept F1, Unicode", py39, len(pairs_2022) + len(pairs_2021), mismatches, focus_code_points=len(focus),
           code_points_as_2022_concepts=ALL_CODE_POINTS, sampled_code_points_2021=ALL_CODE_POINTS // SAMPLE_STRIDE)
