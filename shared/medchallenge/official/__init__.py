"""The official interpreters' behaviour, on whichever interpreter runs the project: Python 3.9's text operations
(Unicode 13.0: unicode13) for the caption scoring, and `int()`/`float()` of participant text as Python 3.9 and 3.7 read
it (numbers). Their tables, probed from those interpreters by tools/make_unicode13_table.py and
tools/make_decimal_digits_table.py, are in official/data (unicode_tables reads them)."""
