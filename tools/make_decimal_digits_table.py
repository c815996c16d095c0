"""Write shared/medchallenge/official/data/decimal_digits.json: which characters `int()` and `float()` of the official
interpreters read as decimal digits and as whitespace (medchallenge/official/numbers.py).

    python tools/make_decimal_digits_table.py --official PYTHON3.9 --official PYTHON3.7

(the shipped table: Python 3.9.18 and 3.7.16 of pyenv, Unicode 13.0.0 and 11.0.0).

CPython's `int(str)` and `float(str)` first turn every character that `unicodedata.decimal` knows into its ASCII digit
and every whitespace character (`str.isspace()`) into a space, then parse ASCII; which characters those are depends on
the interpreter's Unicode version (Python 3.11 reads the Tangsa digits U+16AC0..U+16AC9 of Unicode 14, Python 3.9 does
not). Each official interpreter runs this file with `--dump` (standard library only; Python 3.7 syntax) and probes its
own `int()` and `float()` on every non-ASCII code point: `int(ch)` gives the digit, `int(ch + "1" + ch) == 1` marks
whitespace; the same with `float()`, and `unicodedata.decimal()` and `str.isspace()`, must agree, or the dump stops.
The table is keyed by the interpreter's Unicode version, as medchallenge/official/data/unicode13.json is.
tests/reference/test_official_numbers_reference.py regenerates it in the reference environments and requires it to
equal the shipped one.
"""

import argparse
import json
import subprocess
import sys
import unicodedata
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "shared" / "medchallenge" / "official" / "data" / "decimal_digits.json"


def _reads(parse, text):
    """parse(text), or None where it raises ValueError."""
    try:
        return parse(text)
    except ValueError:
        return None


def dump():
    """This interpreter's non-ASCII digits ({digit: [code points]}) and whitespace ([code points]), as its int() and
    float() read them."""
    digits = {str(value): [] for value in range(10)}
    space = []
    for cp in range(0x80, 0x110000):
        ch = chr(cp)
        as_int, as_float = _reads(int, ch), _reads(float, ch)
        spaced_int, spaced_float = _reads(int, ch + "1" + ch), _reads(float, ch + "1" + ch)
        decimal = unicodedata.decimal(ch, None)
        if as_int != decimal or (as_float != (None if decimal is None else float(decimal))):
            raise SystemExit("U+%04X: int() %r, float() %r, unicodedata.decimal() %r disagree"
                             % (cp, as_int, as_float, decimal))
        if decimal is not None:
            digits[str(decimal)].append(cp)
            continue
        if (spaced_int == 1) != ch.isspace() or (spaced_float == 1.0) != ch.isspace():
            raise SystemExit("U+%04X: int() / float() whitespace and str.isspace() disagree" % cp)
        if ch.isspace():
            space.append(cp)
    return {"python": "%d.%d.%d" % sys.version_info[:3], "unidata_version": unicodedata.unidata_version,
            "digits": digits, "space": space}


def run_dump(python):
    """`dump()` of another interpreter (isolated mode: no site packages, no PYTHONPATH)."""
    result = subprocess.run([str(python), "-I", str(Path(__file__).resolve()), "--dump"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, check=True)
    return json.loads(result.stdout)


def ranges(code_points):
    """Sorted code points as "XXXX" and "XXXX..YYYY" runs, as in the Unicode data files (as make_unicode13_table.py
    writes them: each tool runs alone, in isolated mode, under the interpreter it probes)."""
    runs = []
    for cp in sorted(code_points):
        if runs and runs[-1][1] == cp - 1:
            runs[-1][1] = cp
        else:
            runs.append([cp, cp])
    return ["%04X" % first if first == last else "%04X..%04X" % (first, last) for first, last in runs]


def entry(facts):
    """One interpreter's part of the table: code points as ranges, digits grouped by value."""
    return {"python": facts["python"], "space": ranges(facts["space"]),
            "digits": {value: ranges(points) for value, points in facts["digits"].items()}}


def table(officials):
    """The whole file: one entry per official interpreter, keyed by its Unicode version."""
    return {"about": "non-ASCII characters that int() and float() of the official interpreters read as decimal digits "
                     "and as whitespace; written by tools/make_decimal_digits_table.py, read by "
                     "medchallenge/official/numbers.py",
            "interpreters": {facts["unidata_version"]: entry(facts) for facts in officials}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dump", action="store_true", help="print this interpreter's digits and whitespace as JSON")
    parser.add_argument("--official", action="append", default=[], help="an official interpreter (repeatable)")
    args = parser.parse_args()
    if args.dump:
        json.dump(dump(), sys.stdout)
        return
    if not args.official:
        parser.error("at least one --official interpreter is needed")
    written = table([run_dump(python) for python in args.official])
    TABLE.write_text(json.dumps(written, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    for version, part in written["interpreters"].items():
        print(version, part["python"], sum(len(runs) for runs in part["digits"].values()), "digit runs,",
              len(part["space"]), "whitespace runs")


if __name__ == "__main__":
    main()
