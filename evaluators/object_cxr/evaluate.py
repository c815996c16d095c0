"""object-CXR evaluator entry point: FROC as the official froc.py, and ROC AUC (see README.md)."""

from medchallenge.evaluators.object_cxr import main

if __name__ == "__main__":
    raise SystemExit(main())
