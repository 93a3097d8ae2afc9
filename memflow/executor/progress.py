"""A run's progress, as it happens: ranks append events to a file that the launcher tails.

The workers' output goes to the run's log, not the terminal; so rank 0 notes
when every rank is ready, and the first rank of the last stage (the one that
sees the loss) notes every step, each as one JSON line appended to the run's
progress file (``RunConfig.progress_file``). The launcher reads new lines
while it waits for the ranks (every 0.1 s) and hands each to its ``progress``
callback as text: ``rank 1: step 3/5, loss 4.61, 0.21 s``.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Callable

__all__ = ["ProgressLog", "ProgressTail", "describe"]


class ProgressLog:
    """A worker's end: ``log(event="step", ...)`` appends one JSON line (with the time) to ``path``."""

    def __init__(self, path: str | None):
        self.path = path

    def __call__(self, **event: Any) -> None:
        if not self.path:
            return
        line = (json.dumps({**event, "at": time.time()}) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)  # one write of a short line: ranks appending at once do not interleave
        finally:
            os.close(fd)


def describe(event: dict[str, Any]) -> str:
    """One progress line for an event."""
    kind, rank = event.get("event"), event.get("rank", "?")
    if kind == "ready":
        return (f"{event['world']} rank(s) ready in {event['seconds']:.1f} s (model built and captured); "
                f"training steps {event['first'] + 1}..{event['steps']}")
    if kind == "resumed":
        return f"resumed from {event['path']} ({event['done']} steps done)"
    if kind == "step":
        shard = " (its data-parallel shard)" if event.get("dp", 1) > 1 else ""
        return (f"rank {rank}: step {event['step']}/{event['steps']}, loss {event['loss']:.6g}{shard}, "
                f"{event['seconds']:.2f} s")
    return f"rank {rank}: {kind}"


class ProgressTail:
    """The launcher's end: each call reads the lines added to ``path`` since the last and passes them on."""

    def __init__(self, path: str, emit: Callable[[str], None] | None):
        self.path, self.emit = path, emit
        self.pos, self.buf = 0, b""

    def __call__(self) -> None:
        if self.emit is None:
            return
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
        except FileNotFoundError:
            return
        self.pos += len(data)
        *lines, self.buf = (self.buf + data).split(b"\n")
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            self.emit(describe(event))
