"""pandas 1.4.4's `pd.read_csv` with its defaults, as the RibFrac evaluation calls it (docs/metrics/ribfrac.md §1.4):
the tokenizer (tokenizer.py), the frame's header, index and chunks (frame.py), each column's type (columns.py)."""

from .columns import (INFINITY_WORDS, NA_WORDS, Column, as_number, first_text_cell, is_text, parse_column, parse_float,
                      precise_xstrtod)
from .frame import Frame, ReadCsvError, read_csv, read_csv_bytes

__all__ = ["INFINITY_WORDS", "NA_WORDS", "Column", "Frame", "ReadCsvError", "as_number", "first_text_cell", "is_text",
           "parse_column", "parse_float", "precise_xstrtod", "read_csv", "read_csv_bytes"]
