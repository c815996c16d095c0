"""Write shared/medchallenge/official/data/unicode13.json: where Python 3.9's text behaviour (Unicode 13.0) differs
from that of newer interpreters, for every operation the ImageCLEFmed Caption evaluators perform
(medchallenge/official/unicode13.py).

    python tools/make_unicode13_table.py --reference PYTHON3.9 --runtime PYTHON [--runtime PYTHON ...]

(the shipped table: reference 3.9.18, runtimes 3.10.13, 3.11.7, 3.12.1 and 3.13.0 of pyenv).

Each interpreter runs this file with `--dump` (no imports beyond the standard library; Python 3.7 syntax) and reports,
for all 0x110000 code points, what it does: `ch.lower()`, `ch.upper()`, the Final_Sigma class that `str.lower()`
consults around U+03A3 (probed, not read from unicodedata), `ch.isspace()` (`str.split()`, `str.strip()`), whether
`re` matches `\\w` and `\\s`, which characters `(?i)` matches for each ASCII letter, and which code points are
unassigned. The table keeps Python 3.9's `(?i)` classes and, per runtime Unicode version, Python 3.9's value for each
code point where the runtime's differs. tests/reference/test_caption_unicode_reference.py regenerates the entry of
the running interpreter and requires it to equal the shipped one.
"""

import argparse
import json
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "shared" / "medchallenge" / "official" / "data" / "unicode13.json"
REFERENCE_UNIDATA = "13.0.0"
SIGMA = "\u03a3"


def sigma_class(ch):
    """How `str.lower()` treats `ch` next to a capital sigma: "cased" (and not case-ignorable), "ignorable"
    (case-ignorable: skipped), or "other". Probed through the Final_Sigma rule itself."""
    if ("A" + SIGMA + ch).lower()[1] == "\u03c3":
        return "cased"
    if ("A" + SIGMA + ch + "A").lower()[1] == "\u03c3":
        return "ignorable"
    return "other"


def dump():
    """This interpreter's behaviour: mappings where not the identity, classes as sorted code-point lists."""
    everything = "".join(map(chr, range(0x110000)))
    facts = {"python": "%d.%d.%d" % sys.version_info[:3], "unidata_version": unicodedata.unidata_version,
             "lower": {}, "upper": {}, "sigma": {}}
    for cp, ch in enumerate(everything):
        lowered, uppered, kind = ch.lower(), ch.upper(), sigma_class(ch)
        if lowered != ch:
            facts["lower"][str(cp)] = lowered
        if uppered != ch:
            facts["upper"][str(cp)] = uppered
        if kind != "other":
            facts["sigma"][str(cp)] = kind
    facts["space"] = [cp for cp, ch in enumerate(everything) if ch.isspace()]
    facts["word"] = [match.start() for match in re.finditer(r"\w", everything)]
    facts["re_space"] = [match.start() for match in re.finditer(r"\s", everything)]
    facts["unassigned"] = [cp for cp, ch in enumerate(everything) if unicodedata.category(ch) == "Cn"]
    facts["ignorecase"] = {letter: "".join(re.findall("(?i)" + letter, everything))
                           for letter in "abcdefghijklmnopqrstuvwxyz"}
    return facts


def run_dump(python):
    """`dump()` of another interpreter (isolated mode: no site packages, no PYTHONPATH)."""
    result = subprocess.run([str(python), "-I", str(Path(__file__).resolve()), "--dump"], capture_output=True,
                            check=True)
    return json.loads(result.stdout)


def _mapping_diff(reference, runtime, identity):
    keys = set(reference) | set(runtime)
    return {"%04X" % int(cp): reference.get(cp, identity(int(cp))) for cp in sorted(keys, key=int)
            if reference.get(cp) != runtime.get(cp)}


def ranges(code_points):
    """Sorted code points as "XXXX" and "XXXX..YYYY" runs, as in the Unicode data files."""
    runs = []
    for cp in sorted(code_points):
        if runs and runs[-1][1] == cp - 1:
            runs[-1][1] = cp
        else:
            runs.append([cp, cp])
    return ["%04X" % first if first == last else "%04X..%04X" % (first, last) for first, last in runs]


def _sigma_diff(reference, runtime):
    changed = {int(cp) for cp in set(reference) | set(runtime) if reference.get(cp) != runtime.get(cp)}
    return {kind: ranges(cp for cp in changed if reference.get(str(cp), "other") == kind)
            for kind in ("cased", "ignorable", "other")}


def _class_diff(reference, runtime):
    reference, runtime = set(reference), set(runtime)
    return {"true": ranges(reference - runtime), "false": ranges(runtime - reference)}


def runtime_entry(reference, runtime):
    """Python 3.9's values where `runtime` differs: mappings keyed by hexadecimal code point, classes as ranges
    grouped by Python 3.9's value."""
    return {
        "python": runtime["python"],
        "lower": _mapping_diff(reference["lower"], runtime["lower"], chr),
        "upper": _mapping_diff(reference["upper"], runtime["upper"], chr),
        "sigma": _sigma_diff(reference["sigma"], runtime["sigma"]),
        "space": _class_diff(reference["space"], runtime["space"]),
        "word": _class_diff(reference["word"], runtime["word"]),
        "re_space": _class_diff(reference["re_space"], runtime["re_space"]),
        "ignorecase": {letter: chars for letter, chars in reference["ignorecase"].items()
                       if runtime["ignorecase"][letter] != chars},
    }


def table(reference, runtimes):
    """The whole file: Python 3.9's `(?i)` classes and one entry per runtime Unicode version."""
    if reference["unidata_version"] != REFERENCE_UNIDATA:
        raise SystemExit("the reference interpreter has Unicode %s, not %s (use Python 3.9)"
                         % (reference["unidata_version"], REFERENCE_UNIDATA))
    return {
        "about": "Python 3.9 (Unicode 13.0) text behaviour where newer interpreters differ; written by "
                 "tools/make_unicode13_table.py, read by medchallenge/official/unicode13.py",
        "reference": {"python": reference["python"], "unidata_version": reference["unidata_version"],
                      "ignorecase": reference["ignorecase"]},
        "runtimes": {runtime["unidata_version"]: runtime_entry(reference, runtime) for runtime in runtimes},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dump", action="store_true", help="print this interpreter's behaviour as JSON")
    parser.add_argument("--reference", help="Python 3.9 interpreter")
    parser.add_argument("--runtime", action="append", default=[], help="an interpreter to tabulate (repeatable)")
    args = parser.parse_args()
    if args.dump:
        json.dump(dump(), sys.stdout)
        return
    if not args.reference or not args.runtime:
        parser.error("--reference and at least one --runtime are needed")
    written = table(run_dump(args.reference), [run_dump(python) for python in args.runtime])
    TABLE.write_text(json.dumps(written, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    for version, entry in written["runtimes"].items():
        print(version, entry["python"], {key: value if isinstance(value, str) else len(value)
                                         for key, value in entry.items()})


if __name__ == "__main__":
    main()
