"""``memflow.graph.gloo.settled``: after a gloo collective, wait until its worker thread has let go of
the tensors, so that a temporary dies where the program drops it, as the profiler traced it."""
from __future__ import annotations

import threading
import time

import torch

from memflow.graph.gloo import settled


def test_settled_waits_for_a_reference_another_thread_holds():
    """A reference taken during the block and dropped by another thread 0.2 s later (as gloo's worker
    drops its work's): the block returns after it is gone, not before."""
    t = torch.zeros(64)
    base = t._use_count()
    t0 = time.monotonic()
    with settled(t):
        held = [t.view(-1)]  # a C++ reference to t's TensorImpl, as a gloo work holds one
        assert t._use_count() > base

        def drop():
            time.sleep(0.2)
            held.clear()

        threading.Thread(target=drop).start()
    assert t._use_count() == base
    assert time.monotonic() - t0 >= 0.2


def test_settled_returns_at_once_when_nothing_is_held():
    t = torch.zeros(4)
    t0 = time.monotonic()
    with settled(t):
        t.add_(1)
    assert time.monotonic() - t0 < 0.1 and t._use_count() == 1
