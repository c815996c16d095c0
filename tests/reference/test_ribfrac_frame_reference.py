"""Whole RibFrac CSV files read by `formats.pandas_csv.read_csv_bytes` vs pandas 1.4.4 `pd.read_csv(path)` (Python
3.9): frames equal (column names, index, every column's dtype and values) or the same exception (docs/metrics/
ribfrac.md §1.4). The files are shaped like what participants submit, one generator per class of issue 32: repeated
header names, rows with more or fewer fields (trailing commas, Excel's notes, lone carriage returns), blank and
whitespace rows, identifiers with spaces or line breaks, NUL bytes, headers repeated mid-file, quotes, line endings,
byte order marks and bytes that are no UTF-8 (fixed seeds)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from medchallenge.formats import pandas_csv

pytestmark = pytest.mark.reference

GT_HEADER = ["public_id", "label_id", "label_code"]
PRED_HEADER = ["public_id", "label_id", "confidence", "label_code"]
IDS = ["RibFrac501", "RibFrac502", "RibFrac501 ", " RibFrac501", "RibFrac501\u00a0", "0501", "501", "ribfrac501"]
BLANK_ROWS = [",,,", ",,", " , , , ", "\t,\t,\t", "\t\t", "   ", "", " ", ",", "\t"]
NOTES = ["# exported by Excel", "Total,,,", "sep=,", "RibFrac501", ",,,,", "end"]
CLASSES = ("duplicate_header", "extra_fields", "extra_fields_everywhere", "fewer_fields", "blank_rows", "ids",
           "nul", "unread_cells", "quotes", "line_endings", "mixed")


def cell(rng: random.Random, column: str) -> str:
    if column == "public_id":
        return rng.choice(IDS[:2] * 4 + IDS)
    if column == "label_id":
        return rng.choice(["0", "1", "2", "3", "4", "1.0", "300", "", " 2", "NA", "x", "True"][:rng.choice([5, 5, 12])])
    if column == "confidence":
        return rng.choice([f"{rng.random():.{rng.randint(1, 17)}f}", "0.5", "1", "0", "", "nan", "inf", "high",
                           "0.9\x00", "1e999"][:rng.choice([4, 4, 10])])
    return rng.choice(["0", "1", "2", "3", "4", "-1", "", "True", "False", "7", "1.0", "x"][:rng.choice([6, 6, 12])])


def rows(rng: random.Random, header: list[str], count: int) -> list[list[str]]:
    return [[cell(rng, column) for column in header] for _ in range(count)]


def quoted(rng: random.Random, value: str) -> str:
    if any(c in value for c in ',"\r\n') or rng.random() < 0.05:
        return '"' + value.replace('"', '""') + '"'
    return value


def join(rng: random.Random, fields: list[str]) -> str:
    return ",".join(quoted(rng, value) for value in fields)


def csv_file(rng: random.Random, kind: str) -> bytes:
    header = list(rng.choice([GT_HEADER, PRED_HEADER]))
    body = rows(rng, header, rng.choice([0, 1, 2, rng.randint(1, 8), rng.randint(1, 30)]))
    lines = [join(rng, header)] + [join(rng, row) for row in body]
    ending = "\n"
    if kind == "duplicate_header":
        name = rng.choice(header + ["label_id.1", "confidence.1", "Confidence", ""])
        header.insert(rng.randrange(len(header) + 1), name)
        if rng.random() < 0.3:
            header.insert(rng.randrange(len(header) + 1), rng.choice(header))
        lines = [",".join(header)] + [join(rng, row + [cell(rng, "confidence")] * (len(header) - len(row)))
                                      for row in body]
    elif kind == "extra_fields" and len(lines) > 1:
        for k in rng.sample(range(1, len(lines)), rng.randint(1, len(lines) - 1)):
            lines[k] += rng.choice([",", ",,", ",x", ", "])
    elif kind == "extra_fields_everywhere":
        extra = rng.choice([",", ",,", ",1"])
        lines = [lines[0]] + [line + extra for line in lines[1:]]
        if rng.random() < 0.3:
            lines[0] += ","
    elif kind == "fewer_fields":
        for _ in range(rng.randint(1, 3)):
            k = rng.randint(1, len(lines))
            lines.insert(k, rng.choice(NOTES + ["RibFrac501,0", "RibFrac501,1,0.5", "RibFrac502"]))
        if rng.random() < 0.3 and len(lines) > 1:
            k = rng.randrange(1, len(lines))
            cut = rng.randrange(len(lines[k]) + 1)
            lines[k] = lines[k][:cut] + "\r" + lines[k][cut:]
    elif kind == "blank_rows":
        for _ in range(rng.randint(1, 4)):
            lines.insert(rng.randint(1, len(lines)), rng.choice(BLANK_ROWS))
    elif kind == "ids":
        for k in range(1, len(lines)):
            if rng.random() < 0.4:
                lines[k] = rng.choice(['"RibFrac\n501"', '"RibFrac501 "', "\u00a0RibFrac501", "RibFrac501\t",
                                       '"Rib""Frac"', " RibFrac501"]) + lines[k][lines[k].find(","):]
    elif kind == "nul":
        for _ in range(rng.randint(1, 3)):
            k = rng.randrange(len(lines))
            cut = rng.randrange(len(lines[k]) + 1)
            lines[k] = lines[k][:cut] + "\x00" * rng.randint(1, 2) + rng.choice(["", "x", "9"]) + lines[k][cut:]
    elif kind == "unread_cells":
        for _ in range(rng.randint(1, 3)):
            lines.insert(rng.randint(1, len(lines)), rng.choice([lines[0], join(rng, ["RibFrac999", "300", "0.5",
                                                                                      "1"][:len(header)])]))
        if rng.random() < 0.3:
            lines[0] = lines[0].replace("confidence", "Confidence").replace("label_id", "Label_id")
    elif kind == "quotes":
        for _ in range(rng.randint(1, 3)):
            k = rng.randrange(len(lines))
            cut = rng.randrange(len(lines[k]) + 1)
            lines[k] = lines[k][:cut] + rng.choice(['"', '""', '"x"', '",', '"\n', '"\r\n"']) + lines[k][cut:]
    elif kind == "line_endings":
        ending = rng.choice(["\r\n", "\r", "\n\n", "\r\r\n"])
    else:  # mixed: several of the above at once
        return csv_file(rng, rng.choice(CLASSES[:-1])) + csv_file(rng, rng.choice(CLASSES[:-1]))
    text = ending.join(lines) + (ending if rng.random() < 0.8 else "")
    if rng.random() < 0.05:
        text = "\ufeff" + text
    data = text.encode("utf-8")
    if rng.random() < 0.02:
        k = rng.randrange(len(data) + 1)
        data = data[:k] + rng.choice([b"\xff", b"\xc3", b"\xe9t\xe9"]) + data[k:]
    return data


def encoded(value: object) -> list:
    """A parsed value as reference_worker._encoded writes it."""
    if isinstance(value, str):
        return ["str", value]
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, float):
        return ["float", repr(value)]
    return ["int", str(value)]


def index_dtype(column: pandas_csv.Column) -> str:
    """The dtype of pandas 1.4.4's Index of a column: no bool Index (object)."""
    return "object" if column.kind == "bool" else column.kind


