"""DICOM in and out: series reading (series.py), synthetic CT series (synthetic.py), result objects (sr.py)."""
