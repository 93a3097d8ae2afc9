"""Pipeline schedules (GPipe, 1F1B) and their timing on per-stage op durations.

Each stage runs a fixed order of forward / backward ops, one per micro-batch;
an op starts when the stage's compute stream is free and its input has
arrived (the previous stage's forward plus the activation transfer, or the
next stage's backward plus the gradient transfer). Ops are encoded as ints:
``j`` is the forward of micro-batch ``j``, ``-(j + 1)`` its backward.
"""
from __future__ import annotations

from functools import lru_cache

__all__ = ["stage_order", "inflight", "run_pipeline"]


@lru_cache(maxsize=4096)
def stage_order(pp: int, s: int, m: int, schedule: str) -> tuple:
    """The op order of stage ``s`` (GPipe: all forwards then all backwards;
    1F1B: ``min(pp - s - 1, m)`` warm-up forwards, then one-forward-one-backward,
    then the cool-down backwards)."""
    if schedule == "gpipe":
        return tuple(range(m)) + tuple(-(j + 1) for j in range(m))
    w = min(pp - s - 1, m)
    ops = list(range(w))
    for i in range(m - w):
        ops.append(w + i)
        ops.append(-(i + 1))
    ops.extend(-(j + 1) for j in range(m - w, m))
    return tuple(ops)


def inflight(pp: int, s: int, m: int, schedule: str) -> int:
    """Most micro-batches whose activations are alive at once on stage ``s``."""
    return m if schedule == "gpipe" else min(m, pp - s)


def run_pipeline(fwd: list, bwd: list, cf: list, cb: list, m: int, schedule: str,
                 f_ready: list, b_ready: list, record: bool = False):
    """Time the schedule.

    fwd[s], bwd[s]: seconds of one micro-batch's forward / backward op on stage s;
    cf[s]: activation transfer s -> s+1, cb[s]: gradient transfer s+1 -> s (per micro-batch);
    f_ready[s], b_ready[s]: earliest start of the stage's first forward / backward
    (parameter all-gathers). Returns (end per stage, start/end of each stage's last
    backward, ops) where ops (if record) lists per stage (op, start, end).
    """
    pp = len(fwd)
    if pp == 1 and not record:  # one stage: F/B pairs back to back (gpipe: all F then all B)
        fs, bs = fwd[0], bwd[0]
        if schedule == "gpipe":
            t = f_ready[0] + m * fs
            t = (t if t > b_ready[0] else b_ready[0]) + m * bs
        else:
            t = f_ready[0] + fs
            t = (t if t > b_ready[0] else b_ready[0]) + bs + (m - 1) * (fs + bs)
        return [t], [t - bs], None
    orders = [stage_order(pp, s, m, schedule) for s in range(pp)]
    fend = [[-1.0] * m for _ in range(pp)]
    bend = [[-1.0] * m for _ in range(pp)]
    free = [0.0] * pp
    pos = [0] * pp
    n_ops = 2 * m
    remaining = pp * n_ops
    ops_rec = [[] for _ in range(pp)] if record else None
    while remaining:
        for s in range(pp):
            order = orders[s]
            p = pos[s]
            if p >= n_ops:
                continue
            fs, bs = fwd[s], bwd[s]
            t = free[s]
            fe_prev = fend[s - 1] if s > 0 else None
            be_next = bend[s + 1] if s < pp - 1 else None
            fe, be = fend[s], bend[s]
            while p < n_ops:
                op = order[p]
                if op >= 0:
                    if fe_prev is not None:
                        d = fe_prev[op]
                        if d < 0:
                            break
                        r = d + cf[s - 1]
                    else:
                        r = f_ready[s]
                    st = t if t > r else r
                    if op == 0 and st < f_ready[s]:
                        st = f_ready[s]
                    t = st + fs
                    fe[op] = t
                else:
                    j = -op - 1
                    if be_next is not None:
                        d = be_next[j]
                        if d < 0:
                            break
                        r = d + cb[s]
                    else:
                        r = b_ready[s]
                    st = t if t > r else r
                    if j == 0 and st < b_ready[s]:
                        st = b_ready[s]
                    t = st + bs
                    be[j] = t
                if record:
                    ops_rec[s].append((op, st, t))
                p += 1
            remaining -= p - pos[s]
            pos[s] = p
            free[s] = t
    last_b = [bend[s][m - 1] - bwd[s] for s in range(pp)]
    return free, last_b, ops_rec
