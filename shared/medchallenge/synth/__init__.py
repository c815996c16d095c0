"""Synthetic data generators, one module per challenge (`python -m medchallenge.synth CHALLENGE --help`)."""
