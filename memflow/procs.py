"""Child processes that live no longer than MemFlow, and whose death is seen at once.

Every process MemFlow starts (profiling processes, the link probe, torchrun,
forked helpers) is tied to it three ways:

* on Linux the child asks the kernel for a signal when its parent dies
  (``PR_SET_PDEATHSIG``, through ctypes), so a parent killed by SIGKILL or
  SIGTERM (which run no Python cleanup) takes its children with it;
* :func:`popen` starts the child in a session of its own, so the parent alone
  decides its end: :func:`stop` (SIGTERM to its process group, then SIGKILL)
  runs on every way out of the code that started it, Ctrl-C included;
* :func:`watch` polls instead of blocking on one child, so a child that dies
  (the out-of-memory killer's SIGKILL) is noticed within a fraction of a second
  while the others still run.

:func:`sigterm_raises` turns SIGTERM into :class:`Terminated` (a
``KeyboardInterrupt``) while children run, so the same cleanup runs for it.
Imports nothing of memflow and not torch: every layer may use it.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Callable, Iterator, Sequence

__all__ = ["die_with_parent", "popen", "stop", "watch", "exit_text", "ended_text", "last_line", "host_cores",
           "Terminated", "sigterm_raises"]

_PR_SET_PDEATHSIG = 1


def _load_prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    return fn


_prctl = _load_prctl()  # loaded here: a child between fork and exec must not load a library


def die_with_parent(sig: int = signal.SIGKILL, parent: int | None = None) -> None:
    """Ask for ``sig`` when this process's parent dies (Linux; elsewhere nothing).

    ``parent``: the pid the parent had; a parent that died before the request was made is seen here
    and this process ends at once. Safe between fork and exec (a ``preexec_fn``)."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), sig)


def popen(cmd: Sequence[str], *, death_signal: int = signal.SIGKILL, **kw) -> subprocess.Popen:
    """``subprocess.Popen`` of a child that gets ``death_signal`` when this process dies, in a session
    (and process group) of its own. ``death_signal``: SIGTERM for a child that must stop its own
    children (torchrun stops its workers on SIGTERM), SIGKILL otherwise."""
    kw.setdefault("start_new_session", True)
    return subprocess.Popen(list(cmd), preexec_fn=functools.partial(die_with_parent, death_signal, os.getpid()), **kw)


def _signal_group(p: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(p.pid, sig)  # the child leads its own group (popen): its children go too
    except (ProcessLookupError, PermissionError):
        try:
            p.send_signal(sig)
        except ProcessLookupError:
            pass


def stop(procs: Sequence[subprocess.Popen], grace_s: float = 5.0) -> None:
    """End every process of ``procs`` still running, with its process group: SIGTERM, up to ``grace_s``
    seconds to finish, then SIGKILL; all are reaped."""
    alive = [p for p in procs if p.poll() is None]
    for p in alive:
        _signal_group(p, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in alive:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(p, signal.SIGKILL)
            p.wait()


def watch(procs: Sequence[subprocess.Popen], timeout_s: float, *, poll_s: float = 0.05,
          tick: Callable[[], None] | None = None) -> tuple[int, int] | None:
    """Wait until every process has exited 0 (returns None) or one has failed (returns its index and
    return code, the others still running), polling every ``poll_s`` seconds (``tick()`` each time).
    Raises TimeoutError after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        codes = [p.poll() for p in procs]
        failed = [(i, rc) for i, rc in enumerate(codes) if rc not in (None, 0)]
        if tick is not None:
            tick()
        if failed:
            return failed[0]
        if all(rc == 0 for rc in codes):
            return None
        if time.monotonic() > deadline:
            raise TimeoutError(f"still running after {timeout_s:.0f} s")
        time.sleep(poll_s)


def ended_text(rc: int) -> str:
    """How a process ended, as a phrase: ``exited with code 3``, ``crashed (signal 11, SIGSEGV)``,
    ``was killed by signal 9 (SIGKILL: out of host memory?)`` (the kernel's out-of-memory killer
    sends SIGKILL, and so does little else)."""
    if rc == -signal.SIGKILL:
        return "was killed by signal 9 (SIGKILL: out of host memory?)"
    if rc < 0:
        return f"crashed ({exit_text(rc)})"
    return f"exited with code {rc}"


def exit_text(rc: int) -> str:
    """A return code in words: ``exit code 3``, ``signal 9, SIGKILL``."""
    if rc >= 0:
        return f"exit code {rc}"
    try:
        name = signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"
    return f"signal {-rc}, {name}"


def last_line(text: str, limit: int | None = 300) -> str:
    """The last non-blank line of a process's output (what it said last), at most ``limit`` characters
    (None: whole)."""
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    return lines[-1][:limit] if lines else ""


def host_cores() -> int:
    """The cores this process may run on (its CPU affinity, not every core of the machine)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived while :func:`sigterm_raises` was in force."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated(f"terminated (signal {signum})")


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """While in force, SIGTERM raises :class:`Terminated` in the main thread, so that children are stopped
    and temporary files removed as on Ctrl-C. Only where SIGTERM still has its default action (a
    program's own handler is left alone) and only in the main thread."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
