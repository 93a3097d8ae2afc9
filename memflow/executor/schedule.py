"""Pipeline schedules: the ordered forward/backward actions of one stage.

Each stage runs its list in order. Sends are non-blocking and receives block,
and every schedule here orders each stage's actions so that a receive only
waits for an action the neighbour runs earlier in its own list: GPipe (all
forwards, then all backwards) and 1F1B (``pp - 1 - s`` warm-up forwards,
then one forward / one backward, then the remaining backwards) are both
deadlock-free under that rule.
"""
from __future__ import annotations

__all__ = ["stage_schedule", "FORWARD", "BACKWARD"]

FORWARD, BACKWARD = "F", "B"


def stage_schedule(schedule: str, stage: int, pp: int, microbatches: int) -> list[tuple[str, int]]:
    """``[(FORWARD|BACKWARD, micro-batch), ...]`` for ``stage`` of ``pp``."""
    m = microbatches
    if schedule == "gpipe":
        return [(FORWARD, i) for i in range(m)] + [(BACKWARD, i) for i in range(m)]
    if schedule != "1f1b":
        raise ValueError(f"unknown schedule {schedule!r}; valid: ['1f1b', 'gpipe']")
    warm = min(pp - 1 - stage, m)
    acts = [(FORWARD, i) for i in range(warm)]
    f, b = warm, 0
    while f < m:
        acts.append((FORWARD, f))
        f += 1
        acts.append((BACKWARD, b))
        b += 1
    while b < m:
        acts.append((BACKWARD, b))
        b += 1
    return acts
