"""Inference code of the project's algorithm images: the runner they share (`runner`), one module per challenge."""
