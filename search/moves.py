"""Proposal moves of the MCMC search.

Each move is a plain function ``move(state, rng, ctx) -> Strategy | None``:
``state`` has ``.strategy`` and ``.eval`` (the current strategy's
:class:`~simulator.Evaluation`, or None), ``rng`` is a
``numpy.random.Generator``, ``ctx`` a :class:`~search.context.SearchContext`.
A move returns a new, valid strategy (``Strategy.validate`` passes and
``global_batch % (dp × microbatches) == 0``), or None when it does not apply.

``MOVES`` / ``MOVE_WEIGHTS`` are the ordinary moves; ``REPAIRS`` /
``REPAIR_WEIGHTS`` the repair moves an infeasible state proposes: each draws one
of the memory-freeing fixes of :mod:`search.fixes` on the over-full device's
stage (recompute or swap one of its biggest kept nodes, move a boundary node
off it, shard its state, more micro-batches).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from memflow.kinds import GPIPE, ONE_F_ONE_B, RECOMPUTE, SELECTIVE, SHARD_PARAMETERS, SWAP
from memflow.strategy import Strategy

from . import fixes as fx

__all__ = [
    "State", "MOVES", "MOVE_WEIGHTS", "REPAIRS", "REPAIR_WEIGHTS",
    "shift_boundary", "flip_action", "flip_block", "refactor_mesh", "change_microbatches",
    "change_schedule", "change_prefetch", "toggle_shard", "toggle_host", "rebalance",
    "repair_action", "repair_boundary", "repair_shard", "repair_microbatches", "repair_stage_recompute",
]


@dataclass
class State:
    strategy: Strategy
    eval: Any = None  # simulator.Evaluation of strategy (or None)


Move = Callable[[State, Any, Any], Optional[Strategy]]


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


# ------------------------------------------------------------------ ordinary moves
def shift_boundary(state: State, rng, ctx) -> Strategy | None:
    """Move one stage boundary by one node (a node changes to the neighbouring stage)."""
    st = state.strategy
    if st.pp < 2:
        return None
    opts = fx.boundary_shifts(st.stage_of, _pick(rng, fx.cuts(st.stage_of)))
    return fx.make(st, stage_of=_pick(rng, opts)) if opts else None


def flip_action(state: State, rng, ctx) -> Strategy | None:
    """Change one node's keep / recompute / swap."""
    st = state.strategy
    k = int(rng.integers(len(st.actions)))
    choices = [a for a in ctx.actions if a != st.actions[k]]
    return fx.with_action(st, k, _pick(rng, choices))


def flip_block(state: State, rng, ctx) -> Strategy | None:
    """Set one action on a short run of neighbouring nodes (2..4) inside one stage."""
    st = state.strategy
    n = len(st.actions)
    if n < 2:
        return None
    k = int(rng.integers(n))
    ln = int(rng.integers(2, 5))
    s = st.stage_of[k]
    a = _pick(rng, ctx.actions)
    acts = list(st.actions)
    changed = False
    for j in range(k, min(n, k + ln)):
        if st.stage_of[j] != s:
            break
        if acts[j] != a:
            acts[j] = a
            changed = True
    return fx.make(st, actions=acts) if changed else None


def refactor_mesh(state: State, rng, ctx) -> Strategy | None:
    """Another dp × pp factorisation (dp × pp = devices) with a time-balanced partition;
    the micro-batch size is kept where possible."""
    st = state.strategy
    others = [d for d in ctx.dps if d != st.dp]
    if not others:
        return None
    dp = _pick(rng, others)
    pp = ctx.N // dp
    mb_now = ctx.global_batch / (st.dp * st.microbatches)
    m = ctx.nearest_m(dp, ctx.global_batch / (dp * mb_now))
    if rng.random() < 0.3:
        m = _pick(rng, ctx.ms[dp])
    mb = ctx.global_batch // (dp * m)
    stage_of = ctx.partition(pp, mb, st.actions)
    lv = fx.shard_levels(ctx, dp)
    shard = [max(st.sharding, key=lv.index) if set(st.sharding) <= set(lv) else lv[-1]] * pp
    host = [bool(any(st.optimizer_on_host))] * pp
    # parameters streamed from the host carry over with the level that goes with them (dp 1 too)
    off = any(st.params_on_host) and ctx.allow_host and (
        shard[0] == SHARD_PARAMETERS if dp > 1 else fx.offload_on_one(ctx))
    if off:
        shard, host = [SHARD_PARAMETERS] * pp, [True] * pp
    sched = st.schedule if pp > 1 else ONE_F_ONE_B
    return Strategy(dp=dp, pp=pp, stage_of=stage_of, actions=list(st.actions), microbatches=m, schedule=sched,
                    sharding=shard, optimizer_on_host=host, params_on_host=[off] * pp, prefetch=st.prefetch)


