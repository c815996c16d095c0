"""How pandas 1.4.4's C tokenizer (`pd.read_csv` with its defaults) splits a CSV text into lines and fields.

Spec: docs/metrics/ribfrac.md §1.4. A port of `tokenize_bytes`, `end_line` and `parser_handle_eof` of pandas 1.4.4's
`pandas/_libs/src/parser/tokenizer.c` for the default options (delimiter `,`, quote `"` doubled inside quotes, no
escape or comment character, `skip_blank_lines=True`, lines ended by `\\n`, `\\r\\n` or a lone `\\r`), checked against
pandas 1.4.4 by tests/reference/test_ribfrac_frame_reference.py. Fields are returned as the Python strings pandas
makes of them: cut at the first NUL (pandas reads each field as a C string).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# states of tokenize_bytes that the default options can reach
(START_RECORD, START_FIELD, IN_FIELD, IN_QUOTED_FIELD, QUOTE_IN_QUOTED_FIELD, EAT_CRNL, EAT_CRNL_NOP,
 WHITESPACE_LINE) = range(8)
CHUNK_CHARS = 262144  # parser->chunksize: the text is handed to the tokenizer in pieces of this many characters
_UNQUOTED_STATES = frozenset({START_FIELD, IN_FIELD, QUOTE_IN_QUOTED_FIELD})
_UNQUOTED_END = re.compile(r"[,\n\r]")
# a line the state machine would read field by field without a quirk: each field quoted whole ("" inside quotes is
# one ") or unquoted without a line end, the line ended by \n, \r\n or the end of the text
_QUOTED, _UNQUOTED = r'"(?:[^"]|"")*"', r'[^,"\r\n][^,\r\n]*'
_PLAIN_LINE = re.compile(rf'((?:{_QUOTED}|{_UNQUOTED})?(?:,(?:{_QUOTED}|{_UNQUOTED})?)*)(?:\r?\n|\Z)')
_PLAIN_FIELD = re.compile(r'(?:"((?:[^"]|"")*)"|([^,]*)),')
_BLANK = " \t"  # isblank() in the C locale
_BLANK_LED_LINE = re.compile(r"(?:^|[\n\r])[ \t]")


def buffer_lines(table_width: int) -> int:
    """Rows per chunk of the default low-memory reading (`parsers.pyx`): the largest power of two below
    2**20 // the number of fields of the first data line."""
    heuristic, lines = 2**20 // max(1, table_width), 1
    while lines * 2 < heuristic:
        lines *= 2
    return lines


class TokenizerError(ValueError):
    """pandas' C tokenizer stops: the text of its message (`ParserError: Error tokenizing data. C error: ...`)."""


class RereadError(TokenizerError):
    """The tokenizer would read the same lines again and again: pandas then fails (`Buffer overflow caught`) or
    repeats them until its current call has its rows, depending on the free bytes of its buffer, which this port
    does not count (docs/metrics/ribfrac.md §1.4): refused."""


@dataclass(frozen=True)
class Lines:
    """The tokenized lines: fields per line (every line after the first padded to the previous line's count) and,
    per line, pandas' line number at its end (`file_lines`: 1-based, blank lines counted, not the line breaks
    inside quotes)."""

    fields: list[list[str]]
    line_numbers: list[int]


def _cut_at_nul(fields: list[str]) -> list[str]:
    return [field.split("\x00", 1)[0] if "\x00" in field else field for field in fields]


