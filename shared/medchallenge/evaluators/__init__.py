"""Evaluator logic per challenge (per-case step, aggregate step, main)."""
