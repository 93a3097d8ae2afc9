"""Pipeline schedules: the ordered forward/backward actions of one stage.

Each stage runs its list in order (:func:`memflow.schedule.stage_ops`). Sends are
non-blocking and receives block, and every schedule orders each stage's actions
so that a receive only waits for an action the neighbour runs earlier in its own
list: GPipe (all forwards, then all backwards) and 1F1B (``pp - 1 - s`` warm-up
forwards, then one forward / one backward, then the remaining backwards) are
both deadlock-free under that rule.
"""
from __future__ import annotations

from memflow.schedule import BACKWARD, FORWARD, stage_ops

__all__ = ["stage_schedule", "FORWARD", "BACKWARD"]


def stage_schedule(schedule: str, stage: int, pp: int, microbatches: int) -> list[tuple[str, int]]:
    """``[(FORWARD|BACKWARD, micro-batch), ...]`` for ``stage`` of ``pp``."""
    return list(stage_ops(pp, stage, microbatches, schedule))
