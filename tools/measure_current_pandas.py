"""Measure whether a current pandas, given pandas 1.4.4's behaviour as explicit options, reads RibFrac CSV files into
exactly the frame `pd.read_csv(path)` of pandas 1.4.4 builds (issue 32; docs/metrics/ribfrac.md §1.4, "Why a port").

    PYTHONPATH=shared:tests .venv/bin/python tools/measure_current_pandas.py --pandas /tmp/h32p-venv/bin/python \
        [--count 6000] [--json bench/current-pandas-frames.json]

`--pandas` is the interpreter of a scratch venv with the current pandas installed (never a project dependency), e.g.
`python3.11 -m venv /tmp/h32p-venv && /tmp/h32p-venv/bin/pip install pandas numpy`.

The inputs are those of tests/reference/test_ribfrac_frame_reference.py: the same generators and seed (the 6,000
whole files of `test_whole_ribfrac_csv_files_read_as_pandas_1_4_4`) and the 8 files of several low-memory chunks of
`test_files_of_several_chunks_join_the_chunk_types_as_pandas_1_4_4`. pandas 1.4.4's frames come from the cached
Python 3.9 reference environment (tests/reference/envs.py, reference_worker.pandas_frame); the current pandas' frames
from this file run with `--worker` in the scratch venv, encoded by the same reference_worker functions, and are
compared as the test compares them (column names, index, each column's dtype and values; or the exception's type).
Each variant below is counted per generator class; the mismatching files are described by what differs first.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# pandas 1.4.4's default NA strings (pandas._libs.parsers.STR_NA_VALUES of 1.4.4; 2.0 added "None"); checked
# against the reference environment on every run.
NA_VALUES_1_4_4 = ["", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>",
                   "N/A", "NA", "NULL", "NaN", "n/a", "nan", "null"]
# A NUL byte and the rest of its field up to the next delimiter, quote or line end (1.4.4 hands fields over as C
# strings, so a field ends at its first NUL)
NUL_TAIL = re.compile(rb"\x00[^,\"\r\n]*")
VARIANTS = {
    "defaults": "pd.read_csv(path), the official call, in the current pandas",
    "options": "+ engine='c', na_values=1.4.4's list, keep_default_na=False, float_precision='high', "
               "low_memory=True, future.infer_string=False",
    "options+bytes": "+ the bytes decoded as UTF-8 first (strict) and, where this pandas keeps NULs in fields, each "
                     "NUL and the rest of its field up to the next , \" or line end removed (read from a buffer)",
    "options+fixes": "+ a frame without rows given an empty Index of objects, not a RangeIndex; bool index levels "
                     "made object",
    "text+port": "options+bytes read as text (dtype=object, na_filter=False), typed by the project's port "
                 "(columns.parse_column per low-memory chunk, frame.join_chunks): pandas' tokenizer, the port's types",
}


# --- the worker side: runs in the scratch venv of the current pandas (standard library + pandas only) -----------

def compat_options(pd) -> tuple[dict, contextlib.AbstractContextManager]:
    """pandas 1.4.4's defaults given explicitly: read_csv options, and an option context for text columns."""
    options = {"engine": "c", "na_values": NA_VALUES_1_4_4, "keep_default_na": False, "float_precision": "high",
               "low_memory": True}
    try:
        pd.get_option("future.infer_string")
        return options, pd.option_context("future.infer_string", False)  # object, not str, columns (pandas >= 2.1)
    except (AttributeError, KeyError):
        return options, contextlib.nullcontext()


def encoded_frame(frame) -> dict:
    """A frame as reference_worker.pandas_frame encodes it."""
    from reference_worker import _encoded, _encoded_index

    return {"columns": [str(name) for name in frame.columns], "index": _encoded_index(frame.index),
            "data": [{"dtype": str(frame.iloc[:, k].dtype), "values": [_encoded(v) for v in frame.iloc[:, k].tolist()]}
                     for k in range(frame.shape[1])]}