class _Tokenizer:
    """The state machine (files with quotes or lone carriage returns): a line that needs none of its quirks at once
    (`_PLAIN_LINE`), any other one character by character, runs of field characters at once."""

    def __init__(self, text: str, start: int) -> None:
        self.text = text
        self.lines: list[list[str]] = []
        self.line_numbers: list[int] = []
        self.fields: list[str] = []
        self.field: list[str] = []
        self.file_lines = 0
        # pandas tokenizes in calls: the header and first data line, then chunks of rows (`buffer_lines`); a call
        # starts where the last one stopped (`datapos`), which bounds how far back WHITESPACE_LINE reads again
        self.call_start, self.call_limit, self.call_ended = start, 2, False
        self.backtracks: set[int] = set()

    def end_field(self) -> None:
        self.fields.append("".join(self.field))
        self.field.clear()

    def end_line(self) -> None:
        """`end_line`: a line with more fields than the one before is an error from the third line on (the header
        and the first data line are exempt: extra fields there make an index); fewer fields are padded."""
        count = len(self.fields)
        if self.lines:
            expected = len(self.lines[-1])
            if len(self.lines) > 1 and count > expected:
                raise TokenizerError(f"Expected {expected} fields in line {self.file_lines + 1}, saw {count}")
            self.fields.extend([""] * (expected - count))
        self.file_lines += 1
        self.lines.append(self.fields)
        self.line_numbers.append(self.file_lines)
        self.fields = []
        if len(self.lines) == self.call_limit:
            self.call_ended = True
            self.call_limit += buffer_lines(len(self.lines[1])) - (1 if self.call_limit == 2 else 0)

    def backtrack(self, position: int) -> int:
        """WHITESPACE_LINE met a character that is no blank: read again from after the last `\\n` before it (not
        before the start of the current chunk), now as fields."""
        floor = max(self.call_start, (position // CHUNK_CHARS) * CHUNK_CHARS)
        newline = self.text.rfind("\n", floor, position)
        again = floor if newline < 0 else newline + 1
        if again in self.backtracks and self.call_limit > 2:
            raise RereadError("a line after a lone carriage return starts with blanks, which makes pandas 1.4.4 read "
                              "the same lines again and again (until its buffer overflows, or up to 131,072 times)")
        self.backtracks.add(again)
        return again

    def run(self) -> Lines:
        text, state, i, n = self.text, START_RECORD, self.call_start, len(self.text)
        field = self.field
        while i < n:
            if self.call_ended:
                self.call_start, self.call_ended = i, False
                self.backtracks.clear()
            c = text[i]
            if state == START_RECORD and c not in " \t\r\n":
                line = _PLAIN_LINE.match(text, i)
                if line:
                    self.fields = [quoted.replace('""', '"') if quoted else unquoted
                                   for quoted, unquoted in _PLAIN_FIELD.findall(line.group(1) + ",")]
                    self.end_line()
                    i = line.end()
                    continue
            if state == START_RECORD:
                if c == "\n":
                    self.file_lines += 1
                    i += 1
                    continue
                if c == "\r":
                    self.file_lines += 1
                    state = EAT_CRNL_NOP
                    i += 1
                    continue
                if c in _BLANK:
                    state = WHITESPACE_LINE
                    i += 1
                    continue
                state = START_FIELD
            if state in _UNQUOTED_STATES:  # START_FIELD, IN_FIELD and QUOTE_IN_QUOTED_FIELD (after a closing quote)
                if c == "\n" or c == "\r" or c == ",":
                    self.end_field()
                    if c == "\n":
                        self.end_line()
                    state = START_RECORD if c == "\n" else EAT_CRNL if c == "\r" else START_FIELD
                elif c == '"' and state == START_FIELD:
                    state = IN_QUOTED_FIELD
                elif c == '"' and state == QUOTE_IN_QUOTED_FIELD:  # "" inside quotes is one "
                    field.append(c)
                    state = IN_QUOTED_FIELD
                else:  # this character and those up to the next comma or line end (as pandas' fast scan)
                    found = _UNQUOTED_END.search(text, i + 1)
                    end = found.start() if found else n
                    field.append(text[i:end])
                    state, i = IN_FIELD, end
                    continue
            elif state == IN_QUOTED_FIELD:
                if c == '"':
                    state = QUOTE_IN_QUOTED_FIELD
                else:  # up to the next quote
                    end = text.find('"', i + 1)
                    end = n if end < 0 else end
                    field.append(text[i:end])
                    i = end
                    continue
            elif state == EAT_CRNL:
                if c == "\n":
                    self.end_line()
                    state = START_RECORD
                elif c == ",":  # END_LINE_AND_FIELD_STATE: the comma ends an empty first field
                    self.end_line()
                    self.end_field()
                    state = START_FIELD
                else:  # a lone \r ended the line: this character starts the next one
                    self.end_line()
                    state = START_RECORD
                    continue
            elif state == EAT_CRNL_NOP:  # after a skipped blank line ended by \r: a \n or a comma is swallowed
                state = START_RECORD
                if c != "\n" and c != ",":
                    continue
            elif state == WHITESPACE_LINE:
                if c == "\n":
                    self.file_lines += 1
                    state = START_RECORD
                elif c == "\r":
                    self.file_lines += 1
                    state = EAT_CRNL_NOP
                elif c not in _BLANK:
                    i = self.backtrack(i)
                    state = START_FIELD
                    continue
            i += 1
        if state == IN_QUOTED_FIELD:
            raise TokenizerError(f"EOF inside string starting at row {self.file_lines}")
        if state in (IN_FIELD, START_FIELD, QUOTE_IN_QUOTED_FIELD):
            self.end_field()
        if state in (IN_FIELD, START_FIELD, QUOTE_IN_QUOTED_FIELD, EAT_CRNL):
            self.end_line()
        return Lines([_cut_at_nul(fields) for fields in self.lines], self.line_numbers)


def _tokenize_plain(text: str, start: int) -> Lines:
    """The same for a text without quotes or carriage returns, line by line: blank lines and lines of only blanks
    are skipped, every other line is split at each comma."""
    lines: list[list[str]] = []
    line_numbers: list[int] = []
    has_nul = "\x00" in text
    body = text[start:]
    raw = body.split("\n")
    if raw and raw[-1] == "":
        raw.pop()
    previous = -1
    for number, line in enumerate(raw, 1):
        if not line or (line[0] in _BLANK and not line.strip(_BLANK)):
            continue
        fields = line.split(",")
        count = len(fields)
        if previous >= 0:
            if len(lines) > 1 and count > previous:
                raise TokenizerError(f"Expected {previous} fields in line {number}, saw {count}")
            if count < previous:
                fields.extend([""] * (previous - count))
        if has_nul:
            fields = _cut_at_nul(fields)
        lines.append(fields)
        line_numbers.append(number)
        previous = len(fields)
    return Lines(lines, line_numbers)


def tokenize(text: str) -> Lines:
    """The lines and fields pandas 1.4.4 makes of a decoded CSV text (a leading byte order mark skipped).

    Raises:
        TokenizerError: a line has more fields than the line before it (from the third line on), or a quote is not
        closed.
    """
    start = 1 if text.startswith("\ufeff") else 0
    # a line that starts with blanks is read again from its start, unless it began in an earlier chunk
    straddles = len(text) > CHUNK_CHARS and _BLANK_LED_LINE.search(text) is not None
    if '"' not in text and not straddles:
        if "\r" not in text:
            return _tokenize_plain(text, start)
        if text.count("\r") == text.count("\r\n"):
            return _tokenize_plain(text.replace("\r\n", "\n"), start)
    return _Tokenizer(text, start).run()