def change_microbatches(state: State, rng, ctx) -> Strategy | None:
    """Another valid micro-batch count (mostly a neighbouring one)."""
    st = state.strategy
    ms = ctx.ms[st.dp]
    if len(ms) < 2:
        return None
    i = ms.index(st.microbatches) if st.microbatches in ms else 0
    if rng.random() < 0.7:
        nb = [j for j in (i - 1, i + 1) if 0 <= j < len(ms)]
        m = ms[_pick(rng, nb)]
    else:
        m = _pick(rng, [x for x in ms if x != st.microbatches])
    return fx.make(st, microbatches=m)


def change_schedule(state: State, rng, ctx) -> Strategy | None:
    """1F1B ↔ GPipe (only matters with several stages and micro-batches)."""
    st = state.strategy
    if st.pp < 2 or st.microbatches < 2:
        return None
    return fx.make(st, schedule=GPIPE if st.schedule == ONE_F_ONE_B else ONE_F_ONE_B)


def change_prefetch(state: State, rng, ctx) -> Strategy | None:
    """Another swap-in depth (how many nodes ahead a swapped node's copy back starts; only where
    something is swapped and the device prefetches)."""
    st = state.strategy
    others = [d for d in ctx.prefetch_depths if d != st.prefetch]
    if not others or SWAP not in st.actions:
        return None
    return fx.make(st, prefetch=_pick(rng, others))


def toggle_shard(state: State, rng, ctx) -> Strategy | None:
    """Another sharding level for one stage (needs dp > 1)."""
    st = state.strategy
    if not fx.can_shard(st, ctx):
        return None
    s = int(rng.integers(st.pp))
    others = [x for x in fx.shard_levels(ctx, st.dp) if x != st.sharding[s]]
    return fx.set_shard(st, s, others[int(rng.integers(len(others)))], ctx) if others else None


def toggle_host(state: State, rng, ctx) -> Strategy | None:
    """Flip one stage's optimizer_on_host."""
    if not ctx.allow_host:
        return None
    st = state.strategy
    s = int(rng.integers(st.pp))
    return fx.set_host(st, s, not st.optimizer_on_host[s], ctx)


def toggle_offload(state: State, rng, ctx) -> Strategy | None:
    """Flip one ZeRO-3 stage's parameters between the host and the device (offload
    ``optimizer+parameters`` ↔ ``optimizer``); on one rank (dp 1) any stage's."""
    st = state.strategy
    z3 = [s for s in range(st.pp) if st.sharded(s) == SHARD_PARAMETERS or (st.dp == 1 and fx.offload_on_one(ctx))]
    if not z3 or not ctx.allow_host:
        return None
    s = _pick(rng, z3)
    return fx.set_params_host(st, s, not st.params_on_host[s], ctx)


def rebalance(state: State, rng, ctx) -> Strategy | None:
    """Re-cut the current pp into time-balanced stages."""
    st = state.strategy
    if st.pp < 2:
        return None
    so = ctx.partition(st.pp, ctx.mb_of(st), st.actions)
    if so == st.stage_of:
        return None
    return fx.make(st, stage_of=so)


# -------------------------------------------------------------------- repair moves
def _target_stage(state: State, rng) -> int:
    """The stage of the device with the largest peak above capacity; with none above it (the
    host over-full, or a state that fits), the fullest device's stage; unevaluated, any stage."""
    st, ev = state.strategy, state.eval
    if ev is None:
        return int(rng.integers(st.pp))
    full = fx.overfull_stages(st, ev)
    return full[0] if full else fx.fullest_stage(st, ev)


