"""Progress on stderr for the command line: tqdm bars with rates and ETAs, and ``memflow:`` notes.

Nothing is shown with ``--quiet`` or ``--json`` (:data:`memflow.progress.SILENT`).
"""
from __future__ import annotations

import contextlib
import sys
from typing import IO, Iterator

from tqdm import tqdm

from ..progress import SILENT, Progress, Task

__all__ = ["TqdmProgress", "reporter"]


class _Bar(Task):
    def __init__(self, bar: tqdm):
        self.bar = bar

    def update(self, n: int = 1, note: str | None = None) -> None:
        if note is not None:
            self.bar.set_postfix_str(note, refresh=False)
        self.bar.update(n)

    def set(self, done: int, note: str | None = None) -> None:
        if note is not None:
            self.bar.set_postfix_str(note, refresh=False)
        self.bar.update(done - self.bar.n)


class TqdmProgress(Progress):
    """Bars on ``stream`` (stderr), refreshed at most every half second."""

    def __init__(self, stream: IO[str] | None = None):
        self.stream = stream or sys.stderr

    def note(self, msg: str) -> None:
        tqdm.write(f"memflow: {msg}", file=self.stream)

    @contextlib.contextmanager
    def task(self, desc: str, total: int | None = None, unit: str = "it") -> Iterator[Task]:
        bar = tqdm(total=total, desc=f"memflow: {desc}", unit=f" {unit}", file=self.stream, mininterval=0.5,
                   dynamic_ncols=True, leave=True, smoothing=0.3)
        try:
            yield _Bar(bar)
        finally:
            bar.close()


def reporter(quiet: bool) -> Progress:
    """The command's progress: bars on stderr, or nothing when it is quiet."""
    return SILENT if quiet else TqdmProgress()
