"""Metric functions over plain arrays and records, one module per challenge."""
