"""Trace a step with every node under the ``selective`` action: what the simulator prices it by.

:func:`selective_figures` runs one forward and backward of the program with every node
wrapped as the executor wraps a ``selective`` node (:mod:`memflow.graph.selective`) under
the same counters as the traced step (:class:`memflow.memory.LiveBytes` and
:class:`memflow.profile.opcost.OpCost`), so fake-tensor graphs get their figures like measured
ones. Per node it records the bytes its forward leaves held for its backward (the expensive
ops' outputs the policy saves), its backward's transient (the replay of the cheap ops runs
there), and what the replay costs: the backward's FLOPs, bytes moved and ops above those of
the kept node's backward in the plain trace. The node's inputs, which its checkpoint holds,
are not in its saved bytes: the simulator holds them as it does a recomputed node's.
"""
from __future__ import annotations

import numpy as np
import torch

from ..graph.actions import make_wrap
from ..graph.program import StepProgram
from ..graph.record import carried_bytes
from ..graph.training import unique_params
from ..kinds import SELECTIVE
from ..memory import LiveBytes, storages, told_gaps
from .fakecache import warm_call
from .opcost import OpCost

__all__ = ["selective_figures"]


def selective_figures(program: StepProgram, inputs: list[torch.Tensor], optimizer: torch.optim.Optimizer,
                      state: list[torch.Tensor], keep_cost: OpCost, cast_keys: dict | None = None) -> list[dict]:
    """Per node, the ``sel_*`` fields of its :class:`memflow.graph.record.Node` (see the module
    docstring). ``state``: the tensors the plain trace counted as state; ``keep_cost``: its op
    costs per phase; ``cast_keys`` (:meth:`memflow.memory.LiveBytes.watch_casts`): the ``low_sel_*``
    fields too, the figures without those casts. The parameters' gradients are dropped afterwards."""
    n = program.n
    cost = OpCost()
    live = LiveBytes(record=True, after=cost.count, call=warm_call)
    if cast_keys:
        live.watch_casts(cast_keys)
    live.track(list(state) + list(inputs), kind="state")
    state_bytes = live.live
    live.hold_old({2 * n - 1 - k: k for k in range(n)})  # (each backward's peak with what it frees of its inputs held)
    live.follow_frees()  # (per storage a backward frees, how far its peak falls after: Buffer.sel_free_gap)
    live.follow_grads()  # (each backward's peak as a later micro-batch's, its gradients there already)
    made: set = set()

    def grad_made(prm):  # (the first time in the step: a later micro-batch adds into it)
        if n <= live.phase < 2 * n and id(prm) not in made and prm.grad is not None:
            made.add(id(prm))
            live.grad_made(sum(st.nbytes() for st in storages(prm.grad)))

    def on_phase(p: int) -> None:
        live.set_phase(p)
        cost.phase = p

    # the replay's random state is not restored: its values do not matter here, and a fake step for
    # another device cannot read that device's generator
    wrap = make_wrap([SELECTIVE] * n, None, preserve_rng_state=False)
    hooks = [prm.register_post_accumulate_grad_hook(grad_made) for prm in unique_params(program.split)
             if prm.requires_grad]
    try:
        with live:
            program.run_step(inputs, on_phase=on_phase, wrap=wrap)
            on_phase(2 * n)
    finally:
        for h in hooks:
            h.remove()
    optimizer.zero_grad(set_to_none=True)
    evs = [ev for ev in live.events if ev.nbytes]
    nbytes = np.array([ev.nbytes for ev in evs], dtype=np.int64)
    alloc = np.array([ev.alloc_phase for ev in evs], dtype=np.int64)
    free = np.array([ev.free_phase if ev.free_phase >= 0 else 2 * n + 1 for ev in evs], dtype=np.int64)
    carried = carried_bytes(2 * n + 1, nbytes, alloc, free)
    nc = np.array([not ev.cast for ev in evs], dtype=bool)
    carried_nc = carried_bytes(2 * n + 1, nbytes[nc], alloc[nc], free[nc]) if cast_keys else None
    # per gradient made in an earlier backward and freed in a later one (told from the plain trace's by its
    # phases, bytes and readers), that backward's free_gap here, as a node's own run tells it for the gradients
    # handed to it (memflow.profile.selective_nodes.run_node); none under the casts of gathered weights
    gaps = told_gaps(evs, lambda ev: n <= ev.alloc_phase < ev.free_phase < 2 * n) if not cast_keys else {}
    out = []
    for k in range(n):
        fp, bp = k, 2 * n - 1 - k
        mine = (alloc == fp) & (free == bp)
        saved = int(nbytes[mine].sum())
        # of them, the node's outputs (read by a later node's forward: the policy held what it made)
        held_out = sum(int(ev.nbytes) for ev, m in zip(evs, mine) if m and any(fp < u < n for u in ev.uses))
        trans = max(0, live.phase_peak.get(bp, 0) - state_bytes - int(carried[bp]))
        out.append(dict(
            sel_saved_bytes=saved,
            sel_held_out_bytes=held_out,
            sel_bwd_transient_bytes=trans,
            sel_held_bwd_transient_bytes=max(trans, live.phase_peak_held_f.get(bp, 0) - state_bytes - int(carried[bp])),
            sel_steady_bwd_transient_bytes=min(trans, max(0, live.phase_peak_steady.get(bp, 0) - state_bytes
                                                          - int(carried[bp]))),
            sel_fwd_transient_bytes=max(0, live.phase_peak.get(fp, 0) - state_bytes - int(carried[fp])),
            sel_replay_flops=max(0.0, cost.flops.get(bp, 0.0) - keep_cost.flops.get(bp, 0.0)),
            sel_replay_bytes_accessed=max(0.0, cost.bytes.get(bp, 0.0) - keep_cost.bytes.get(bp, 0.0)),
            sel_replay_ops=max(0, cost.ops.get(bp, 0) - keep_cost.ops.get(bp, 0)),
            _sel_gap_keys=gaps,
        ))
        if cast_keys:
            out[-1].update(
                low_sel_saved_bytes=int(nbytes[mine & nc].sum()),
                low_sel_bwd_transient_bytes=max(0, live.phase_peak_nc.get(bp, 0) - state_bytes - int(carried_nc[bp])),
                low_sel_fwd_transient_bytes=max(0, live.phase_peak_nc.get(fp, 0) - state_bytes - int(carried_nc[fp])))
    return out
