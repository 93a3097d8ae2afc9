"""A gloo collective's tensors die when this thread lets go of them, not when gloo's worker does.

gloo runs each collective on a worker thread of its process group, whose work object holds a
reference to the collective's tensors. ``wait()`` returns once the work is marked done, and the
worker drops its reference afterwards, on its own schedule: sometimes at once, sometimes after this
thread has run the next ops, or only when it takes the next collective (seen in the optimizer step).
A temporary the caller drops right after the collective (a reduce-scatter's summed copy, a
broadcast part) then outlives its last use by a racy stretch: on ``cpu-2`` with ``--tp 2`` one run
in three of the same plan peaked 8 KiB (1.4%) above another on a tiny DistilBERT. :func:`settled`
waits, after the collective, until the tensors' reference counts are back to what they were before
it, so each dies where its last use in the program is, as the profiler traced it (:func:`released`
for a collective waited on elsewhere: the executor's data-parallel gradient buckets, whose last step's
bucket outlived its gradients into a small model's next backward once in CI). NCCL's
collectives are ordered on a stream instead and are not touched.
"""
from __future__ import annotations

import contextlib
import os
import time
from typing import Iterable, Iterator

import torch

__all__ = ["settled", "released"]

SETTLE_TIMEOUT_S = 5.0  # past this, go on (a reference kept elsewhere is not gloo's to drop)


@contextlib.contextmanager
def settled(*tensors: torch.Tensor) -> Iterator[None]:
    """Run a gloo collective on ``tensors`` inside: on leaving, wait until no reference taken during
    the block is held (gloo's worker thread has released its work)."""
    before = [t._use_count() for t in tensors]
    yield
    released(zip(tensors, before))


def released(counts: Iterable[tuple[torch.Tensor, int]]) -> None:
    """Wait until each tensor's reference count is back to its count before a collective (given
    beside it): for a collective started in one place and waited on in another."""
    deadline = None
    for t, b in counts:
        while t._use_count() > b:
            now = time.monotonic()
            if deadline is None:
                deadline = now + SETTLE_TIMEOUT_S
            elif now > deadline:
                return
            os.sched_yield()
