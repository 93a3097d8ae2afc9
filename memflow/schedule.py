"""The pipeline schedules: the order of one stage's forward and backward ops, and how many
micro-batches it holds in flight. One definition, read by the simulator, the exact solver and
the executor.

A stage ``s`` of ``pp`` runs one forward and one backward op per micro-batch, in the order
:func:`stage_ops` gives: GPipe runs every forward, then every backward; 1F1B runs
``min(pp - 1 - s, m)`` warm-up forwards, then alternates one forward and one backward until the
forwards are done, then runs the remaining backwards. A micro-batch is *in flight* on a stage from
its forward until its backward; :func:`inflight` is the most at once (its activations are held
meanwhile).
"""
from __future__ import annotations

from functools import lru_cache

from memflow.kinds import GPIPE, SCHEDULES

__all__ = ["FORWARD", "BACKWARD", "stage_ops", "inflight"]

FORWARD, BACKWARD = "F", "B"


def _check(schedule: str) -> None:
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; valid: {list(SCHEDULES)}")


@lru_cache(maxsize=4096)
def stage_ops(pp: int, stage: int, microbatches: int, schedule: str) -> tuple[tuple[str, int], ...]:
    """``((FORWARD|BACKWARD, micro-batch), ...)``: stage ``stage`` of ``pp``'s ops in the order it
    runs them."""
    _check(schedule)
    m = microbatches
    if schedule == GPIPE:
        return tuple((FORWARD, j) for j in range(m)) + tuple((BACKWARD, j) for j in range(m))
    warm = min(pp - 1 - stage, m)
    ops = [(FORWARD, j) for j in range(warm)]
    for j in range(m - warm):
        ops.append((FORWARD, warm + j))
        ops.append((BACKWARD, j))
    ops.extend((BACKWARD, j) for j in range(m - warm, m))
    return tuple(ops)


def inflight(pp: int, stage: int, microbatches: int, schedule: str) -> int:
    """The most micro-batches in flight at once on stage ``stage`` of ``pp`` under
    :func:`stage_ops`' order (GPipe: all of them; 1F1B: its warm-up forwards and one more)."""
    _check(schedule)
    return microbatches if schedule == GPIPE else min(microbatches, pp - stage)
