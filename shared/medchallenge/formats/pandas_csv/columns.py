"""How pandas 1.4.4's C parser (`pd.read_csv` with its defaults) turns one column of CSV cells into values.

Spec: docs/metrics/ribfrac.md §1.4. A port of pandas 1.4.4's `pandas/_libs/src/parser/tokenizer.c`
(`precise_xstrtod`, the default float converter since pandas 1.3, which is not correctly rounded; `str_to_int64`,
`str_to_uint64`, `to_boolean`) and of the column type inference of `pandas/_libs/parsers.pyx` (`_convert_tokens`:
int64, then uint64 when int64 overflows, then float64, bool and object; `_maybe_upcast` where NA cells were seen).
Pure functions over the cells' text; checked against pandas 1.4.4 by tests/reference/test_ribfrac_parsing_reference.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# pandas 1.4.4 STR_NA_VALUES: a cell that is exactly one of these is NA (NaN). "None" is not one (pandas 2.0 added it)
NA_WORDS = frozenset({"-1.#IND", "1.#QNAN", "1.#IND", "-1.#QNAN", "#N/A N/A", "#N/A", "N/A", "n/a", "NA", "<NA>",
                      "#NA", "NULL", "null", "NaN", "-NaN", "nan", "-nan", ""})
# _try_double_nogil: a cell the converter rejects is still a float if it is one of these, ignoring ASCII case
INFINITY_WORDS = {"inf": math.inf, "+inf": math.inf, "-inf": -math.inf, "infinity": math.inf,
                  "+infinity": math.inf, "-infinity": -math.inf}
INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1
_ASCII_SPACE = " \t\n\v\f\r"  # isspace_ascii
_ASCII_DIGITS = "0123456789"  # isdigit_ascii
_POWERS_OF_TEN = tuple(float(f"1e{k}") for k in range(309))  # the C literals 1., 1e1, ..., 1e308
_MAX_DIGITS = 17
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _int32(value: int) -> int:
    """A C `int` after `value` was computed in it (two's complement wrap, as the compiled code does)."""
    return (value + 2**31) % 2**32 - 2**31


def _skip(word: str, position: int, characters: str) -> int:
    while position < len(word) and word[position] in characters:
        position += 1
    return position


def _at(word: str, position: int) -> str:
    """The character at `position`, or "" at the end (C's terminating NUL)."""
    return word[position] if position < len(word) else ""


def _digit_at(word: str, position: int) -> bool:
    return position < len(word) and word[position] in _ASCII_DIGITS


def _ascii_lower(word: str) -> str | None:
    """`word` in lower case for strcasecmp, None if it is not ASCII (no ASCII word then compares equal)."""
    return word.translate(_ASCII_LOWER) if word.isascii() else None


def precise_xstrtod(word: str) -> tuple[float, int, bool]:
    """pandas 1.4.4 `precise_xstrtod(word, &end, '.', 'E', '\\0', skip_trailing=1, &error, NULL)`:
    (value, index where parsing stopped, whether `error` was set).

    Up to 17 significant digits are accumulated in a double (`number * 10. + digit`, each step rounded), further
    integer digits only raise the exponent, further decimals are skipped; the exponent's digits (at most 17) are
    accumulated in a C int; the result is scaled once by a power of ten from a table (multiplied, or divided for
    negative exponents, twice below 1e-308). An exponent above 308, no digit at all, or an infinite result is an
    error (ERANGE).
    """
    position = _skip(word, 0, _ASCII_SPACE)
    negative = _at(word, position) == "-"
    if _at(word, position) in ("-", "+"):
        position += 1
    number, exponent, num_digits, num_decimals = 0.0, 0, 0, 0
    while _digit_at(word, position):
        if num_digits < _MAX_DIGITS:
            number = number * 10.0 + (ord(word[position]) - 48)
            num_digits += 1
        else:
            exponent = _int32(exponent + 1)
        position += 1
    if _at(word, position) == ".":
        position += 1
        while num_digits < _MAX_DIGITS and _digit_at(word, position):
            number = number * 10.0 + (ord(word[position]) - 48)
            position += 1
            num_digits += 1
            num_decimals += 1
        if num_digits >= _MAX_DIGITS:
            position = _skip(word, position, _ASCII_DIGITS)
        exponent = _int32(exponent - num_decimals)
    if num_digits == 0:
        return 0.0, position, True
    if negative:
        number = -number
    if _at(word, position) in ("e", "E"):
        position += 1
        exponent_negative = _at(word, position) == "-"
        if _at(word, position) in ("-", "+"):
            position += 1
        exponent_digits, n = 0, 0
        while exponent_digits < _MAX_DIGITS and _digit_at(word, position):
            n = _int32(n * 10 + ord(word[position]) - 48)
            exponent_digits += 1
            position += 1
        exponent = _int32(exponent - n if exponent_negative else exponent + n)
        if exponent_digits == 0:
            position -= 1
    if exponent > 308:
        return math.inf, position, True
    if exponent > 0:
        number *= _POWERS_OF_TEN[exponent]
    elif exponent < -308:
        if exponent < -616:
            number = 0.0
        else:
            number /= _POWERS_OF_TEN[-308 - exponent]
            number /= _POWERS_OF_TEN[308]
    else:
        number /= _POWERS_OF_TEN[-exponent]
    error = math.isinf(number)
    position = _skip(word, position, _ASCII_SPACE)
    return number, position, error


def parse_float(word: str) -> float | None:
    """One cell of a float64 column (`_try_double_nogil`, NA cells aside): the converter's value when it took the
    whole cell without error, else ±inf for an infinity word, else None (the cell makes the column no float64)."""
    number, end, error = precise_xstrtod(word)
    if not error and end != 0 and end == len(word):
        return number
    return INFINITY_WORDS.get(_ascii_lower(word))


class _Overflow(Exception):
    pass


def _parse_integer(word: str, low: int, high: int, unsigned: bool) -> int | None:
    """`str_to_int64` / `str_to_uint64` for one cell: the value, None for a cell that is no integer (no digits,
    other characters), _Overflow when the digits leave low..high. Unsigned: a '-' sign returns -1 at once (the C
    code records `seen_sint` and reports no error, whatever follows)."""
    position = _skip(word, 0, _ASCII_SPACE)
    sign = _at(word, position)
    if unsigned and sign == "-":
        return -1
    if sign in ("-", "+"):
        position += 1
    start = position
    position = _skip(word, position, _ASCII_DIGITS)
    if position == start:
        return None
    value = int(word[start:position]) * (-1 if sign == "-" else 1)
    if not low <= value <= high:
        raise _Overflow
    return value if _skip(word, position, _ASCII_SPACE) == len(word) else None


@dataclass(frozen=True)
class Column:
    """A parsed column: its dtype (`int64`, `uint64`, `float64`, `bool`, `object`) and one value per cell: int,
    float (NaN for NA cells of numeric columns), bool, or, in an object column, str (text kept as written), NaN
    (an NA cell) or bool (a bool column with NA cells, which pandas upcasts to object)."""

    kind: str
    values: tuple


def _int64_column(words: Sequence[str]) -> Column | None:
    """`_try_int64` and `_maybe_upcast`: None when some cell is no integer; _Overflow as pandas raises it."""
    values: list = []
    na = False
    for word in words:
        if word in NA_WORDS:
            values.append(None)
            na = True
            continue
        value = _parse_integer(word, INT64_MIN, INT64_MAX, unsigned=False)
        if value is None:
            return None
        values.append(value)
    if not na:
        return Column("int64", tuple(values))
    # NA cells hold INT64_MIN until `_maybe_upcast` makes every INT64_MIN NaN and the rest float64
    return Column("float64", tuple(math.nan if v is None or v == INT64_MIN else float(v) for v in values))


def _uint64_column(words: Sequence[str]) -> Column | None:
    """`_try_uint64`: None when some cell is no integer; _Overflow for a value above 2**64-1 or a negative cell;
    ValueError when a value above 2**63-1 meets an NA or negative cell (`uint64_conflict`)."""
    values: list[int] = []
    seen_sint = seen_null = seen_uint = False
    for word in words:
        if word in NA_WORDS:
            seen_null = True
            values.append(0)
            continue
        value = _parse_integer(word, 0, UINT64_MAX, unsigned=True)
        if value is None:
            return None
        if value < 0:
            seen_sint = True
            value = 0
        seen_uint |= value > INT64_MAX
        values.append(value)
    if seen_uint and (seen_sint or seen_null):
        raise ValueError("cannot convert to a numerical dtype")
    if seen_sint:
        raise _Overflow
    return Column("uint64", tuple(values))


def _float64_column(words: Sequence[str]) -> Column | None:
    values = []
    for word in words:
        value = math.nan if word in NA_WORDS else parse_float(word)
        if value is None:
            return None
        values.append(value)
    return Column("float64", tuple(values))


def _bool_column(words: Sequence[str]) -> Column | None:
    values: list = []
    for word in words:
        if word in NA_WORDS:
            values.append(math.nan)
        elif _ascii_lower(word) in ("true", "false"):  # pandas' true/false sets, then to_boolean's strcasecmp
            values.append(_ascii_lower(word) == "true")
        else:
            return None
    return Column("bool" if not any(v is math.nan for v in values) else "object", tuple(values))


def _object_column(words: Sequence[str], na_filter: bool) -> Column:
    return Column("object", tuple(math.nan if na_filter and word in NA_WORDS else word for word in words))


def parse_column(words: Sequence[str]) -> Column:
    """pandas 1.4.4 `_convert_tokens` without a requested dtype: the first of int64 (uint64 when it overflows),
    float64, bool that takes every cell, else object. An overflow in the uint64 attempt makes the column object;
    a uint64 conflict makes it object with NA cells kept as their text."""
    try:
        try:
            column = _int64_column(words)
        except _Overflow:
            column = _uint64_column(words)
    except _Overflow:
        return _object_column(words, na_filter=True)
    except ValueError:
        return _object_column(words, na_filter=False)
    return column or _float64_column(words) or _bool_column(words) or _object_column(words, na_filter=True)


def first_text_cell(column: Column) -> str | None:
    """The first cell of a text column that is no number, no bool and no NA for pandas (one that makes the column
    text), else the first text cell (a column made text by integers beyond int64), else None."""
    texts = [value for value in column.values if isinstance(value, str)]
    return next((text for text in texts if text not in NA_WORDS and parse_float(text) is None
                 and _ascii_lower(text) not in ("true", "false")), texts[0] if texts else None)


def is_text(value: object) -> bool:
    """Whether a parsed value is text (a cell of an object column that is no NA and no bool)."""
    return isinstance(value, str)


def as_number(value: object) -> float:
    """A numeric value as numpy compares it with a float64 threshold (ints rounded to the nearest double, bools 0/1,
    NA NaN); text has no number (ValueError)."""
    if isinstance(value, str):
        raise ValueError(f"text {value!r} is no number")
    return float(value)
