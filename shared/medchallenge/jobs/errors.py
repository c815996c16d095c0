"""The errors of the job runner."""

from __future__ import annotations

from ..errors import InputError


class EmulationError(InputError):
    """A job, upload or model that grand-challenge would fail or refuse: one line saying which and why."""


class EngineFault(EmulationError):
    """The container engine failed, not the job or its image (not installed, not answering, an error of its own, the
    image not in it): a cause outside the job, which the phase runs again and the gateway's note names."""
