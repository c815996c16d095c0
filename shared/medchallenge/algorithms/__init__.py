"""Inference code of the project's algorithm images, one module per challenge."""
