"""medchallenge: run medical-imaging challenge algorithms and score them as the official evaluators did."""

__version__ = "0.1.0"
