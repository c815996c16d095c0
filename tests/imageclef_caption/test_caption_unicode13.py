"""Caption text handling as on Python 3.9 (Unicode 13.0), whatever the running interpreter:
medchallenge.official.unicode13 on characters whose behaviour changed in Unicode 14, its effect on the caption metrics,
and a guard that the caption modules use no Unicode-dependent built-in directly (tests/reference compares every code
point with Python 3.9)."""

from __future__ import annotations

import ast
import random
import re
import unicodedata
from pathlib import Path

import pytest

import medchallenge
from medchallenge.official import unicode13
from medchallenge.official.unicode_tables import load
from medchallenge.metrics import imageclef_caption as m

STOPWORDS = m.load_stopwords()
NEW_IN_14 = "\U0001e290"  # TOTO LETTER PA (Unicode 14.0): not a word character for Python 3.9's re
CAPITAL_NEW_IN_14, SMALL_NEW_IN_14 = "\ua7c0", "\ua7c1"  # LATIN CAPITAL / SMALL LETTER OLD POLISH O (14.0)
CASED_NEW_IN_14 = "\U00010597"  # VITHKUQI SMALL LETTER A (14.0): cased in 3.11, unassigned in 3.9
PAMUDPOD = "\u1734"  # HANUNOO SIGN PAMUDPOD: case-ignorable (Mn) in 13.0, not (Mc) in 14.0


def test_case_mapping_of_letters_added_in_unicode_14_is_python39s():
    assert unicode13.upper(SMALL_NEW_IN_14) == SMALL_NEW_IN_14
    assert unicode13.lower(CAPITAL_NEW_IN_14) == CAPITAL_NEW_IN_14
    assert unicode13.upper("x" + SMALL_NEW_IN_14 + "ß") == "X" + SMALL_NEW_IN_14 + "SS"  # the rest as usual
    assert unicode13.lower("İ" + CAPITAL_NEW_IN_14) == "i\u0307" + CAPITAL_NEW_IN_14


def test_final_sigma_reads_unicode_13_classes():
    assert unicode13.lower("ΑΣ" + CASED_NEW_IN_14) == "ας" + CASED_NEW_IN_14  # not cased in 13.0: sigma final
    assert unicode13.lower("ΑΣ" + PAMUDPOD + "Α") == "ασ" + PAMUDPOD + "α"  # case-ignorable in 13.0: skipped
    assert unicode13.lower("ΑΣ Α" + CAPITAL_NEW_IN_14 + "Σ") == "ας α" + CAPITAL_NEW_IN_14 + "σ"
    assert unicode13.lower("ΑΣ") == "ας" and unicode13.lower("Σ") == "σ"


def test_regex_classes():
    assert re.fullmatch(unicode13.WORD, "a") and re.fullmatch(unicode13.WORD, "_")
    assert re.fullmatch(unicode13.WORD, NEW_IN_14) is None
    assert re.fullmatch(unicode13.SPACE, "\u3000") and re.fullmatch(unicode13.SPACE, "x") is None
    assert re.fullmatch(unicode13.ignorecase("kis"), "\u212a\u0130\u017f")  # KELVIN SIGN, İ, LONG S
    # the contraction pattern relies on this: every character of a (?i) class is a word character
    table = load(unicode13.DATA_FILE)
    for letter, chars in table["reference"]["ignorecase"].items():
        assert re.fullmatch(unicode13.ignorecase(letter), letter.upper())
        assert all(re.fullmatch(unicode13.WORD, ch) for ch in chars), letter


def test_contraction_patterns_agree_where_the_builtin_one_is_used():
    """The as-written pattern (ASCII text, or no character classed differently) and the Python 3.9 one split alike
    there; they differ only on a character whose class changed."""
    rng = random.Random(24)
    pieces = ["cannot", "CanNot", "gonna", "wanna", "wanna ", "gimme", "lemme", "gotta", "can", "not", "x", "_", "1",
              "é", "ı", "ſ", "\u212a", "\u0130", " ", "\u3000", "\u2028", "\u0301", "\u1734"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))) for _ in range(4000)]
    for text in texts:
        assert unicode13.builtin_regex_exact(text)
        padded = " " + text + " "
        assert (m._TREEBANK_CONTRACTIONS.sub(m._split_contraction, padded)
                == m._TREEBANK_CONTRACTIONS_PYTHON39.sub(m._split_contraction, padded)), text
    assert not unicode13.builtin_regex_exact("cannot" + NEW_IN_14)
    assert m._TREEBANK_CONTRACTIONS_PYTHON39.sub(m._split_contraction, "cannot" + NEW_IN_14) == " can not " + NEW_IN_14
    assert m._TREEBANK_CONTRACTIONS.sub(m._split_contraction, "cannot" + NEW_IN_14) == "cannot" + NEW_IN_14


