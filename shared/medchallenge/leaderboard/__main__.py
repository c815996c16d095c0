"""`python -m medchallenge.leaderboard ...`, the same as `medchallenge leaderboard ...`."""

from .table import main

raise SystemExit(main())
