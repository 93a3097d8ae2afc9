"""Work in a forked child that inherits this process's state.

A ``multiprocessing`` pool worker gets its task pickled (every graph, then a
context that builds its simulators and layouts again; a fake model that must be
exported again); a forked child inherits them as they stand, so only its result
travels, pickled, back. Used by the profiler (sizes traced beside each other)
and the search (its extra chains). Linux only (fork elsewhere is not safe to
rely on); a child that fails or hangs gives None and the caller does the work
itself. The child dies with its parent (``memflow.procs.die_with_parent``).
Imports only :mod:`memflow.procs` of memflow: the record-level packages may use it.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import time
from typing import Any, Callable

from .procs import die_with_parent

__all__ = ["ForkedJobs"]


def _child(fn: Callable[[], Any], conn, parent: int) -> None:
    die_with_parent(parent=parent)
    # the parent decides this child's end: SIGTERM (multiprocessing's exit handler terminates daemon
    # children, then joins them) ends it at once, even where the parent had a handler of its own
    # when it forked (memflow.procs.sigterm_raises: a Terminated raised here would send on a pipe
    # nobody reads and block the parent's exit); Ctrl-C is the parent's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # nothing the child logs is the user's to read: where it fails the parent redoes the work and says
    # why itself (torch's fake tensors log a traceback per failed op, the parent's quiet capture aside)
    logging.disable(logging.CRITICAL)
    # GNU OpenMP is not fork-safe: where the parent ran a parallel region before forking (a model built
    # for real, a user's own training in the same process), the child's first one waits forever on the
    # parent's thread pool. A child traces fake tensors; the few real ops it runs need no threads
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
    try:
        value = fn()
    except BaseException:  # noqa: BLE001 - the parent redoes the work and meets the error itself
        conn.send((False, None))
    else:
        conn.send((True, value))
    conn.close()


class ForkedJobs:
    """``fn()`` in a forked child; :meth:`result` is its return value or None."""

    def __init__(self, fn: Callable[[], Any]):
        import multiprocessing as mp

        self.proc = self.conn = None
        self.started = time.monotonic()
        if not sys.platform.startswith("linux"):
            return
        try:
            ctx = mp.get_context("fork")
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(fn, send, os.getpid()), daemon=True)
            proc.start()
        except Exception:  # noqa: BLE001 - no fork here (or a daemonic process): the caller does the work
            return
        send.close()
        self.proc, self.conn = proc, recv

    @property
    def running(self) -> bool:
        return self.proc is not None

    def result(self) -> Any:
        if self.proc is None:
            return None
        # its work is about as long as what the caller did meanwhile; far longer means it hung
        wait = max(120.0, 4 * (time.monotonic() - self.started))
        ok, value = False, None
        try:
            ok, value = self.conn.recv() if self.conn.poll(wait) else (False, None)
        except (EOFError, OSError):
            pass
        finally:  # Ctrl-C while waiting too: the child ends here, not at interpreter exit
            self.conn.close()
            if not ok and self.proc.is_alive():
                self.proc.kill()
            self.proc.join()
        return value if ok else None