def test_whitespace_functions_follow_str():
    text = "\u3000 a\u00a0b\x1c c \u2028"
    assert unicode13.split(text) == text.split() and unicode13.strip(text) == text.strip()


def test_concept_f1_compares_as_python39():
    # U+A7C0 and U+A7C1 are one concept after upper() in Python 3.11, two in 3.9: F1 0.5, not 1.0
    assert m.concept_f1_2022((CAPITAL_NEW_IN_14, "C1"), (SMALL_NEW_IN_14, "C1")) == 0.5
    assert m.concept_f1_2021(CAPITAL_NEW_IN_14 + ";C1", SMALL_NEW_IN_14 + ";c1") == 0.5


def test_tokens_split_as_nltk_37_on_python39():
    # "cannot" then a letter unknown to Unicode 13: \b holds, "can" "not" split and both are stop words
    assert m.preprocess_caption("cannot" + NEW_IN_14 + " lesion", STOPWORDS) == [NEW_IN_14, "lesion"]
    assert m.preprocess_caption("cannot" + "é lesion", STOPWORDS) == ["cannoté", "lesion"]


def test_stemmer_lower_cases_as_python39():
    stem = m.snowball_stemmer()
    assert stem(CAPITAL_NEW_IN_14) == CAPITAL_NEW_IN_14  # 3.11's lower() would give U+A7C1
    assert stem("Lesions") == "lesion"


def test_table_has_an_entry_for_this_interpreter_and_unknown_versions_fail(monkeypatch):
    table = load(unicode13.DATA_FILE)
    assert unicodedata.unidata_version in table["runtimes"]
    assert table["reference"]["unidata_version"] == "13.0.0"
    monkeypatch.setattr(unicodedata, "unidata_version", "99.0.0")
    with pytest.raises(RuntimeError, match="no entry for Unicode 99.0.0"):
        unicode13._load_entry()


# Built-in operations whose result depends on the interpreter's Unicode database: the caption modules must not call
# them on text (they go through medchallenge.official.unicode13), nor use re's \w \W \b \B \s \S \d \D or re.IGNORECASE.
UNICODE_METHODS = {"lower", "upper", "casefold", "title", "capitalize", "swapcase", "isalpha", "isalnum", "isdigit",
                   "isdecimal", "isnumeric", "isspace", "isidentifier", "isprintable", "islower", "isupper",
                   "istitle", "splitlines"}
WHITESPACE_METHODS = {"split", "rsplit", "strip", "lstrip", "rstrip"}  # without a separator argument
UNICODE_REGEX = re.compile(r"\\[wWbBsSdD]|\(\?[a-zA-Z]*i")
CAPTION_MODULES = ["metrics/imageclef_caption.py", "formats/imageclef_caption.py", "evaluators/imageclef_caption.py"]
ALLOWED = {("evaluators/imageclef_caption.py", "resolve_spacy_model")}  # an exception's message, not scored text


def _uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    functions = {node: node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}

    def enclosing(node) -> str:
        while node in parents:
            node = parents[node]
            if node in functions:
                return functions[node]
        return "<module>"

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            on_unicode13 = isinstance(node.func.value, ast.Name) and node.func.value.id == "unicode13"
            no_separator = not node.args or (isinstance(node.args[0], ast.Constant) and node.args[0].value is None)
            if not on_unicode13 and (name in UNICODE_METHODS or (name in WHITESPACE_METHODS and no_separator)):
                found.append((enclosing(node), f"line {node.lineno}: .{name}()"))
            if isinstance(node.func.value, ast.Name) and node.func.value.id == "re" and node.args \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str) \
                    and UNICODE_REGEX.search(node.args[0].value):
                found.append((enclosing(node), f"line {node.lineno}: re.{name}({node.args[0].value!r})"))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "re" \
                and node.attr in {"I", "IGNORECASE", "U", "UNICODE"}:
            found.append((enclosing(node), f"line {node.lineno}: re.{node.attr}"))
    return [f"{where}: {what}" for where, what in found if (path.name, where) not in
            {(Path(module).name, function) for module, function in ALLOWED}]


@pytest.mark.parametrize("module", CAPTION_MODULES)
def test_caption_modules_use_no_unicode_dependent_builtin(module):
    path = Path(medchallenge.__file__).parent / module
    assert _uses(path) == []


def test_the_guard_finds_what_it_guards(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import re\nP = re.compile(r'\\bx')\ndef f(t):\n    return t.lower().split(), t.split(';'), "
                      "re.sub('(?i)a', '', t), t.strip(), unicode13.lower(t)\n")
    assert {use.split(": ", 1)[1] for use in _uses(sample)} == {
        "line 2: re.compile('\\\\bx')", "line 4: .split()", "line 4: re.sub('(?i)a')", "line 4: .strip()",
        "line 4: .lower()"}