def typed_by_the_port(frame) -> dict:
    """A frame read by the current pandas as text (every cell as written, no NA) typed as pandas 1.4.4 types it,
    by the project's port (formats/pandas_csv: columns.parse_column per low-memory chunk, frame.join_chunks)."""
    from reference_worker import _encoded

    from medchallenge.formats.pandas_csv.frame import _parse
    from medchallenge.formats.pandas_csv.tokenizer import buffer_lines

    rows = len(frame)
    levels = [] if frame.index.equals(__import__("pandas").RangeIndex(rows)) and frame.index.nlevels == 1 else [
        frame.index.get_level_values(k).tolist() for k in range(frame.index.nlevels)]
    chunk = buffer_lines(len(levels) + frame.shape[1])

    def column(cells: list, index: bool = False) -> dict:
        parsed = _parse(cells, chunk)
        kind = "object" if index and parsed.kind == "bool" else parsed.kind  # pandas 1.4.4 has no bool Index
        return {"dtype": kind, "values": [_encoded(v) for v in parsed.values]}

    if not levels:
        index = None if rows else {"dtype": "object", "values": []}
    elif len(levels) == 1:
        index = column(levels[0], index=True)
    else:
        index = {"dtype": "multi", "levels": [column(level, index=True) for level in levels]}
    return {"columns": [str(name) for name in frame.columns], "index": index,
            "data": [column(frame.iloc[:, k].tolist()) for k in range(frame.shape[1])]}


@functools.lru_cache
def keeps_nul(pd) -> bool:
    """Whether this pandas keeps a NUL byte and what follows it in a field (3.x), where 1.4.4 ends the field."""
    return "\x00" in str(pd.read_csv(io.BytesIO(b"a\n0.9\x00x\n")).iloc[0, 0])


def read_variant(pd, path: str, variant: str) -> dict:
    """The encoded frame of one variant (see VARIANTS)."""
    if variant == "defaults":
        return encoded_frame(pd.read_csv(path))
    options, context = compat_options(pd)
    source = path
    if variant != "options":
        data = Path(path).read_bytes()
        data.decode("utf-8")  # 1.4.4 decodes (a small file) before tokenizing: UnicodeDecodeError before ParserError
        source = io.BytesIO(NUL_TAIL.sub(b"", data) if keeps_nul(pd) else data)
    if variant == "text+port":
        options.update(dtype=object, na_filter=False)
    with context:
        frame = pd.read_csv(source, **options)
    if variant == "text+port":
        return typed_by_the_port(frame)
    if variant == "options+fixes":
        if len(frame) == 0 and isinstance(frame.index, pd.RangeIndex):
            frame.index = pd.Index([], dtype=object)  # 1.4.4 gives a frame without rows an empty Index of objects
        elif isinstance(frame.index, pd.MultiIndex):  # 1.4.4 has no bool Index: a bool level is one of objects
            frame.index = pd.MultiIndex.from_arrays([level.astype(object) if level.dtype == bool else level for level
                                                     in (frame.index.get_level_values(k)
                                                         for k in range(frame.index.nlevels))])
        elif frame.index.dtype == bool:
            frame.index = frame.index.astype(object)
    return encoded_frame(frame)


def worker() -> None:
    """Read {"paths": [...], "variants": [...]} on stdin; write {"version", "outputs": {variant: [frame, ...]}}."""
    import warnings

    import pandas as pd

    sys.path[:0] = [str(REPO / "tests" / "reference"), str(REPO / "shared")]
    job = json.load(sys.stdin)
    outputs = {}
    for variant in job["variants"]:
        frames = outputs[variant] = []
        for path in job["paths"]:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    frames.append(read_variant(pd, path, variant))
            except Exception as error:  # as reference_worker.pandas_frame records it
                frames.append({"error": [type(error).__name__, str(error).strip()]})
    json.dump({"version": pd.__version__, "keeps_nul": keeps_nul(pd), "numpy": __import__("numpy").__version__,
               "outputs": outputs}, sys.stdout)


# --- the measuring side: runs in the project venv ----------------------------------------------------------------

def compared(frame: dict) -> dict:
    """A frame as the test compares it: an exception by its type only."""
    return {"error": frame["error"][0]} if "error" in frame else frame


def difference(ours: dict, expected: dict) -> str:
    """What differs first between two compared frames."""
    if "error" in ours or "error" in expected:
        return f"exception {ours.get('error', 'none')} vs 1.4.4 {expected.get('error', 'none')}"
    if ours["columns"] != expected["columns"]:
        return "column names"
    if ours["index"] != expected["index"]:
        return "index"
    for mine, theirs in zip(ours["data"], expected["data"]):
        if mine["dtype"] != theirs["dtype"]:
            return f"dtype {mine['dtype']} vs 1.4.4 {theirs['dtype']}"
    return "values"


