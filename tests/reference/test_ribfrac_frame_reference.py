"""Whole RibFrac CSV files read by `formats.pandas_csv.read_csv_bytes` vs pandas 1.4.4 `pd.read_csv(path)` (Python
3.9): frames equal (column names, index, every column's dtype and values) or the same exception (docs/metrics/
ribfrac.md §1.4). The files are shaped like what participants submit, one generator per class of issue 32: repeated
header names, rows with more or fewer fields (trailing commas, Excel's notes, lone carriage returns), blank and
whitespace rows, identifiers with spaces or line breaks, NUL bytes, headers repeated mid-file, quotes, line endings,
byte order marks and bytes that are no UTF-8 (fixed seeds)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

from medchallenge.errors import InputError
from medchallenge.evaluators import ribfrac as evaluator
from medchallenge.formats import pandas_csv
from medchallenge.formats import ribfrac as formats
from medchallenge.formats.pandas_csv.tokenizer import buffer_lines
from medchallenge.metrics import ribfrac as m
from reference.test_ribfrac_parsing_reference import encoded

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
    if kind == "mixed":  # several of the classes at once
        return csv_file(rng, rng.choice(CLASSES[:-1])) + csv_file(rng, rng.choice(CLASSES[:-1]))
    return perturbed(rng, kind, header, rows(rng, header, rng.choice([0, 1, 2, rng.randint(1, 8),
                                                                         rng.randint(1, 30)])))


def perturbed(rng: random.Random, kind: str, header: list[str], body: list[list[str]]) -> bytes:
    """The CSV file of `header` and `body`, changed as the class `kind` changes files."""
    header = list(header)
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
    text = ending.join(lines) + (ending if rng.random() < 0.8 else "")
    if rng.random() < 0.05:
        text = "\ufeff" + text
    data = text.encode("utf-8")
    if rng.random() < 0.02:
        k = rng.randrange(len(data) + 1)
        data = data[:k] + rng.choice([b"\xff", b"\xc3", b"\xe9t\xe9"]) + data[k:]
    return data


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
    files = generated(int(os.environ.get("FRAME_FUZZ", 6000)), seed=3201)
    paths = []
    for k, (_, data) in enumerate(files):
        path = tmp_path / f"f{k}.csv"
        path.write_bytes(data)
        paths.append(str(path))
    reference = py39.run("pandas_frame", paths)
    mismatches, per_class, errors, reread = [], {}, {}, {"pandas_failed": 0, "pandas_read": 0}
    for (kind, data), expected in zip(files, reference):
        ours = project_frame(data)
        if "error" in expected:
            expected = {"error": expected["error"][0]}
            errors[expected["error"]] = errors.get(expected["error"], 0) + 1
        per_class[kind] = per_class.get(kind, 0) + 1
        if ours == {"error": "Reread"}:  # refused by design (ribfrac.md §1.4), whatever pandas made of it
            reread["pandas_failed" if "error" in expected else "pandas_read"] += 1
        elif ours != expected:
            mismatches.append((kind, data, ours, expected))
    record("RibFrac CSV frames", py39, len(files), mismatches, per_class=per_class, pandas_errors=errors,
           indexed=sum(1 for expected in reference if expected.get("index")), refused_rereading=reread)
    assert errors.get("ParserError", 0) >= 100 and errors.get("UnicodeDecodeError", 0) >= 20


CASES = ("RibFrac501", "RibFrac502")


def score_input(rng: random.Random) -> tuple[bytes, bytes, list[dict]]:
    """A GT and a prediction CSV for two cases, mostly as a participant would write them, one of the files changed
    as one class changes files (or none), and each case's matching (given instead of volumes)."""
    cases, gt_rows, pred_rows = [], [], []
    for case_id in CASES:
        num_gt, num_pred = rng.choice([0, 1, 2, 3]), rng.choice([0, 0, 1, 2, 3])
        max_iou = [rng.choice([0.0, 0.1, 0.3, 0.9]) if num_gt else 0.0 for _ in range(num_pred)]
        argmax = [rng.randrange(num_gt) if num_gt else 0 for _ in range(num_pred)]
        cases.append({"id": case_id, "num_gt": num_gt, "num_pred": num_pred, "max_iou": max_iou,
                      "argmax": argmax})
        gt_rows += [[case_id, "0", "0"]] + [[case_id, str(g), rng.choice(["1", "2", "3", "4", "-1"])]
                                           for g in range(1, num_gt + 1)]
        pred_rows += [[case_id, "0", "0.5", "0"]] * (rng.random() < 0.8) + [
            [case_id, str(p), rng.choice([f"{rng.random():.2f}", repr(rng.random()), "0.9", "1", "0"]),
             rng.choice(["1", "2", "3", "4", "0", "-1"])] for p in range(1, num_pred + 1)]
    for rows_ in (gt_rows, pred_rows):
        if rng.random() < 0.3:
            rows_.append(list(rng.choice(rows_ or [["RibFrac501", "1", "0.5", "1"]])))
            rows_[-1][rng.randrange(len(rows_[-1]))] = cell(rng, rng.choice(PRED_HEADER))
    kinds = [rng.choice(CLASSES[:-1] + ("clean",) * 3) for _ in range(2)]
    return (perturbed(rng, kinds[0], GT_HEADER, gt_rows), perturbed(rng, kinds[1], PRED_HEADER, pred_rows), cases)


