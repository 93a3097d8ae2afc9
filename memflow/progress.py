"""How long work reports its progress: counted tasks (with rates and ETAs where shown) and notes.

The stages take a :class:`Progress` and call it; this base class shows
nothing (the API's default, ``--quiet`` and ``--json``). The command line
passes :class:`memflow.cli.progress.TqdmProgress`, which draws tqdm bars
and notes on stderr.
"""
from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import Iterator

__all__ = ["Progress", "Task", "SILENT", "LineProgress", "as_progress", "reporting", "detail"]


class Task:
    """One counted piece of work; ``update`` moves it on, with an optional note (the best plan so far, a loss)."""

    def update(self, n: int = 1, note: str | None = None) -> None:
        pass

    def set(self, done: int, note: str | None = None) -> None:
        """Set how much is done (for work that reports a running count)."""

    def detail(self, note: str) -> None:
        """Say where inside the current step the work is, without moving on (which node is traced)."""


_CURRENT: ContextVar[Task | None] = ContextVar("memflow_progress_task", default=None)


@contextlib.contextmanager
def reporting(task: Task) -> Iterator[None]:
    """Within this block, :func:`detail` goes to ``task``: code deep in a stage (the tracer's per-node
    phases, the timer's repeats) says where it is without a progress object passed down to it."""
    token = _CURRENT.set(task)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def detail(note: str) -> None:
    """Tell the task being reported (if any) where inside it the work is."""
    task = _CURRENT.get()
    if task is not None:
        task.detail(note)


class Progress:
    """Silent progress: what a stage calls, whether or not anyone is shown it."""

    def note(self, msg: str) -> None:
        """One line about what is happening (e.g. which phase starts, what was found)."""

    @contextlib.contextmanager
    def task(self, desc: str, total: int | None = None, unit: str = "it") -> Iterator[Task]:
        """A counted task: ``total`` steps of ``unit`` (None: unknown)."""
        yield Task()


SILENT = Progress()


class _LineTask(Task):
    def __init__(self, out, desc: str, total: int | None, unit: str):
        self.out, self.desc, self.total, self.unit, self.done = out, desc, total, unit, 0

    def update(self, n: int = 1, note: str | None = None) -> None:
        self.done += n
        if note:
            self.out(f"{self.desc}: {self._count()}, {note}")

    def set(self, done: int, note: str | None = None) -> None:
        self.done = done
        if note:
            self.out(f"{self.desc}: {self._count()}, {note}")

    def _count(self) -> str:
        return f"{self.done}/{self.total} {self.unit}" if self.total else f"{self.done} {self.unit}"


class LineProgress(Progress):
    """Progress as lines to a callable (``memflow.plan(..., progress=print)``): each note, each task
    when it starts and ends, and each update that carries a note (the best plan so far)."""

    def __init__(self, out):
        self.out = out

    def note(self, msg: str) -> None:
        self.out(msg)

    @contextlib.contextmanager
    def task(self, desc: str, total: int | None = None, unit: str = "it") -> Iterator[Task]:
        t = _LineTask(self.out, desc, total, unit)
        self.out(f"{desc} ...")
        yield t
        self.out(f"{desc}: done ({t._count()})")


def as_progress(progress) -> Progress:
    """A :class:`Progress` as given, a callable taking one line wrapped in :class:`LineProgress`,
    None as :data:`SILENT`."""
    if progress is None:
        return SILENT
    if isinstance(progress, Progress):
        return progress
    if callable(progress):
        return LineProgress(progress)
    raise TypeError(f"progress must be a memflow.progress.Progress or a callable taking one line, "
                    f"not {type(progress).__name__}")