def chunk_files() -> list[bytes]:
    """The files of test_files_of_several_chunks_join_the_chunk_types_as_pandas_1_4_4 (one row past a chunk)."""
    from medchallenge.formats.pandas_csv.tokenizer import buffer_lines

    chunk = buffer_lines(4)
    tails = ["2.5", "x", "1", "", "True", "18446744073709551615", "-1", "False"]
    heads = ["1", "True", "1", "True", "1", "1", "True", "1.5"]
    return [("public_id,label_id,confidence,label_code\n" + f"A,{head},0.5,1\n" * chunk
             + f"A,{tail},0.5,1\n" * 3).encode() for head, tail in zip(heads, tails)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pandas", help="python of a venv with the current pandas")
    parser.add_argument("--count", type=int, default=6000, help="generated files (the test's FRAME_FUZZ)")
    parser.add_argument("--json", type=Path, help="write the counts here too")
    parser.add_argument("--show", type=int, default=0, help="print this many mismatching files per class and variant")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker()
        return
    if not args.pandas:
        parser.error("--pandas is required")

    from reference.envs import reference_env
    from reference.test_ribfrac_frame_reference import generated, project_frame

    py39 = reference_env("3.9")
    listed = subprocess.run([str(py39.python), "-I", "-c", "import json; from pandas._libs.parsers import "
                             "STR_NA_VALUES as v; print(json.dumps(sorted(v)))"], capture_output=True, text=True,
                            check=True)
    assert json.loads(listed.stdout) == sorted(NA_VALUES_1_4_4), listed.stdout
    files = generated(args.count, seed=3201) + [("chunks", data) for data in chunk_files()]
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for k, (_, data) in enumerate(files):
            path = Path(folder) / f"f{k}.csv"
            path.write_bytes(data)
            paths.append(str(path))
        reference = py39.run("pandas_frame", paths)
        job = json.dumps({"paths": paths, "variants": list(VARIANTS)})
        run = subprocess.run([args.pandas, "-I", __file__, "--worker"], input=job, capture_output=True, text=True)
        if run.returncode:
            sys.exit(f"error: the worker in {args.pandas} failed:\n{run.stderr[-3000:]}")
        answer = json.loads(run.stdout)
    counts: dict = {"pandas": answer["version"], "numpy": answer["numpy"], "keeps_nul": answer["keeps_nul"],
                    "reference": py39.versions, "files": len(files), "variants": VARIANTS, "per_class_files": {},
                    "mismatches": {}, "differences": {}, "project_reread_refusals": {}}
    for kind, _ in files:
        counts["per_class_files"][kind] = counts["per_class_files"].get(kind, 0) + 1
    for variant in VARIANTS:
        per_class, kinds, shown = {"total": 0}, {}, {}
        for k, ((kind, data), expected) in enumerate(zip(files, reference)):
            ours, theirs = compared(answer["outputs"][variant][k]), compared(expected)
            if ours == theirs:
                continue
            per_class[kind] = per_class.get(kind, 0) + 1
            per_class["total"] += 1
            what = difference(ours, theirs)
            kinds[what] = kinds.get(what, 0) + 1
            if kind != "chunks" and project_frame(data) == {"error": "Reread"}:
                counts["project_reread_refusals"][variant] = counts["project_reread_refusals"].get(variant, 0) + 1
            if shown.get(kind, 0) < args.show:
                shown[kind] = shown.get(kind, 0) + 1
                print(f"[{variant}] {kind}: {what}\n  file {data[:300]!r}\n  current {json.dumps(ours)[:400]}\n"
                      f"  1.4.4   {json.dumps(theirs)[:400]}")
        counts["mismatches"][variant] = per_class
        counts["differences"][variant] = dict(sorted(kinds.items(), key=lambda item: -item[1]))
    print(json.dumps(counts, indent=1))
    if args.json:
        args.json.write_text(json.dumps(counts, indent=1) + "\n")


if __name__ == "__main__":
    main()