def project_scores(gt_path: Path, pred_path: Path, cases: list[dict]) -> dict:
    """The project's scores of a score_input: the CSVs read as the evaluator reads them, each case's rows and
    confusion matrix (evaluators.ribfrac.case_rows) from the given matching, the aggregates from their sums."""
    try:
        gt, pred = formats.read_gt_csv(gt_path), formats.read_pred_csv(pred_path)
        statistics = []
        for case in cases:
            num_gt, num_pred = case["num_gt"], case["num_pred"]
            hit = [a + 1 if iou > 0 else 0 for a, iou in zip(case["argmax"], case["max_iou"])]
            match = m.InstanceMatch(num_gt, num_pred, np.zeros((num_gt, num_pred)), np.array(case["max_iou"]),
                                    np.array(hit, dtype=np.int64), np.zeros(num_gt), np.zeros(num_pred),
                                    np.zeros((num_gt + 1, num_pred + 1)), 0, 0, 0, 0)
            source = evaluator.CaseSource(gt_path, None, tuple(gt.rows.get(case["id"], ())),
                                          tuple(pred.rows.get(case["id"], ())), str(pred_path), str(gt_path),
                                          gt.label_id_kind, pred.label_id_kind, gt.missing, pred.missing)
            rows, matrix = evaluator.case_rows(source, match, case["id"])
            statistics.append(evaluator.case_statistics(evaluator.CaseMatch(
                num_gt=num_gt, num_pred=num_pred, detections=rows, ground_truth=[],
                confusion_matrix=matrix.tolist(), inter=0, union=0, y_true=0, y_pred=0)))
        totals = evaluator.aggregate_totals(np.sum(statistics, axis=0), len(cases), "numpy122", "master")
    except InputError as exc:
        return {"error": str(exc)}
    return {"scores": totals.aggregates, "key_recall": list(totals.key_recall), "matrix": totals.matrix.tolist(),
            "noted": bool(gt.official_failures or pred.official_failures)}


def test_ribfrac_scores_from_whole_csv_files_as_pandas_1_4_4(py39, record, tmp_path):
    rng = random.Random(3202)
    inputs, items = [], []
    for k in range(int(os.environ.get("SCORE_FUZZ", 2000))):
        gt_data, pred_data, cases = score_input(rng)
        gt_path, pred_path = tmp_path / f"gt{k}.csv", tmp_path / f"pred{k}.csv"
        gt_path.write_bytes(gt_data)
        pred_path.write_bytes(pred_data)
        inputs.append((gt_path, pred_path, cases))
        items.append({"gt": str(gt_path), "pred": str(pred_path), "cases": cases})
    reference = py39.run("ribfrac_csv_scores", items)
    mismatches, outcome = [], {"scored": 0, "both_fail": 0, "noted": 0, "refused_rereading": 0}
    for (gt_path, pred_path, cases), expected in zip(inputs, reference):
        ours = project_scores(gt_path, pred_path, cases)
        if "error" in ours and "read the same lines again" in ours["error"]:
            outcome["refused_rereading"] += 1  # by design (ribfrac.md §1.4)
        elif "error" in expected and "error" in ours:
            outcome["both_fail"] += 1
        elif "error" in expected and ours.get("noted"):
            outcome["noted"] += 1  # a documented value with a note (ribfrac.md §8; --strict refuses it)
        elif "error" in expected or "error" in ours:
            mismatches.append((gt_path.read_bytes(), pred_path.read_bytes(), cases, ours, expected))
        else:
            outcome["scored"] += 1
            values = {key: ours["scores"][key] for key in ("froc_average", "macro_f1", "target_aware_f1",
                                                           "prediction_aware_f1")}
            close = all(abs(values[key] - expected[key]) <= 1e-9 for key in values) and all(
                abs(a - b) <= 1e-9 for a, b in zip(ours["key_recall"], expected["key_recall"]))
            if not close or ours["matrix"] != expected["matrix"]:
                mismatches.append((gt_path.read_bytes(), pred_path.read_bytes(), cases, ours, expected))
    record("RibFrac CSV scores", py39, len(inputs), mismatches, **outcome)
    assert outcome["scored"] >= len(inputs) // 4 and outcome["both_fail"] >= len(inputs) // 10


def test_files_of_several_chunks_join_the_chunk_types_as_pandas_1_4_4(py39, record, tmp_path):
    # 131,072 rows of 4 fields are one chunk of the low-memory reading; each chunk's types are inferred alone
    chunk = buffer_lines(4)
    tails = ["2.5", "x", "1", "", "True", "18446744073709551615", "-1", "False"]
    heads = ["1", "True", "1", "True", "1", "1", "True", "1.5"]
    paths, files = [], []
    for k, (head, tail) in enumerate(zip(heads, tails)):
        data = ("public_id,label_id,confidence,label_code\n" + f"A,{head},0.5,1\n" * chunk
                + f"A,{tail},0.5,1\n" * 3).encode()
        path = tmp_path / f"chunks{k}.csv"
        path.write_bytes(data)
        paths.append(str(path))
        files.append(data)
    reference = py39.run("pandas_frame", paths)
    mismatches = [(data[-40:], expected["data"][1]["dtype"]) for data, expected in zip(files, reference)
                  if project_frame(data) != expected]
    record("RibFrac CSV chunked frames", py39, len(files), mismatches, rows=chunk + 3)
