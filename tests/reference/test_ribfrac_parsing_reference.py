"""RibFrac CSV reading (docs/metrics/ribfrac.md §1.4): `formats.pandas_csv` (the port of pandas 1.4.4's
`precise_xstrtod` and column type inference) and `formats.ribfrac.read_pred_csv` vs pandas 1.4.4 `read_csv` with its
defaults (Python 3.9): random decimal strings of every length, digit count and exponent (with the halfway points
between neighbouring doubles, where a parser that is not correctly rounded shows), columns mixing integers,
decimals, NA words, bools, text and integers beyond int64, and whole prediction CSV files (fixed seeds)."""

from __future__ import annotations

import math
import random
import re
from decimal import Decimal, localcontext

import pytest

from medchallenge.formats import pandas_csv
from medchallenge.formats import ribfrac as formats

pytestmark = pytest.mark.reference

SPACES = (" ", "\t", "\v", "\f", "  ")
SPECIAL_WORDS = (
    "inf", "-inf", "+inf", "INF", "Infinity", "-Infinity", "+infinity", "iNfInItY", " inf", "inf ", " +inf", "infinit",
    "nan", "NaN", "nAn", "+nan", "-nan", "-NaN", "NAN", "None", "none", "NULL", "null", "NA", "N/A", "n/a", "#N/A",
    "#N/A N/A", "#NA", "<NA>", "-1.#IND", "1.#QNAN", "", " ", "\u3000", "１", "０.５", "٠٫٥", "٣", "۳", "1_0", "0x10",
    "1e", "1e+", "1e-", "e5", ".", "-", "+", ".e1", "-.5", "+.5", "5.", "5.e3", "1.5.2", "1,5", "1 5", "--1", "+-1",
    "1e999", "-1e999", "0e999", "1e308", "2e308", "1.7976931348623157e308", "1.7976931348623159e308", "4.9e-324",
    "2.4e-324", "2.5e-324", "1e-400", "1e-616", "1e-617", "0e-999", "True", "false", "TRUE", "tRuE", "FALSE ",
    "0.41000000000000003", "0.35000000000000003", "0.47000000000000003", "0.9400000000000001", "0.9500000000000001",
    "1e2147483648", "1e4294967296", "1e-2147483649", "1e99999999999999999", "1e00000000000000000000001",
)


def digits(rng: random.Random, count: int) -> str:
    text = "".join(rng.choice("0123456789") for _ in range(count))
    return ("0" * rng.randint(1, 5) + text) if rng.random() < 0.05 else text


def decimal_word(rng: random.Random) -> str:
    """A decimal string: sign, 0-25 integer digits, 0-40 decimals, an exponent of 0-25 digits, now and then spaces."""
    integer = digits(rng, rng.choice([0, 1, 1, 2, rng.randint(0, 25)]))
    decimals = digits(rng, rng.choice([0, rng.randint(1, 3), rng.randint(1, 20), rng.randint(15, 40)]))
    if not integer and not decimals:
        integer = digits(rng, 1)
    word = rng.choice(["", "", "", "-", "+"]) + integer + ("." + decimals if decimals or rng.random() < 0.1 else "")
    if rng.random() < 0.4:
        magnitude = rng.choice([rng.randint(0, 9), rng.randint(0, 400), rng.randint(0, 700),
                                rng.randint(0, 10 ** rng.randint(9, 25))])
        word += rng.choice("eE") + rng.choice(["", "", "-", "+"]) + ("0" * rng.randint(0, 3)) * (rng.random() < 0.1) \
            + str(magnitude)
    if rng.random() < 0.05:
        word = rng.choice(SPACES) + word
    if rng.random() < 0.05:
        word += rng.choice(SPACES)
    return word


