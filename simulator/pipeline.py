"""Pipeline schedules (GPipe, 1F1B) and their timing on per-stage op durations.

Each stage runs a fixed order of forward / backward ops, one per micro-batch
(:mod:`memflow.schedule`); an op starts when the stage's compute stream is
free and its input has arrived (the previous stage's forward plus the
activation transfer, or the next stage's backward plus the gradient transfer). Ops are encoded as ints:
``j`` is the forward of micro-batch ``j``, ``-(j + 1)`` its backward.
"""
from __future__ import annotations

from functools import lru_cache

from memflow.kinds import GPIPE
from memflow.schedule import FORWARD, stage_ops

__all__ = ["stage_order", "run_pipeline"]


@lru_cache(maxsize=4096)
def stage_order(pp: int, s: int, m: int, schedule: str) -> tuple:
    """The op order of stage ``s`` (:func:`memflow.schedule.stage_ops`), encoded as ints."""
    return tuple(j if kind == FORWARD else -(j + 1) for kind, j in stage_ops(pp, s, m, schedule))


@lru_cache(maxsize=1024)
def _timing_plan(pp: int, m: int, schedule: str) -> tuple:
    """Every op once, each after its stage's previous op and after the op whose output it
    needs (stages swept in turn, each as far as its inputs allow): per op
    ``(stage, op, slot, dep, comm, dur)`` indexing run_pipeline's flat lists — end times
    (F then B of each stage; the last slot a constant 0.0 for ops with no input to wait for),
    transfers (cf then cb, then 0.0) and durations (fwd then bwd)."""
    orders = [stage_order(pp, s, m, schedule) for s in range(pp)]
    n_ops = 2 * m
    none = pp * n_ops

    def slot(s, op):
        return s * n_ops + (op if op >= 0 else m - op - 1)

    done = [False] * (none + 1)
    done[none] = True
    pos = [0] * pp
    plan = []
    while len(plan) < none:
        for s in range(pp):
            while pos[s] < n_ops:
                op = orders[s][pos[s]]
                if op >= 0:
                    dep, comm, dur = (slot(s - 1, op), s - 1, s) if s > 0 else (none, 2 * pp - 2, s)
                else:
                    dep, comm, dur = (slot(s + 1, op), pp - 1 + s, pp + s) if s < pp - 1 else (none, 2 * pp - 2, pp + s)
                if not done[dep]:
                    break
                plan.append((s, op, slot(s, op), dep, comm, dur))
                done[slot(s, op)] = True
                pos[s] += 1
    return tuple(plan)


@lru_cache(maxsize=256)
def _unrolled(pp: int, m: int, schedule: str):
    """``(fwd, bwd, cf, cb) -> (end per stage, start of each stage's last backward)`` for one
    (pp, m, schedule): :func:`_timing_plan` unrolled into straight-line code on local
    variables (one statement per op), compiled once. It does the recorded loop's comparisons
    and additions in the same order (equal to the bit; tested), without its per-op indexing —
    the search times the same few shapes many times over."""
    plan = _timing_plan(pp, m, schedule)
    n_ops = 2 * m
    none = pp * n_ops
    comm = [f"cf{s}" for s in range(pp - 1)] + [f"cb{s}" for s in range(pp - 1)] + ["0.0"]
    dur = [f"f{s}" for s in range(pp)] + [f"b{s}" for s in range(pp)]
    last = [(s + 1) * n_ops - 1 for s in range(pp)]  # each stage's last backward
    kept = {dep for _, _, _, dep, _, _ in plan} | set(last)
    src = ["def timing(fwd, bwd, cf, cb):",
           f"    {', '.join(dur[:pp])}, = fwd",
           f"    {', '.join(dur[pp:])}, = bwd",
           f"    {', '.join(comm[:pp - 1])}, = cf" if pp > 1 else "",
           f"    {', '.join(comm[pp - 1:-1])}, = cb" if pp > 1 else "",
           f"    {' = '.join(f't{s}' for s in range(pp))} = 0.0"]
    for s, _, me, dep, c, d in plan:
        r = "0.0" if dep == none else "r"
        if dep != none:
            src.append(f"    r = e{dep} + {comm[c]}")
        src.append(f"    {f'e{me} = ' if me in kept else ''}t{s} = ({r} if {r} > t{s} else t{s}) + {dur[d]}")
    src.append(f"    return [{', '.join(f't{s}' for s in range(pp))}], "
               f"[{', '.join(f'e{last[s]} - b{s}' for s in range(pp))}]")
    namespace: dict = {}
    exec(compile("\n".join(src), f"<pipeline pp={pp} m={m} {schedule}>", "exec"), namespace)
    return namespace["timing"]


def run_pipeline(fwd: list, bwd: list, cf: list, cb: list, m: int, schedule: str, record: bool = False):
    """Time the schedule.

    fwd[s], bwd[s]: seconds of one micro-batch's forward / backward op on stage s;
    cf[s]: activation transfer s -> s+1, cb[s]: gradient transfer s+1 -> s (per micro-batch).
    Returns (end per stage, start of each stage's last backward, ops) where ops (if record)
    lists per stage (op, start, end).
    """
    pp = len(fwd)
    if not record:
        if pp == 1:  # one stage: F/B pairs back to back (gpipe: all F then all B)
            fs, bs = fwd[0], bwd[0]
            if schedule == GPIPE:
                t = m * fs + m * bs
            else:
                t = fs + bs + (m - 1) * (fs + bs)
            return [t], [t - bs], None
        return (*_unrolled(pp, m, schedule)(fwd, bwd, cf, cb), None)
    # recorded (and the reference for the above): the plan's ops one by one
    end = [0.0] * (2 * m * pp + 1)
    free = [0.0] * pp
    comm = [*cf, *cb, 0.0]
    dur = [*fwd, *bwd]
    ops_rec = [[] for _ in range(pp)]
    for s, op, me, dep, c, d in _timing_plan(pp, m, schedule):
        t = free[s]
        r = end[dep] + comm[c]  # its input's arrival
        if r > t:
            t = r
        e = end[me] = free[s] = t + dur[d]
        ops_rec[s].append((op, t, e))
    last_b = [end[(s + 1) * 2 * m - 1] - bwd[s] for s in range(pp)]
    return free, last_b, ops_rec
