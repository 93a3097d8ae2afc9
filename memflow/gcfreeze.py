"""Keep long-lived objects out of Python's cyclic garbage collector while planning.

Planning a model makes a few hundred thousand objects that live until it ends
(torch's and the model's modules, the fake model, the exported fx graphs, the
task graphs) and then millions of short-lived ones (every op of a traced step,
every strategy the search evaluates). Each collection of CPython's oldest
generation walks every tracked object: on that heap one costs 0.1-0.4 s, a cold
GPT-2-medium plan ran about ten of them (~1.5 s), and the interpreter walks the
heap once more at exit (~1-2 s). ``gc.freeze()`` moves the objects that exist to
a permanent generation the collector skips (what the ``gc`` docs advise before
``fork`` as well: children then leave the parent's pages alone).

Nothing else changes: objects made after a freeze are collected as before, and
when the outermost :func:`long_lived` block ends the frozen objects go back to
the oldest generation (garbage among them is collected by a later collection).
A process that froze objects itself, or turned the collector off, is left alone.

Two stretches make almost nothing that needs the cyclic collector: tracing steps
under fake tensors and the search (their garbage is freed by reference counting:
a cold GPT-2-medium plan ends ~25 MB larger without any collection). There
:func:`paused_collection` turns the collector off (a cold plan ran ~1,600
collections, ~0.65 s, in the planning process alone) and back on after.
Measured profiling (real tensors) never runs inside it: a storage must die when
its last reference goes, as it does in training.
"""
from __future__ import annotations

import contextlib
import gc
from typing import Iterator

__all__ = ["long_lived", "freeze", "paused_collection"]

_depth = 0  # open long_lived() blocks that manage the collector


@contextlib.contextmanager
def long_lived() -> Iterator[None]:
    """Objects that exist when the block starts (or when :func:`freeze` is called in it)
    are skipped by the cyclic collector until the outermost block ends."""
    global _depth
    if _depth == 0 and (not gc.isenabled() or gc.get_freeze_count()):
        yield  # someone else manages the collector
        return
    _depth += 1
    gc.freeze()
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            gc.unfreeze()


def freeze() -> None:
    """Inside :func:`long_lived`: the objects that exist now join the frozen ones."""
    if _depth:
        gc.freeze()


@contextlib.contextmanager
def paused_collection() -> Iterator[None]:
    """No cyclic collection inside the block (for fake-tensor tracing and the search only);
    the collector is on again after it if it was on before."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