def near_double_words(rng: random.Random) -> list[str]:
    """Strings at and between neighbouring doubles: the shortest repr, 16-20 significant digits, the exact halfway
    point (to 17-60 digits), and the values next to k/100 (the FROC thresholds), like 0.41000000000000003."""
    exponent = rng.choice([0, 0, 0, rng.randint(-30, 30), rng.randint(-330, 308)])
    x = abs(rng.random() * 10.0 ** exponent) if exponent > -324 else rng.random()
    if not math.isfinite(x) or x == 0:
        x = rng.random()
    up = math.nextafter(x, math.inf)
    with localcontext() as context:
        context.prec = 1200
        halfway = (Decimal(x) + Decimal(up)) / 2
    words = [repr(x), f"{x:.16g}", f"{x:.17g}", f"{x:.18g}", f"{x:.20e}", format(halfway, f".{rng.randint(17, 60)}g"),
             format(halfway, "f")[:rng.randint(3, 80)]]
    k = rng.randrange(100)
    words += [repr(math.nextafter(k / 100, math.inf)), repr(math.nextafter(k / 100, -math.inf)), repr(k / 100)]
    return words


def float_words(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = list(SPECIAL_WORDS)
    while len(words) < count:
        words += near_double_words(rng) if rng.random() < 0.3 else [decimal_word(rng)]
    return words


def integer_word(rng: random.Random) -> str:
    value = rng.choice([rng.randint(-5, 300), rng.randint(-2**70, 2**70), 2**63 - 1, 2**63, -2**63, -2**63 - 1,
                        2**64 - 1, 2**64, rng.randint(2**63, 2**64 - 1)])
    word = str(value) if rng.random() < 0.9 else f"+{value}" if value >= 0 else f"{value} "
    return rng.choice(SPACES) + word if rng.random() < 0.05 else word


def cell(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.3:
        return integer_word(rng)
    if kind < 0.55:
        return decimal_word(rng)
    if kind < 0.7:
        return rng.choice(sorted(pandas_csv.NA_WORDS))
    if kind < 0.8:
        return rng.choice(["True", "false", "TRUE", "tRuE", "FALSE"])
    if kind < 0.9:
        return rng.choice(SPECIAL_WORDS)
    return rng.choice(["x", "RibFrac1", "high", "None", "1_0", "0501", "٣"])


def columns(count: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        theme = rng.random()  # mostly one kind of cell per column, so that every dtype comes out
        make = (integer_word if theme < 0.3 else decimal_word if theme < 0.5 else cell)
        out.append([make(rng) if rng.random() < 0.85 else cell(rng) for _ in range(rng.randint(1, 6))])
    return out


def encoded(value: object) -> list:
    """A parsed value as reference_worker._encoded writes it."""
    if isinstance(value, str):
        return ["str", value]
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, float):
        return ["float", repr(value)]
    return ["int", str(value)]


def project_column(words: list[str]) -> dict:
    column = pandas_csv.parse_column(words)
    return {"dtype": column.kind, "values": [encoded(value) for value in column.values]}


def in_tables(all_columns: list[list[str]], width: int = 2000) -> list[list[list[str]]]:
    """Columns grouped by length into CSV tables of at most `width` columns (one read_csv each)."""
    by_length: dict[int, list[list[str]]] = {}
    for column in all_columns:
        by_length.setdefault(len(column), []).append(column)
    return [group[i:i + width] for group in by_length.values() for i in range(0, len(group), width)]


def compare_columns(py39, all_columns: list[list[str]]) -> tuple[list, dict]:
    tables = in_tables(all_columns)
    reference = py39.run("pandas_columns", tables)
    mismatches, dtypes = [], {}
    for table, expected_table in zip(tables, reference):
        for words, expected in zip(table, expected_table):
            ours = project_column(words)
            dtypes[expected["dtype"]] = dtypes.get(expected["dtype"], 0) + 1
            if ours != expected:
                mismatches.append((words, ours, expected))
    return mismatches, dtypes


def test_decimal_cells_parse_as_pandas_1_4_4(py39, record):
    # each word beside "0.5", so that the column is float64 wherever the word is a float for pandas
    words = float_words(60000, seed=2404)
    mismatches, dtypes = compare_columns(py39, [[word, "0.5"] for word in words])
    python_differs = 0
    for word in words:
        ours = pandas_csv.parse_float(word)
        try:
            python = float(word)
        except ValueError:
            python = None
        python_differs += ours is not None and python is not None and repr(ours) != repr(python)
    record("RibFrac pandas float cells", py39, len(words), mismatches, dtypes=dtypes,
           unlike_python_float=python_differs, max_length=max(map(len, words)))
    assert python_differs >= 1000  # pandas' parser really is not Python's: the last bit was exercised
    assert dtypes.get("float64", 0) > len(words) // 2 and dtypes.get("object", 0) > 1000


def test_columns_infer_types_as_pandas_1_4_4(py39, record):
    all_columns = columns(20000, seed=2405)
    mismatches, dtypes = compare_columns(py39, all_columns)
    record("RibFrac pandas columns", py39, len(all_columns), mismatches, dtypes=dtypes)
    assert all(dtypes.get(kind, 0) >= 20 for kind in ("int64", "uint64", "float64", "bool", "object")), dtypes


PRED_COLUMNS = ("public_id", "label_id", "confidence", "label_code")


def prediction_csv(rng: random.Random) -> str:
    names = [f" {name}" if rng.random() < 0.05 else name for name in PRED_COLUMNS]
    numeric_ids = rng.random() < 0.2
    codes = rng.choice([["0", "1", "-1", "4", "5", "1.0", "", "NA", "x", "True", "2", "3"], ["True", "NA", "", "False"],
                        ["1", "2", "NA", "3", "0"]])
    lines = [",".join(names)]
    for _ in range(rng.randint(1, 12)):
        public_id = rng.choice(["0501", "501", "1e3", "7"] if numeric_ids else ["RibFrac1", "RibFrac2", "0501"])
        label_id = rng.choice(["0", "1", "2", "3", "1.0", " 2", "3 "])
        confidence = rng.choice([decimal_word(rng), rng.choice(near_double_words(rng)), rng.choice(SPECIAL_WORDS),
                                 str(rng.randint(0, 1)), repr(rng.random())]) if rng.random() < 0.95 else "0.5"
        code = rng.choice(codes)
        quoted = [f'"{value}"' if "," in value or rng.random() < 0.05 else value
                  for value in (public_id, label_id, confidence, code)]
        lines.append(",".join(quoted))
    return "\n".join(lines) + "\n"


def test_prediction_csv_files_read_as_pandas_1_4_4(py39, record, tmp_path):
    rng = random.Random(2406)
    paths = []
    for index in range(400):
        path = tmp_path / f"pred{index}.csv"
        path.write_text(prediction_csv(rng), encoding="utf-8")
        paths.append(path)
    reference = py39.run("ribfrac_pred_csv", [str(path) for path in paths])
    mismatches, rows_compared, text_columns = [], 0, 0
    for path, expected in zip(paths, reference):
        table = formats.read_pred_csv(path)
        failures = " ".join(message for message, _ in table.official_failures)
        rows = sorted((row for rows in table.rows.values() for row in rows),
                      key=lambda row: int(re.search(r"line (\d+)$", row.where)[1]))
        ours = {
            "exact_names": "written with spaces" not in failures,
            "numeric_public_ids": "every public_id is a number" in failures,
            "label_id": [row.label_id for row in rows],
            "confidence": [["str"] if row.confidence_text is not None else ["float", repr(row.confidence)]
                           for row in rows],
            "classes": [formats.LABEL_CODES.get(row.label_code) if row.label_code is not None else None
                        for row in rows],
        }
        theirs = {
            "exact_names": expected["exact_names"],
            "numeric_public_ids": expected["public_id"]["dtype"] != "object",
            "label_id": [int(float(value)) for _, value in expected["label_id"]["values"]],
            "confidence": [["str"] if kind == "str" else ["float", repr(float(value))]
                           for kind, value in expected["confidence"]["values"]],
            "classes": expected["classes"],
        }
        text_columns += expected["confidence"]["dtype"] == "object"
        rows_compared += len(rows)
        if ours != theirs:
            mismatches.append((path.read_text(), ours, theirs))
    record("RibFrac prediction CSV files", py39, len(paths), mismatches, rows=rows_compared,
           text_confidence_columns=text_columns)
    assert 20 <= text_columns <= len(paths) - 20
