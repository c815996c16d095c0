"""What Python 3.9 (TB caverns, ImageCLEFmed Caption) and 3.7 (object-CXR's froc.py) refuse and newer interpreters
accept (issue 32): numbers in decimal digits added to Unicode later, and csv lines with a NUL byte.

* medchallenge.official.numbers against `int()` and `float()` of Python 3.9.18 and 3.7.16 themselves: the shipped
  official/data/decimal_digits.json against one regenerated in the reference environments, every non-ASCII code point
  (alone and around a digit) and a fuzz of number-like texts (signs, underscores, exponents, whitespace of every kind,
  digits of every script: known to Python 3.7, added by 3.9, added after 3.9), each on every interpreter from 3.10 to
  3.13 (the running one for its own version), so the table holds whatever the project runs on.
* The caption and TB csv readers against Python 3.9's `csv.reader` on fuzzed files, NUL bytes anywhere: the same rows,
  or an error naming the line where Python 3.9's reader stopped.
"""

from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from medchallenge.errors import InputError
from medchallenge.formats import imageclef_caption as caption_format
from medchallenge.formats import tb_caverns
from reference.envs import REPO, find_python, unavailable
from reference.official_numbers_probe import parsed

pytestmark = pytest.mark.reference

PROBE = Path(__file__).with_name("official_numbers_probe.py")
RUNTIMES = ["3.10", "3.11", "3.12", "3.13"]
NUMBER_TEXTS = 6000
CSV_FILES = 2000
ASCII_PIECES = list("0123456789") + ["-", "+", "_", ".", "e", "E", " ", "\t", "\n", "\x0b", "\x0c", "\r", "\x1c",
                                     "\x1f", "inf", "nan", "Infinity", "0x1", "1_", "__"]
NOT_DECIMAL = ["\u00b2", "\u00bd", "\u2155", "\u0bf1", "\u2460", "\u200b", "\ufeff", "\u180e", "x", "\U0001d7ce\u0301"]