def repair_action(state: State, rng, ctx) -> Strategy | None:
    """On the over-full stage, recompute or swap the kept node with the most saved bytes, or now
    and then the next one (host over-full: turn a swapped node into recompute / a host optimizer
    off)."""
    st, ev = state.strategy, state.eval
    if ev is not None and not ev.host_fits and not fx.overfull_stages(st, ev):
        sw = fx.unswaps(st)
        if sw and (not any(st.optimizer_on_host) or rng.random() < 0.5):
            return _pick(rng, sw)
        offs = fx.host_offs(st, ctx)
        return _pick(rng, offs) if offs else None
    cand = fx.kept_by_saved(st, _target_stage(state, rng), ctx, top=2)
    if not cand:
        return None
    k = cand[0] if (len(cand) == 1 or rng.random() < 0.7) else cand[1]
    return fx.with_action(st, k, SWAP if (ctx.allow_swap and rng.random() < 0.4) else _recompute_kind(rng, ctx))


def _recompute_kind(rng, ctx) -> str:
    """Recompute, or half the time selective where the profile traced it."""
    return SELECTIVE if (ctx.allow_selective and rng.random() < 0.5) else RECOMPUTE


def repair_stage_recompute(state: State, rng, ctx) -> Strategy | None:
    """Recompute every kept node of the over-full stage (or make them selective)."""
    return fx.free_stage(state.strategy, _target_stage(state, rng), _recompute_kind(rng, ctx))


def repair_boundary(state: State, rng, ctx) -> Strategy | None:
    """Move a boundary node off the over-full stage onto its less-full neighbour (now and then
    the other one)."""
    st = state.strategy
    if st.pp < 2:
        return None
    s = _target_stage(state, rng)
    if st.stage_of.count(s) < 2:  # a move that does not apply draws nothing more
        return None
    ev = state.eval
    opts = [d for d in (-1, +1) if 0 <= s + d < st.pp]
    if ev is not None and len(opts) == 2:
        pl, pr = ev.peak_bytes[(s - 1) * st.dp], ev.peak_bytes[(s + 1) * st.dp]
        d = -1 if pl < pr else +1
        if rng.random() < 0.25:
            d = -d
    else:
        d = _pick(rng, opts)
    return fx.move_node(st, s, s + d)


def repair_shard(state: State, rng, ctx) -> Strategy | None:
    """Shard the over-full stage's state one level further (dp > 1), else keep its optimizer on the
    host, else (at ZeRO-3) its parameters' shards too."""
    st = state.strategy
    s = _target_stage(state, rng)
    for new in (fx.shard_up(st, s, ctx), fx.set_host(st, s, True, ctx), fx.set_params_host(st, s, True, ctx)):
        if new is not None:
            return new
    return None


def repair_microbatches(state: State, rng, ctx) -> Strategy | None:
    """More, smaller micro-batches (less activation memory); GPipe → 1F1B first, half the time."""
    st = state.strategy
    one = fx.one_f_one_b(st)
    if one is not None and rng.random() < 0.5:
        return one
    return fx.more_microbatches(st, ctx)


MOVES: dict[str, Move] = {
    "shift_boundary": shift_boundary,
    "flip_action": flip_action,
    "flip_block": flip_block,
    "refactor_mesh": refactor_mesh,
    "change_microbatches": change_microbatches,
    "change_schedule": change_schedule,
    "change_prefetch": change_prefetch,
    "toggle_shard": toggle_shard,
    "toggle_host": toggle_host,
    "toggle_offload": toggle_offload,
    "rebalance": rebalance,
}
MOVE_WEIGHTS: dict[str, float] = {
    "shift_boundary": 3.0,
    "flip_action": 4.0,
    "flip_block": 1.0,
    "refactor_mesh": 1.0,
    "change_microbatches": 1.5,
    "change_schedule": 0.5,
    "change_prefetch": 0.5,
    "toggle_shard": 0.7,
    "toggle_host": 0.5,
    "toggle_offload": 0.3,
    "rebalance": 0.3,
}
REPAIRS: dict[str, Move] = {
    "repair_action": repair_action,
    "repair_boundary": repair_boundary,
    "repair_shard": repair_shard,
    "repair_microbatches": repair_microbatches,
    "repair_stage_recompute": repair_stage_recompute,
}
REPAIR_WEIGHTS: dict[str, float] = {
    "repair_action": 4.0,
    "repair_boundary": 2.0,
    "repair_shard": 1.0,
    "repair_microbatches": 1.0,
    "repair_stage_recompute": 0.5,
}
