"""Helpers shared by the CLI subcommands."""
from __future__ import annotations

from ..errors import ConfigError

__all__ = ["check_batch_size"]


def check_batch_size(value: int | None, spec) -> int:
    bs = spec.batch_size if value is None else value
    if bs < 1:
        raise ConfigError(f"--batch-size must be a positive integer, got {bs}")
    return bs