def project_frame(data: bytes) -> dict:
    try:
        frame = pandas_csv.read_csv_bytes(data)
    except pandas_csv.ReadCsvError as exc:
        return {"error": exc.kind}
    if not frame.index:  # a RangeIndex, or, without rows, pandas' empty Index of objects
        index = None if len(frame) else {"dtype": "object", "values": []}
    elif len(frame.index) == 1:
        index = {"dtype": index_dtype(frame.index[0]), "values": [encoded(v) for v in frame.index[0].values]}
    else:
        index = {"dtype": "multi", "levels": [{"dtype": index_dtype(level), "values": [encoded(v) for v in level.values]}
                                              for level in frame.index]}
    return {"columns": list(frame.columns), "index": index,
            "data": [{"dtype": column.kind, "values": [encoded(v) for v in column.values]} for column in frame.data]}


def generated(count: int, seed: int) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    return [(kind, csv_file(rng, kind)) for kind in (CLASSES[k % len(CLASSES)] for k in range(count))]


def test_whole_ribfrac_csv_files_read_as_pandas_1_4_4(py39, record, tmp_path):
    files = generated(int(__import__("os").environ.get("FRAME_FUZZ", 6000)), seed=3201)
    paths = []
    for k, (_, data) in enumerate(files):
        path = tmp_path / f"f{k}.csv"
        path.write_bytes(data)
        paths.append(str(path))
    reference = py39.run("pandas_frame", paths)
    mismatches, per_class, errors = [], {}, {}
    for (kind, data), expected in zip(files, reference):
        ours = project_frame(data)
        if "error" in expected:
            expected = {"error": expected["error"][0]}
            errors[expected["error"]] = errors.get(expected["error"], 0) + 1
        per_class[kind] = per_class.get(kind, 0) + 1
        if ours != expected:
            mismatches.append((kind, data, ours, expected))
    record("RibFrac CSV frames", py39, len(files), mismatches, per_class=per_class, pandas_errors=errors,
           indexed=sum(1 for expected in reference if expected.get("index")))
    assert errors.get("ParserError", 0) >= 100 and errors.get("UnicodeDecodeError", 0) >= 20