def _tool():
    spec = importlib.util.spec_from_file_location("make_decimal_digits_table",
                                                  REPO / "tools" / "make_decimal_digits_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _tool()


@pytest.fixture(scope="module")
def official_facts(py39, py37) -> dict[str, dict]:
    """{"3.9.18": dump, "3.7.16": dump}: each official interpreter's digits and whitespace, probed in its own
    reference environment (tools/make_decimal_digits_table.py --dump)."""
    facts = [TOOL.run_dump(env.python) for env in (py39, py37)]
    assert [f["unidata_version"] for f in facts] == ["13.0.0", "11.0.0"]
    return {f["python"]: f for f in facts}


def _digits(facts: dict) -> set[str]:
    return {chr(cp) for points in facts["digits"].values() for cp in points}


def number_texts(count: int, seed: int, facts: dict[str, dict]) -> list[str]:
    """Numbers in every script's digits (one script per number or mixed with ASCII), signs, fractions, exponents,
    underscores, padded with whitespace of every kind; and free mixtures of those pieces and characters that are no
    decimal digits (superscripts, fractions, a combining mark)."""
    rng = random.Random(seed)
    known_37 = sorted(_digits(facts["3.7.16"]))
    added_39 = sorted(_digits(facts["3.9.18"]) - set(known_37))
    added_later = sorted({chr(cp) for cp in range(0x110000) if unicodedata.decimal(chr(cp), None) is not None}
                         - _digits(facts["3.9.18"]) - {str(d) for d in range(10)})
    scripts = [known_37, added_39] + ([added_later] if added_later else [])
    spaces = [chr(cp) for cp in facts["3.9.18"]["space"]] + [" ", "\t", "\n", "\x0b", "\x0c", "\r", "\x1c"]
    texts = []
    while len(texts) < count:
        some_digit = rng.choice(rng.choice(scripts))
        zero = ord(some_digit) - unicodedata.decimal(some_digit)
        block = [chr(zero + d) for d in range(10)]  # a script's digits 0..9 are consecutive code points

        def digits(n: int) -> str:
            mixed = rng.random() < 0.3
            out = "".join(rng.choice(block) if not mixed or rng.random() < 0.5 else str(rng.randrange(10))
                          for _ in range(n))
            return out if rng.random() < 0.9 or n < 2 else out[:1] + "_" + out[1:]

        if rng.random() < 0.6:
            text = rng.choice(["", "", "-", "+"]) + digits(rng.randint(1, 4))
            text += ("." + digits(rng.randint(0, 3))) if rng.random() < 0.4 else ""
            text += (rng.choice("eE") + rng.choice(["", "-", "+"]) + digits(rng.randint(1, 2))) \
                if rng.random() < 0.2 else ""
            if rng.random() < 0.4:
                text = "".join(rng.choices(spaces, k=rng.randint(1, 2))) + text + \
                    "".join(rng.choices(spaces, k=rng.randint(0, 2)))
        else:
            pieces = ASCII_PIECES + spaces + NOT_DECIMAL + block + [chr(rng.randrange(0x80, 0x110000))]
            text = "".join(rng.choices(pieces, k=rng.randint(1, 6)))
        texts.append(text)
    return texts


@pytest.fixture(scope="module")
def texts(official_facts) -> list[str]:
    return number_texts(NUMBER_TEXTS, seed=3209, facts=official_facts)


@pytest.fixture(scope="module")
def official_parses(py39, py37, official_facts, texts) -> dict[str, dict[str, list[str]]]:
    """{"3.9.18": {"int": [...], "float": [...]}, "3.7.16": ...}: the official interpreters' int() and float() of
    every text."""
    envs = dict(zip(official_facts, (py39, py37)))
    return {version: {kind: env.run("parse_numbers", texts, kind=kind) for kind in ("int", "float")}
            for version, env in envs.items()}


def test_shipped_table_is_current(py39, official_facts, record):
    """official/data/decimal_digits.json equals one regenerated now from Python 3.9.18 and 3.7.16."""
    shipped = json.loads(TOOL.TABLE.read_text("utf-8"))
    fresh = TOOL.table(list(official_facts.values()))
    mismatches = [version for version in set(fresh["interpreters"]) | set(shipped["interpreters"])
                  if fresh["interpreters"].get(version) != shipped["interpreters"].get(version)]
    record("decimal digits table current", py39, len(fresh["interpreters"]), mismatches,
           interpreters={v: e["python"] for v, e in fresh["interpreters"].items()})


def _probe(minor: str, texts: list[str]) -> dict:
    """official_numbers_probe.py under Python `minor` (the running interpreter for its own version)."""
    python = sys.executable if f"{sys.version_info[0]}.{sys.version_info[1]}" == minor else find_python(minor)
    if python is None:
        unavailable(f"no Python {minor} found (pyenv); install it with `pyenv install {minor}`")
    result = subprocess.run([str(python), "-I", str(PROBE), str(REPO / "shared")], input=json.dumps(texts),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


@pytest.mark.parametrize("minor", RUNTIMES)
def test_int_and_float_as_the_official_interpreters_on_every_runtime(minor, py39, official_facts, official_parses,
                                                                     texts, record):
    """On Python `minor`: medchallenge.official.numbers reads every non-ASCII code point (as a digit: `int(ch)`; as
    whitespace: `int(ch + "1" + ch)`; `float` of the latter) and every fuzzed text as Python 3.9.18 and 3.7.16 do."""
    found = _probe(minor, texts)
    assert found["python"].startswith(minor + ".")
    mismatches = []
    for version, facts in official_facts.items():
        ours = found[version]
        for value in facts["digits"]:
            mismatches += [("digit", version, f"U+{cp:04X}", value) for cp in
                           set(facts["digits"][value]) ^ set(ours["digits"][value])]
        mismatches += [("space", version, f"U+{cp:04X}") for cp in set(facts["space"]) ^ set(ours["space"])]
        mismatches += [("float", version, f"U+{cp:04X}") for cp in ours["disagree"]]
        for kind in ("int", "float"):
            mismatches += [(kind, version, text, mine, theirs) for text, mine, theirs
                           in zip(texts, ours[kind], official_parses[version][kind]) if mine != theirs]
    read = {version: sum(result != "ValueError" for result in official_parses[version]["float"])
            for version in official_parses}
    record(f"int/float digits, Python {minor}", py39, 2 * (0x110000 - 0x80 + 2 * len(texts)), mismatches,
           runtime=found["python"], runtime_unidata=found["unidata_version"], texts=len(texts),
           texts_read_as_float=read, texts_where_builtins_differ=builtins_differ(texts, official_parses))
    assert all(count > len(texts) // 5 for count in read.values())  # the fuzz reaches numbers, not only errors


def builtins_differ(texts: list[str], official_parses: dict) -> dict[str, int]:
    """Per official interpreter, the texts where the running interpreter's own int() or float() reads otherwise:
    the cases the project would get wrong without medchallenge.official.numbers (required where the running
    interpreter's Unicode is newer: always for Python 3.7's)."""
    counts = {}
    for version, parses in official_parses.items():
        counts[version] = sum(parsed(parse, text) != parses[kind][k] for kind, parse in (("int", int),
                                                                                         ("float", float))
                              for k, text in enumerate(texts))
    python39, python37 = official_parses
    assert counts[python37] > 0 and (counts[python39] > 0 or unicodedata.unidata_version == "13.0.0")
    return counts



# ---------------------------------------------------------------------------------------------------------------
# csv lines with a NUL byte
# ---------------------------------------------------------------------------------------------------------------

CSV_PIECES = ["img1", "C1;C2", "a b", "10", "|", "\t", ",", " ", "\x00", "\x00", "\r", "\"", "x\x00y", "\u2028",
              "\x85", "\x0c", "\u00e9", "\\"]


def csv_texts(count: int, seed: int) -> list[str]:
    """Files of 0 to 6 lines (LF, CRLF, CR, a last line without end); half of them may hold NUL bytes."""
    rng = random.Random(seed)
    without_nul = [piece for piece in CSV_PIECES if "\x00" not in piece]
    texts = []
    for _ in range(count):
        pieces = CSV_PIECES if rng.random() < 0.5 else without_nul
        lines = ["".join(rng.choices(pieces, k=rng.randint(0, 5))) for _ in range(rng.randint(0, 6))]
        ends = [rng.choice(["\n", "\n", "\r\n", "\r"]) for _ in lines]
        text = "".join(line + end for line, end in zip(lines, ends))
        texts.append(text[:-1] if text and rng.random() < 0.2 else text)
    return texts


def _project_rows(read, path: Path) -> dict:
    try:
        return {"rows": read(path)}
    except InputError as error:
        return {"error": str(error)}


def _differs(ours: dict, official: dict, path: Path) -> bool:
    """Rows differ, or only one side stops, or the project's error does not name Python 3.9's line."""
    if "rows" in official or "rows" in ours:
        return ours != official
    return not ours["error"].startswith(f"{path}: line {official['line']}: line contains NUL")


@pytest.mark.parametrize("reader", ["caption |", "caption TAB", "tb_caverns ,"])
def test_csv_readers_stop_at_a_nul_as_python_3_9(reader, py39, tmp_path, record):
    """The caption readers (text mode, '|' or TAB) and the TB caverns readers (newline='', ',') against Python 3.9's
    csv.reader(QUOTE_NONE) over the same file: the same rows, or an error at the line where Python 3.9 stopped."""
    texts = csv_texts(CSV_FILES, seed=3208)
    delimiter = {"caption |": "|", "caption TAB": "\t", "tb_caverns ,": ","}[reader]
    if reader.startswith("caption"):
        newline = None

        def read(path: Path) -> list[list[str]]:
            return [row.fields for row in caption_format.read_rows(path, delimiter)]
    else:
        newline = ""
        read = tb_caverns._read_rows
    expected = py39.run("csv_rows", texts, delimiter=delimiter, newline=newline)
    path = tmp_path / "file.csv"
    mismatches = []
    for text, official in zip(texts, expected):
        path.write_bytes(text.encode("utf-8"))
        ours = _project_rows(read, path)
        if _differs(ours, official, path):
            mismatches.append((text, ours, official))
    stopped = sum("error" in official for official in expected)
    record(f"csv NUL, {reader}", py39, len(texts), mismatches, stopped_by_nul=stopped)
    assert CSV_FILES // 4 < stopped < CSV_FILES * 3 // 4
