"""`python -m medchallenge.gateway --config FILE`."""

import sys

from .main import main

sys.exit(main())
