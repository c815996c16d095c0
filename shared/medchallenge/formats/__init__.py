"""Parsers of the challenges official file formats."""
