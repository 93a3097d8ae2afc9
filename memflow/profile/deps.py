"""What a model file's build read: the files and environment variables a cached profile depends on.

The profile cache's key covers the model file's bytes, the settings and the
``MEMFLOW_*`` environment. A model file can depend on more: a helper module it
imports (``examples/_hf.py``), a config file it reads, an environment variable
of its own. :func:`record` finds out what, by running the model file again
the way the profiler does (imported afresh, the model built under fake
tensors, a batch, the optimizer, one forward and loss) in a forked child that
forgets the user's modules first, so their import-time reads run again, and
records every file opened for reading (a Python audit hook: imports, ``open``)
and every variable the user's code reads through ``os.environ`` / ``os.getenv``. The cache
stores that record beside each entry and reuses an entry only while
:meth:`Deps.holds` (each file as it was, each variable as it was); it also
keeps the model's signature (:func:`memflow.graph.build.model_signature`) of
that build, to refuse a graph made from a stale model (a ``ModelSpec`` loaded
before the environment changed).

Files of installed packages and the standard library are recorded by size and
modification time (a reinstall is a change), and so are files over 1 MiB (a
checkpoint the build loads); the user's other files by content. Not seen:
variables read by iterating the environment, whether a file exists, reads in a
backward, anything that is neither a file nor a variable (the host, the time).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ..forking import ForkedJobs
from ..graph.build import model_signature
from ..graph.diagnose import quiet_fake
from ..graph.fakebuild import build_fake
from ..model_file import load_model_file

__all__ = ["Deps", "record", "record_soon", "recorded"]

_MEMFLOW = str(Path(__file__).resolve().parent.parent)
_PACKAGES = ("memflow", "memflow_user_model_")  # the user's model modules are loaded again anyway
_SYSTEM = ("/dev/", "/proc/", "/sys/")


def _library(path: str) -> bool:
    """A file of an installed package or of Python itself (recorded by size and time, not read)."""
    parts = Path(path).parts
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    return any(path.startswith(p + os.sep) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix} if p)


_HASHED = 1 << 20  # a larger file (a checkpoint the build loads) is told by size and mtime, not read each plan


def _state(path: str) -> str | None:
    """What a file is now: its content's hash (a library file or a large one: size and mtime);
    None: gone."""
    try:
        st = os.stat(path)
        if _library(path) or st.st_size > _HASHED:
            return f"stat:{st.st_size}:{st.st_mtime_ns}"
        return "sha:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()[:20]
    except OSError:
        return None


@dataclass
class Deps:
    """A build's reads: ``files`` (path -> :func:`_state`), ``env`` (variable -> value, None: unset)
    and the built model's signature."""

    files: dict[str, str | None] = field(default_factory=dict)
    env: dict[str, str | None] = field(default_factory=dict)
    signature: str = ""

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps([self.files, self.env, self.signature], sort_keys=True).encode()
                              ).hexdigest()[:12]

    def holds(self) -> bool:
        """Every file and variable is as the build read it."""
        return (all(os.environ.get(k) == v for k, v in self.env.items())
                and all(_state(p) == s for p, s in self.files.items()))

    def to_dict(self) -> dict[str, Any]:
        return {"files": self.files, "env": self.env, "signature": self.signature}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Deps":
        return cls(files=dict(d["files"]), env=dict(d["env"]), signature=str(d["signature"]))


class _Recorder:
    """Files opened for reading and variables read, while :attr:`on`."""

    def __init__(self):
        self.on = False
        self.files: set[str] = set()
        self.env: dict[str, str | None] = {}
        self.written: set[str] = set()

    def audit(self, event: str, args: tuple) -> None:
        if not self.on or event != "open" or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
            return
        mode, flags = (args[1] if len(args) > 1 else "r"), (args[2] if len(args) > 2 else 0)
        if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                mode is None and isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR)):
            return
        self.files.add(os.fsdecode(args[0]))

    def paths(self) -> list[str]:
        out = set()
        for p in self.files:
            p = os.path.abspath(p)
            if p.endswith(".pyc") and "__pycache__" in p:  # a cached import stands for its source
                p = os.path.join(os.path.dirname(os.path.dirname(p)), os.path.basename(p).split(".")[0] + ".py")
            if os.path.isfile(p) and not p.startswith(_SYSTEM) and not p.startswith(_MEMFLOW + os.sep):
                out.add(p)
        return sorted(out)


# os.getenv, Mapping.get, `in`: who called them counts (os itself may be frozen: "<frozen os>")
_PLUMBING = {os.__file__, os.getenv.__code__.co_filename, Mapping.get.__code__.co_filename}


