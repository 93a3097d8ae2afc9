"""Settings read from the environment that the command line checks before any work starts.

``MEMFLOW_TIMING_REPEATS``: at most this many timed steps per measurement of a CPU profile (each
measurement's repeats are capped, never raised). Fewer steps make a quick plan whose costs are noisier;
below 2 nothing checks them against a loaded host (:func:`memflow.profile.timing.steady_times`). The test
suite sets 1: it checks memory and behaviour, and the benchmarks measure time. Like every ``MEMFLOW_*``
setting it is part of the profile cache's key.
"""
from __future__ import annotations

import os

from .errors import ConfigError

__all__ = ["timing_repeats_cap", "check"]


def timing_repeats_cap() -> int | None:
    """``MEMFLOW_TIMING_REPEATS`` as a whole number >= 1, or None where unset (one-line error otherwise)."""
    v = os.environ.get("MEMFLOW_TIMING_REPEATS", "").strip()
    if not v:
        return None
    if not v.isdigit() or int(v) < 1:
        raise ConfigError(f"MEMFLOW_TIMING_REPEATS must be a whole number of at least 1, got {v!r}")
    return int(v)


def check() -> None:
    """Each setting above, checked (the command line, before a command starts)."""
    timing_repeats_cap()
