"""A warm process that forks a run's ranks (and the profiler's timing processes): torch imported once.

A rank started with ``python -m memflow.executor.worker`` spends 2-5 s of CPU before its first step
importing torch, memflow and the model's libraries (transformers: ~2 s). A session that launches many
short runs one after the other (the test suite: ~60 of them) pays that in every rank of every run.
``python -m memflow.forkserver SOCKET [MODULE ...]`` imports torch and the named modules (the
executor's worker, the model's libraries) once, listens on the Unix socket ``SOCKET``, and for each
request forks a child that becomes the process asked for: the requester's environment, working
directory and output files, then the module's ``__main__`` (``runpy``), as ``python -m MODULE ARGS``
would run it. The launcher (:func:`memflow.executor.launch.run_plan`, one machine) and the concurrent
CPU profiler (:mod:`memflow.profile.concurrent`) use it when ``MEMFLOW_FORKSERVER`` names a socket
that answers, and start processes as usual otherwise; nothing else differs. ``tests/conftest.py``
starts one for the suite (not for the tests of how ranks start, stop and die).

The server runs no torch op before forking (imports only), so each child makes its intra-op thread
pool afresh, with its own ``OMP_NUM_THREADS``. A child is stopped when its requester goes: the
request's connection stays open while the child runs; when it closes (the requester ended or was
killed) the server kills the child; when the child ends, its return code (``-signal`` for a signal,
as ``subprocess`` gives it) comes back on the connection. Linux only.
"""
from __future__ import annotations

import importlib
import json
import os
import runpy
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from typing import Any

from .procs import die_with_parent

__all__ = ["ENV", "ServedRank", "connect", "serve"]

ENV = "MEMFLOW_FORKSERVER"


# ------------------------------------------------------------------ server
def _child(req: dict[str, Any], listener: socket.socket, conn: socket.socket, server: int) -> None:
    """In the forked child: become the process the request describes (``python -m MODULE ARGV``, its
    environment, working directory, standard output and error); never returns."""
    rc = 1
    try:
        listener.close()
        conn.close()
        os.setsid()  # a process group of its own, as memflow.procs.popen gives (the launcher signals the group)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        die_with_parent(signal.SIGKILL, parent=server)
        os.chdir(req["cwd"])
        env = req["env"]
        os.environ.clear()
        os.environ.update(env)
        for p in reversed([p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]):
            if p not in sys.path:
                sys.path.insert(0, p)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for fd, key in ((1, "stdout"), (2, "stderr")):
            os.dup2(os.open(req.get(key) or os.devnull, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644), fd)
        sys.stdout.reconfigure(line_buffering=True)
        sys.stderr.reconfigure(line_buffering=True)
        import torch

        n = env.get("OMP_NUM_THREADS")
        if n and n.isdigit() and int(n) > 0:
            torch.set_num_threads(int(n))
        sys.argv = [req["module"], *req["argv"]]
        # (runpy warns that the module is imported already: the server's import, reused on purpose)
        warnings.filterwarnings("ignore", category=RuntimeWarning, module="runpy")
        runpy.run_module(req["module"], run_name="__main__", alter_sys=True)
        rc = 0
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 1
    except BaseException as e:  # noqa: BLE001 - the rank's log says what happened
        print(f"memflow forkserver: rank failed to start: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        rc = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(rc)  # (as the worker's own __main__: no interpreter teardown)


def _wait_rank(pid: int, conn: socket.socket) -> None:
    """Server side of one request: report the rank's end, or kill it when the launcher goes."""
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                rc = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
                conn.sendall(json.dumps({"rc": rc}).encode() + b"\n")
                return
            r, _, _ = select.select([conn], [], [], 0.05)
            if r and not conn.recv(64):  # the launcher closed the connection (or died)
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return
    except OSError:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
    finally:
        conn.close()


def _read_line(conn: socket.socket) -> bytes:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf


def serve(path: str, modules: list[str]) -> None:
    """Import torch, the worker and ``modules`` (failures ignored: the rank meets them itself), then
    fork a rank for every request on the Unix socket ``path`` until killed."""
    die_with_parent(signal.SIGKILL)
    import torch  # noqa: F401
    import torch.distributed  # noqa: F401

    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001
            pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(path):
        os.unlink(path)
    listener.bind(path)
    listener.listen(64)
    me = os.getpid()
    while True:
        conn, _ = listener.accept()
        try:
            req = json.loads(_read_line(conn))
        except ValueError:
            conn.close()
            continue
        pid = os.fork()
        if pid == 0:
            _child(req, listener, conn, me)
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        threading.Thread(target=_wait_rank, args=(pid, conn), daemon=True).start()


# ---------------------------------------------------------------- launcher
class ServedRank:
    """The launcher's handle on a rank the server forked: the parts of ``subprocess.Popen`` that
    :func:`memflow.procs.watch` and :func:`memflow.procs.stop` use."""

    def __init__(self, conn: socket.socket, pid: int):
        self.conn = conn
        self.pid = pid
        self.returncode: int | None = None
        self._buf = b""

    def poll(self) -> int | None:
        if self.returncode is None:
            r, _, _ = select.select([self.conn], [], [], 0)
            if r:
                self._read()
        return self.returncode

    def _read(self) -> None:
        chunk = self.conn.recv(4096)
        if not chunk:  # the server went: the rank went with it
            self.returncode = -signal.SIGKILL
        self._buf += chunk
        if self._buf.endswith(b"\n"):
            self.returncode = int(json.loads(self._buf)["rc"])
        if self.returncode is not None:
            self.conn.close()

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"rank {self.pid}", timeout)
            select.select([self.conn], [], [], 0.05 if left is None else min(0.05, left))
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)


def connect(cmd: list[str], env: dict[str, str], stdout: str | None, stderr: str | None) -> ServedRank | None:
    """Ask the server named by ``MEMFLOW_FORKSERVER`` to run ``cmd`` (``python [-u] -m MODULE ARGS``)
    with ``env``, standard output and error appended to the files ``stdout`` / ``stderr`` (None: none);
    None where there is no server to ask or ``cmd`` is not of that form."""
    path = os.environ.get(ENV)
    if not path or not sys.platform.startswith("linux") or "-m" not in cmd[1:3]:
        return None
    i = cmd.index("-m")
    req = dict(module=cmd[i + 1], argv=list(cmd[i + 2:]), env=env, cwd=os.getcwd(),
               stdout=stdout and os.path.abspath(stdout), stderr=stderr and os.path.abspath(stderr))
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(10.0)
        conn.connect(path)
        conn.sendall(json.dumps(req).encode() + b"\n")
        pid = int(json.loads(_read_line(conn))["pid"])
        conn.settimeout(None)
    except (OSError, ValueError, KeyError):
        conn.close()
        return None
    return ServedRank(conn, pid)


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2:])