def _by_user() -> bool:
    """Whether the environment is being read by the user's code (not by a library importing itself:
    torch's configuration modules read hundreds of variables when first imported)."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename in _PLUMBING:
        f = f.f_back
    path = f.f_code.co_filename if f is not None else ""
    return not (_library(path) or path.startswith(_MEMFLOW + os.sep) or path.startswith("<frozen"))


def _environ(rec: _Recorder) -> Any:
    """``os.environ`` that tells ``rec`` what the user's code reads (a variable it sets first is not)."""
    real = os.environ

    class Reading(type(real)):
        def __getitem__(self, key):
            try:
                value = super().__getitem__(key)
            except KeyError:
                value = None
                raise
            finally:
                if rec.on and key not in rec.written and _by_user():
                    rec.env.setdefault(key, value)
            return value

        def __setitem__(self, key, value):
            rec.written.add(key)
            super().__setitem__(key, value)

    return Reading(real._data, real.encodekey, real.decodekey, real.encodevalue, real.decodevalue)


def _forget_user_modules() -> None:
    """Drop the user's modules (neither memflow's nor installed ones) from ``sys.modules``, so the
    model file's imports run them again (and their reads are seen)."""
    for name, mod in list(sys.modules.items()):
        path = getattr(mod, "__file__", None) or ""
        if (path.endswith(".py") and not name.startswith(_PACKAGES) and not name.startswith("__")
                and not _library(path) and not os.path.abspath(path).startswith(_MEMFLOW + os.sep)):
            del sys.modules[name]


def _build(model_file: str, batch_size: int, rec: _Recorder, guard: bool = True) -> Deps:
    """Import, build, batch, optimizer, forward and loss under ``rec``; the record. ``guard``: load the
    file as :func:`memflow.model_file.load_model_file` guards it (a forked child of its own first;
    a child of ours, whose end only loses the record, need not)."""
    rec.on = True
    spec = load_model_file(model_file, guard=guard)
    torch.manual_seed(0)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    model = build_fake(spec, mode)
    with mode, quiet_fake():
        model.train()
        signature = model_signature(model)
        try:  # the rest as far as it goes: what was read up to a failure is read all the same
            batch = spec.batch(batch_size)
            spec.make_optimizer([p for p in model.parameters() if p.requires_grad])
            with torch.no_grad():
                spec.loss(model, batch)
        except Exception:  # noqa: BLE001
            pass
    rec.on = False
    for m in model.modules():  # the code that defines the model (imported before, so not seen opening)
        path = getattr(sys.modules.get(type(m).__module__), "__file__", None)
        if path:
            rec.files.add(path)
    paths = rec.paths()
    return Deps(files={p: _state(p) for p in paths}, env=dict(sorted(rec.env.items())), signature=signature)


_recorders: list[_Recorder] = []  # the recording one, if any (one audit hook: hooks cannot be removed)


def _audit(event: str, args: tuple) -> None:
    if _recorders:
        _recorders[-1].audit(event, args)


def _recorder() -> _Recorder:
    if not _recorders:
        sys.addaudithook(_audit)
    _recorders[:] = [_Recorder()]
    return _recorders[0]


def _in_child(model_file: str, batch_size: int) -> Deps:
    null = os.open(os.devnull, os.O_WRONLY)  # the model file's own prints were seen once already
    os.dup2(null, 1)
    os.dup2(null, 2)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the child ends soon
    _forget_user_modules()
    rec = _recorder()
    os.environ = _environ(rec)
    return _build(model_file, batch_size, rec, guard=False)


_memo: dict[str, Deps] = {}
_soon: dict[str, ForkedJobs] = {}  # records begun by record_soon, by model file


def record_soon(model_file: str, batch_size: int) -> None:
    """Begin :func:`record`'s work now, in a forked child, for the next :func:`record` of the
    file to take (the profiler starts it once the model is built: it runs beside the profiling
    instead of after it)."""
    key = os.path.abspath(model_file)
    got = _memo.get(key)
    if key in _soon or (got is not None and got.holds()):
        return
    job = ForkedJobs(lambda: _in_child(model_file, batch_size))
    if job.running:
        _soon[key] = job


def record(model_file: str, batch_size: int) -> Deps | None:
    """What building ``model_file``'s model reads (None: it could not be run). A record made
    earlier in this process (or begun by :func:`record_soon`) is reused while it holds."""
    key = os.path.abspath(model_file)
    got = _memo.get(key)
    if got is not None and got.holds():
        return got
    job = _soon.pop(key, None)
    got = job.result() if job is not None else None
    if got is None or not got.holds():
        got = ForkedJobs(lambda: _in_child(model_file, batch_size)).result()
    if got is None:  # no fork here (or the child could not build it): in this process, as it stands
        got = _in_process(model_file, batch_size)
    if got is not None:
        _memo[key] = got
    return got


def _in_process(model_file: str, batch_size: int) -> Deps | None:
    rec = _recorder()
    real = os.environ
    os.environ = _environ(rec)
    try:
        return _build(model_file, batch_size, rec)
    except Exception:  # noqa: BLE001 - a build that fails here was profiled: nothing to record
        return None
    finally:
        rec.on = False
        os.environ = real


def recorded(graph_meta: dict, deps: Deps) -> bool:
    """Whether a graph is of the model ``deps`` was recorded from (its signature, where it has one)."""
    sig = graph_meta.get("model_signature")
    return sig is None or sig == deps.signature
