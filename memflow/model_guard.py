"""Run a model file's code first in a forked child, so that a file that ends its process is an error.

A user's model file runs arbitrary code: at import, in ``build_model()`` or in
``example_batch()`` it may call ``os._exit(0)``, crash the interpreter
(SIGSEGV) or loop forever, and in-process none of these can be answered (the
command would end with exit code 0 or -11 and no word, or hang).
:func:`first_in_child` therefore runs that code once in a child forked from
this process (torch already imported: the fork itself costs ~20 ms) and
reports how the child ended: a phrase (``"exited with code 0 during import"``,
``"crashed (signal 11, SIGSEGV) in build_model()"``, ``"did not finish
importing within 120 s"``), or None when the code returned or raised (an
exception is an ordinary error, which the caller meets again in-process with
its own message). The limit is ``MEMFLOW_MODEL_TIMEOUT_S`` (default 120 s).

The child's cost is what the model file does that this process has not
done yet, mostly the libraries it imports (for the GPT-2 example
``transformers``, 1-3 s, which this process then imports again): work done
here before the fork is inherited (the model loader imports ``torch._dynamo``
first, which the capture after every load needs anyway and which building
on the meta device would otherwise import in the child).

The command line does not pay that twice: :func:`continue_in_child` (once per
``memflow`` command, :func:`allow_handover`) lets the child, once the file's
code returned, carry the command on, while the first process only waits for
it, ends as it ends and forwards the signals other processes send it (a
terminal's Ctrl-C reaches both). The API (``memflow.plan`` in a user's
process) keeps :func:`first_in_child`: a library must not end its caller.
"""
from __future__ import annotations

import faulthandler
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, TypeVar

from .errors import ConfigError
from .procs import die_with_parent, ended_text, last_line, popen

__all__ = ["first_in_child", "continue_in_child", "allow_handover", "take_handover", "phases_to_stdout", "timeout_s",
           "TIMEOUT_ENV"]

TIMEOUT_ENV = "MEMFLOW_MODEL_TIMEOUT_S"
_DEFAULT_TIMEOUT_S = 120.0

Mark = Callable[[str, str], None]  # mark("in build_model()", "build_model() did not return"): the phase now
T = TypeVar("T")

_handover = False  # this process may hand itself over to its trial child (the command line's entry only)


