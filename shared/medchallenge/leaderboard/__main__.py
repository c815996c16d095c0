"""`python -m medchallenge.leaderboard ...`, the same as `medchallenge leaderboard ...`."""

from .command import main

raise SystemExit(main())
