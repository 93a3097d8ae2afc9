"""Progress on stderr for the command line: tqdm bars with rates and ETAs, and ``memflow:`` notes.

Nothing is shown with ``--quiet`` or ``--json`` (:data:`memflow.progress.SILENT`).
"""
from __future__ import annotations

import contextlib
import sys
import threading
from typing import IO, Iterator

from tqdm import tqdm

tqdm.monitor_interval = 0  # no monitor thread: the bars' own ticker redraws them, and a process without
# threads can fork a model file's trial (memflow.model_guard)

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

    def detail(self, note: str) -> None:
        self.bar.set_postfix_str(note, refresh=False)  # shown at the next refresh (at most a second away)


class TqdmProgress(Progress):
    """Bars on ``stream`` (stderr). A bar is redrawn when its task moves on and, between moves, every
    ``tick_s`` seconds (its elapsed time), so a long step never leaves the terminal silent."""

    def __init__(self, stream: IO[str] | None = None, tick_s: float = 1.0):
        self.stream = stream or sys.stderr
        self.tick_s = tick_s

    def note(self, msg: str) -> None:
        tqdm.write(f"memflow: {msg}", file=self.stream)

    @contextlib.contextmanager
    def task(self, desc: str, total: int | None = None, unit: str = "it") -> Iterator[Task]:
        bar = tqdm(total=total, desc=f"memflow: {desc}", unit=f" {unit}", file=self.stream, mininterval=0.5,
                   dynamic_ncols=True, leave=True, smoothing=0.3)
        done = threading.Event()

        def tick() -> None:
            while not done.wait(self.tick_s):
                with bar.get_lock():
                    bar.refresh()

        ticker = threading.Thread(target=tick, name="memflow-progress", daemon=True)
        ticker.start()
        try:
            yield _Bar(bar)
        finally:
            done.set()
            # bounded: Ctrl-C can land in the main thread between tqdm's two locks (it takes a process
            # lock, then a thread lock), leaving the first held and the ticker waiting on it for good;
            # the ticker is a daemon, and the main thread's own locks are re-entrant for close()
            ticker.join(timeout=2 * self.tick_s)
            bar.close()


def reporter(quiet: bool) -> Progress:
    """The command's progress: bars on stderr, or nothing when it is quiet."""
    return SILENT if quiet else TqdmProgress()
