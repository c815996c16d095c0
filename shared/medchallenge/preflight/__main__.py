"""`python -m medchallenge.preflight ...`, the same as `medchallenge preflight ...`."""

from .run import main

raise SystemExit(main())
