"""Progress lines on stderr (none with --quiet or --json)."""
from __future__ import annotations

import sys
from typing import Callable

__all__ = ["reporter"]


def _stderr(msg: str) -> None:
    print(f"memflow: {msg}", file=sys.stderr, flush=True)


def reporter(quiet: bool) -> Callable[[str], None] | None:
    """A progress callback for the planner, or None when the command is quiet."""
    return None if quiet else _stderr