def timeout_s() -> float:
    """The limit on the child's run: ``$MEMFLOW_MODEL_TIMEOUT_S`` seconds, default 120."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return _DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise ConfigError(f"{TIMEOUT_ENV} must be a positive number of seconds, got {raw!r}")
    return value


def _child(work: Callable[[Mark], None], wfd: int, err_fd: int, parent: int) -> None:
    """The forked child: runs ``work``, says which phase it is in, ends with ``done``. Never returns."""
    try:
        die_with_parent(signal.SIGKILL, parent)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)  # the model file's prints are shown once, by the parent's own run
        os.dup2(err_fd, 2)  # kept: its last line may explain an exit
        sys.stdout, sys.stderr = open(1, "w", closefd=False), open(2, "w", buffering=1, closefd=False)
        if faulthandler.is_enabled():  # its dump would reach the terminal through a descriptor of its own
            faulthandler.enable(sys.stderr)

        _work_reporting(work, wfd)  # an exception is the parent's to meet in-process
    finally:
        os._exit(0)


def _ended(status: int, during: str, err) -> str:
    rc = os.waitstatus_to_exitcode(status)
    err.seek(0)  # an exit on purpose may have said why (a crash's last words are the crash's)
    words = last_line(err.read().decode(errors="replace"), 200) if rc >= 0 else ""
    return f"{ended_text(rc)} {during}" + (f"; its last words: {words}" if words else "")


def _in_new_process(cmd: list[str], limit: float) -> str | None:
    """:func:`first_in_child` for a process that runs threads: ``cmd`` in a new interpreter."""
    with tempfile.TemporaryFile() as err:
        proc = popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
        phases = _Phases(proc.stdout.fileno())
        deadline = time.monotonic() + limit
        try:
            while True:
                phases.read(0.05)
                if phases.done:
                    return None
                if proc.poll() is not None or phases.eof:
                    status = proc.wait()
                    phases.read(0.0)
                    if phases.done:
                        return None
                    return _ended(_wait_status(status), phases.during, err)
                if time.monotonic() > deadline:
                    return f"{phases.unfinished} within {limit:g} s (the limit is {TIMEOUT_ENV})"
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stdout.close()


def _wait_status(returncode: int) -> int:
    """A ``Popen.returncode`` (negative: killed by that signal) as an ``os.waitpid`` status."""
    return (-returncode) & 0x7F if returncode < 0 else (returncode & 0xFF) << 8


def phases_to_stdout(work: Callable[[Mark], None]) -> None:
    """The spawned form of the child (``spawn`` of :func:`first_in_child`): runs ``work``, its phases
    and ``done`` on this process's stdout, the model file's own prints kept off it."""
    out = os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    sys.stdout = open(1, "w", closefd=False)

    _work_reporting(work, out)  # an exception is the caller's to meet in-process


def _work_reporting(work: Callable, fd: int) -> None:
    """Run ``work(phase)``, writing each phase it announces (``during<TAB>unfinished``) and then ``done``
    as lines on descriptor ``fd``; an exception ends the work unreported (the other side meets it
    in its own process)."""

    try:
        work(lambda during, unfinished: _send(fd, f"{during}\t{unfinished}"))
    except BaseException:  # noqa: BLE001 - see above
        pass
    _send(fd, "done")


def _send(fd: int, line: str) -> None:
    """One line of the child's report (a phase, or ``done``) on descriptor ``fd``."""
    data = (line.replace("\n", " ") + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


class _Phases:
    """The parent's end of the child's pipe: the phase it announced last, and whether it finished."""

    def __init__(self, fd: int):
        self.fd, self.buf = fd, b""
        self.during, self.unfinished = "during import", "did not finish importing"
        self.done = self.eof = False

    def read(self, wait_s: float) -> None:
        while not self.eof and select.select([self.fd], [], [], wait_s)[0]:
            chunk = os.read(self.fd, 4096)
            self.eof = not chunk
            *lines, self.buf = (self.buf + chunk).split(b"\n")
            for line in lines:
                text = line.decode(errors="replace")
                if text == "done":
                    self.done = True
                elif "\t" in text:
                    self.during, self.unfinished = text.split("\t", 1)
            wait_s = 0.0


def _await_trial(pid: int, phases: _Phases, limit: float) -> tuple[str, int | None]:
    """Wait for a forked child's trial: ``("done", None)`` once it said so, ``("ended", status)`` when it
    ended first (its wait status; what it said read to the end: it may have said ``done`` just before),
    ``("late", None)`` after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while True:
        phases.read(0.05)
        if phases.done:
            return "done", None
        got, st = os.waitpid(pid, os.WNOHANG)
        if got or phases.eof:  # it ended; what it said is in the pipe (unless a child of its own holds it)
            status = st if got else os.waitpid(pid, 0)[1]
            phases.read(0.0)
            return "ended", status
        if time.monotonic() > deadline:
            return "late", None


def first_in_child(work: Callable[[Mark], None], *, limit_s: float | None = None,
                   spawn: list[str] | None = None, meanwhile: Callable[[], None] | None = None) -> str | None:
    """Run ``work(mark)`` in a forked child first; None when ``work``
    returned or raised, else how the child ended or hung (``"exited with code 0 during import"``), naming
    the phase ``mark(during, unfinished)`` announced last. Linux only. A process already running
    other threads is not forked (a fork copies only this thread: another's locks could hang the
    child): ``spawn``, a command that runs the same work in a new interpreter and writes its phases
    (``during\tunfinished`` lines, then ``done``) to its stdout, is run instead (slower: it imports
    torch afresh), or, without one, nothing (the caller runs the code in-process, unguarded).
    ``meanwhile()``: run here while a forked child works (what this side needs next and may do
    before the user's code is known to be safe: imports of torch's own modules)."""
    limit = timeout_s() if limit_s is None else limit_s
    if not sys.platform.startswith("linux"):
        return None
    if threading.active_count() > 1:
        return _in_new_process(spawn, limit) if spawn else None
    parent = os.getpid()
    rfd, wfd = os.pipe()
    with tempfile.TemporaryFile() as err:
        try:
            pid = os.fork()
        except OSError:
            os.close(rfd)
            os.close(wfd)
            return None
        if pid == 0:  # pragma: no cover - the child (coverage does not follow a fork)
            os.close(rfd)
            _child(work, wfd, err.fileno(), parent)
        os.close(wfd)
        if meanwhile is not None:
            try:
                meanwhile()
            except Exception:  # noqa: BLE001 - only a head start on this side
                pass
        phases = _Phases(rfd)
        status = None
        try:
            how, status = _await_trial(pid, phases, limit)
            if how == "late":
                return f"{phases.unfinished} within {limit:g} s (the limit is {TIMEOUT_ENV})"
            return None if phases.done else _ended(status, phases.during, err)
        finally:
            if status is None:
                if not phases.done:
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            os.close(rfd)


# ------------------------------------------------------------ the command line's form: the child carries on
def allow_handover() -> None:
    """Let the next guarded load of this process be :func:`continue_in_child` (once): only for a process
    that is a command and nothing else (``memflow.cli.main.entry``), whose end the child may decide."""
    global _handover
    _handover = True


def take_handover() -> bool:
    """Whether this load may hand the process over (true once after :func:`allow_handover`)."""
    global _handover
    allowed, _handover = _handover, False
    return allowed and sys.platform.startswith("linux") and threading.active_count() == 1


def continue_in_child(work: Callable[[Mark], T], *,
                      limit_s: float | None = None) -> tuple[T | None, str | None] | None:
    """:func:`first_in_child` without running the code twice: the forked child runs ``work(mark)`` and,
    once it returns or raises, *is the program from then on* (returns ``(value, None)`` there, or raises
    what ``work`` raised), while this process only waits for it and ends as it ends (its exit code, or
    its signal), forwarding the signals another process sends it; it never returns. When the child ends
    or hangs before ``work`` is through, this process returns ``(None, how)`` (the child killed) and goes
    on as the program; None (nothing run) when no child could be forked. Saves the second import of what the model file imports (for the GPT-2 example
    transformers' model modules, ~1.1 s of a cold plan). What the child writes while it is in its first
    phase (``mark``'s first; a plain import's prints and warnings) is shown, once; the rest of the
    trial's output is not (the program builds the model again, for real)."""
    limit = timeout_s() if limit_s is None else limit_s
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # nothing buffered here may be written twice
    parent = os.getpid()
    rfd, wfd = os.pipe()
    err = tempfile.TemporaryFile()
    try:
        pid = os.fork()
    except OSError:  # no child (process limit): the caller guards as the API does
        os.close(rfd)
        os.close(wfd)
        err.close()
        return None
    if pid == 0:  # pragma: no cover - the child (coverage does not follow a fork)
        os.close(rfd)
        return _carry_on(work, wfd, err, parent), None
    os.close(wfd)
    phases = _Phases(rfd)
    status = None
    try:
        how, status = _await_trial(pid, phases, limit)
        if how == "done":
            _supervise(pid)  # never returns
        if how == "late":
            return None, f"{phases.unfinished} within {limit:g} s (the limit is {TIMEOUT_ENV})"
        if phases.done:  # it finished its trial, then ended: as it ended
            _end_as(status)
        return None, _ended(status, phases.during, err)
    finally:
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(rfd)
        err.close()


def _carry_on(work: Callable[[Mark], T], wfd: int, err, parent: int) -> T:  # pragma: no cover - the child
    """The child of :func:`continue_in_child`: ``work`` with its output held back, then the output of its
    first phase shown and ``done`` sent; returns what ``work`` returned (or raises what it raised)."""
    die_with_parent(signal.SIGKILL, parent)
    out = tempfile.TemporaryFile()
    saved = os.dup(1), os.dup(2)
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    marks = 0
    first: tuple[int, int] | None = None  # where the output stood when the first phase ended

    def where() -> tuple[int, int]:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        return os.lseek(1, 0, os.SEEK_CUR), os.lseek(2, 0, os.SEEK_CUR)

    def mark(during: str, unfinished: str) -> None:
        nonlocal marks, first
        if marks == 1:
            first = where()
        marks += 1
        _send(wfd, f"{during}\t{unfinished}")

    try:
        return work(mark)
    finally:
        upto = first if first is not None else where()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
        for fd, f, n in ((1, out, upto[0]), (2, err, upto[1])):
            f.seek(0)
            _write_all(fd, f.read(n))
        out.close()
        err.close()
        _send(wfd, "done")
        os.close(wfd)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        try:
            data = data[os.write(fd, data):]
        except OSError:  # a closed reader: what the import printed goes nowhere
            return


#: signals forwarded to the child: those another process sends (the kernel's, a terminal's Ctrl-C or
#: hang-up, reach the child's process group, the child with it)
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_SI_KERNEL = 0x80


def _supervise(pid: int) -> None:
    """Wait for the child that carries on the program and end as it ends; forward what others signal."""
    waited = {*_FORWARDED, signal.SIGCHLD}
    signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    while True:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            _end_as(status)
        info = signal.sigwaitinfo(waited)
        if info.si_signo != signal.SIGCHLD and info.si_code != _SI_KERNEL:
            try:
                os.kill(pid, info.si_signo)
            except ProcessLookupError:
                pass


def _end_as(status: int) -> None:
    """End this process as a child with wait status ``status`` ended: its exit code, or its signal."""
    rc = os.waitstatus_to_exitcode(status)
    if rc < 0:
        signal.signal(-rc, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {-rc})
        os.kill(os.getpid(), -rc)
        rc = 128 - rc  # a signal that does not end a process by default
    os._exit(rc)
