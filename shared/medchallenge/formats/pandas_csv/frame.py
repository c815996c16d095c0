"""The DataFrame `pd.read_csv(path)` of pandas 1.4.4 builds, with its defaults: header, index and typed columns.

Spec: docs/metrics/ribfrac.md §1.4. After the tokenizer (tokenizer.py): the first line names the columns (an
empty name is `Unnamed: i`, a repeated one is renamed `name.1`, `name.2`, ... as `parsers.pyx` `_get_header`
does); when the first data line has more fields than the header, the first fields become the index (pandas'
implicit index) and the names go to the last fields; each column's type is inferred from all of its cells
(columns.py), in chunks of rows as the default `low_memory=True` reads them, joined as pandas joins the chunks.
Checked against pandas 1.4.4 by tests/reference/test_ribfrac_frame_reference.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from .columns import Column, parse_column
from .tokenizer import RereadError, TokenizerError, buffer_lines, tokenize


class ReadCsvError(ValueError):
    """`pd.read_csv` raises: `kind` is pandas' exception (ParserError, EmptyDataError), the message is pandas'."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Frame:
    """A read CSV: column names (after pandas' renaming), one parsed Column each, the index columns (none: the
    default RangeIndex) and, per row, pandas' line number at the row's end (tokenizer.Lines)."""

    columns: tuple[str, ...]
    data: tuple[Column, ...]
    index: tuple[Column, ...]
    line_numbers: tuple[int, ...]
    cells: tuple[tuple[str, ...], ...] = ()  # per column, each cell as written (cut at a NUL)

    def __len__(self) -> int:
        return len(self.line_numbers)



def header_names(words: list[str]) -> list[str]:
    """`_get_header`: `Unnamed: i` for an empty name, then repeated names renamed, the written names first and the
    unnamed ones after them (`a, a, a.1` -> `a, a.2, a.1`: a new name is skipped while the header holds it)."""
    names = [word if word else f"Unnamed: {i}" for i, word in enumerate(words)]
    counts: dict[str, int] = {}
    for i in [i for i, word in enumerate(words) if word] + [i for i, word in enumerate(words) if not word]:
        name = names[i]
        original, count = name, counts.get(name, 0)
        while count > 0:
            counts[original] = count + 1
            name = f"{original}.{count}"
            count = count + 1 if name in names else counts.get(name, 0)
        names[i] = name
        counts[name] = count + 1
    return names


def join_chunks(chunks: list[Column]) -> Column:
    """`_concatenate_chunks` (`concat_compat`) of one column's chunks: one kind stays; text with anything is text
    (object), each value kept as its chunk held it; numbers and bools take numpy's common type: float64 with a
    float64 chunk or with both int64 and uint64, else uint64 with a uint64 chunk, else int64 (bools as 0 and 1)."""
    if len(chunks) == 1:
        return chunks[0]
    kinds = {chunk.kind for chunk in chunks}
    values = tuple(value for chunk in chunks for value in chunk.values)
    if len(kinds) == 1:
        return Column(kinds.pop(), values)
    if "object" in kinds:
        return Column("object", values)
    if "float64" in kinds or {"int64", "uint64"} <= kinds:
        return Column("float64", tuple(float(v) for v in values))
    return Column("uint64" if "uint64" in kinds else "int64", tuple(int(v) for v in values))


def _parse(cells: list[str], chunk: int) -> Column:
    """One column: text (object) without rows, else each chunk's type, joined."""
    if not cells:
        return Column("object", ())
    return join_chunks([parse_column(cells[start:start + chunk]) for start in range(0, len(cells), chunk)])


def read_csv(text: str) -> Frame:
    """`pd.read_csv` of pandas 1.4.4 on a decoded file (strict UTF-8, as pandas opens it), default options.

    Raises:
        ReadCsvError: pandas fails: no line at all (EmptyDataError), a line with too many fields or an open quote
        (ParserError, with pandas' message); or lines pandas would read again and again (Reread: refused).
    """
    try:
        lines = tokenize(text)
    except RereadError as exc:
        raise ReadCsvError("Reread", str(exc)) from None
    except TokenizerError as exc:
        raise ReadCsvError("ParserError", f"Error tokenizing data. C error: {exc}") from None
    if not lines.fields:
        raise ReadCsvError("EmptyDataError", "No columns to parse from file")
    header, rows = lines.fields[0], lines.fields[1:]
    names = header_names(header)
    width = len(rows[0]) if rows else len(header)
    leading = max(0, width - len(header))
    chunk = buffer_lines(width)
    cells = [tuple(row[j] for row in rows) for j in range(width)]
    columns = [_parse(list(column), chunk) for column in cells]
    return Frame(tuple(names), tuple(columns[leading:]), tuple(columns[:leading]), tuple(lines.line_numbers[1:]),
                 tuple(cells[leading:]))


def read_csv_bytes(data: bytes) -> Frame:
    """`read_csv` of a file's bytes, decoded as pandas opens the file (UTF-8, strict; a byte order mark is skipped
    by the tokenizer). Raises ReadCsvError (`UnicodeDecodeError` too)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReadCsvError("UnicodeDecodeError", f"the file is not UTF-8 (byte {exc.start}: {exc.reason})") from None
    return read_csv(text)
