"""The one error of the job runner."""

from __future__ import annotations

from ..errors import InputError


class EmulationError(InputError):
    """A job, upload or model that grand-challenge would fail or refuse: one line saying which and why."""
