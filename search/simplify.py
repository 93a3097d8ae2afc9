"""The plan asks for nothing that buys no time.

Where the step is bound elsewhere (an exposed all-reduce, another stage), the search can end on a
plan that recomputes or swaps a node, shards a stage's state or steps its optimizer on the host at
no predicted cost: the devices would still do that work, the plan is harder to read, and the memory
it frees is not needed. :func:`simplify` undoes such choices one at a time while the plan still fits
and is no slower; among the plans it could end on, it prefers the one with more memory free.
"""
from __future__ import annotations

from memflow.kinds import KEEP, SHARD_NONE
from memflow.strategy import Strategy

from .context import SearchContext
from .fixes import make, with_action
from .mcmc import Evaluator

__all__ = ["simplify", "undos"]

#: equal step times, but for rounding
SAME_TIME = 1e-12


def undos(st: Strategy, ctx: SearchContext) -> list[Strategy]:
    """Every strategy one choice simpler than ``st``: a node back to keep, a stage's state unsharded,
    its optimizer back on the device, its parameters back on the device, swapped copies brought back
    one node later (a shallower swap-in holds them on the device for less)."""
    out = [with_action(st, k, KEEP) for k, a in enumerate(st.actions) if a != KEEP]
    if st.prefetch > 1:
        out.append(make(st, prefetch=st.prefetch - 1))
    for s in range(st.pp):
        if st.sharding[s] != SHARD_NONE and SHARD_NONE in ctx.shard_levels:  # (a level without data parallelism
            # shards nothing: it goes too; a level the user fixed stays)
            out.append(make(st, sharding=[x if t != s else SHARD_NONE for t, x in enumerate(st.sharding)]))
        if ctx.fixed_offload is not None:  # (an offload the user fixed stays)
            continue
        if st.optimizer_on_host[s]:
            out.append(make(st, optimizer_on_host=[x and t != s for t, x in enumerate(st.optimizer_on_host)]))
        if st.params_on_host[s]:  # (the parameters back on the device, the optimizer still on the host)
            out.append(make(st, params_on_host=[x and t != s for t, x in enumerate(st.params_on_host)]))
    return out


def simplify(st: Strategy, ev, evaluator: Evaluator, ctx: SearchContext):
    """Undo, one at a time, each choice whose undoing still fits and is no slower (of those, the one
    that leaves the lowest peak), until none is left."""
    while True:
        best = None
        for c in undos(st, ctx):
            e2, _ = evaluator.evaluate(c, st)
            if e2.fits and e2.step_time_s <= ev.step_time_s * (1 + SAME_TIME):
                if best is None or max(e2.peak_bytes) < max(best[1].peak_bytes):
                    best = (c, e2)
        if best is None:
            return st, ev
        st, ev = best
