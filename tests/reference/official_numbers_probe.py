"""Runs under any interpreter from Python 3.10 (standard library only, isolated mode): imports
medchallenge.official.numbers from the folder given as argument, reads a JSON list of texts on stdin and writes as JSON
what each official interpreter's `int()` and `float()` (the project's) make of every non-ASCII code point and of each
text. tests/reference/test_official_numbers_reference.py compares it with Python 3.9.18 and 3.7.16 themselves."""

import json
import sys
import unicodedata


def parsed(parse, text):
    """The value as text (str of an int, repr of a float) or "ValueError", as reference_worker.parse_numbers."""
    try:
        value = parse(text)
    except ValueError:
        return "ValueError"
    return str(value) if isinstance(value, int) else repr(value)


def code_point_facts(numbers):
    """The shape of tools/make_decimal_digits_table.py's dump: {"digits": {value: [cp]}, "space": [cp]}, probed
    through numbers.int; "disagree": code points where numbers.float reads `ch + "1" + ch` otherwise."""
    digits = {str(value): [] for value in range(10)}
    space, disagree = [], []
    for cp in range(0x80, 0x110000):
        ch = chr(cp)
        as_int = parsed(numbers.int, ch)
        spaced_int, spaced_float = parsed(numbers.int, ch + "1" + ch), parsed(numbers.float, ch + "1" + ch)
        if as_int != "ValueError":
            digits[as_int].append(cp)
        elif spaced_int == "1":
            space.append(cp)
        if spaced_float != ("ValueError" if spaced_int == "ValueError" else spaced_int + ".0"):
            disagree.append(cp)
    return {"digits": digits, "space": space, "disagree": disagree}


def main():
    sys.path.insert(0, sys.argv[1])
    from medchallenge.official import numbers as official_numbers

    texts = json.load(sys.stdin)
    report = {"python": "%d.%d.%d" % sys.version_info[:3], "unidata_version": unicodedata.unidata_version}
    for numbers in (official_numbers.PYTHON_3_9, official_numbers.PYTHON_3_7):
        report[numbers.python] = dict(code_point_facts(numbers),
                                      int=[parsed(numbers.int, text) for text in texts],
                                      float=[parsed(numbers.float, text) for text in texts])
    json.dump(report, sys.stdout)


if __name__ == "__main__":
    main()
