"""Proposal moves of the MCMC search.

Each move is a plain function ``move(state, rng, ctx) -> Strategy | None``:
``state`` has ``.strategy`` and ``.eval`` (the current strategy's
:class:`~simulator.Evaluation`, or None), ``rng`` is a
``numpy.random.Generator``, ``ctx`` a :class:`~search.context.SearchContext`.
A move returns a new, valid strategy (``Strategy.validate`` passes and
``global_batch % (dp × microbatches) == 0``), or None when it does not apply.

``MOVES`` / ``MOVE_WEIGHTS`` are the ordinary moves; ``REPAIRS`` /
``REPAIR_WEIGHTS`` the repair moves an infeasible state proposes: they act on
the over-full device's stage (recompute or swap its biggest kept node, move a
boundary node off it, shard its state, more micro-batches).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from memflow.kinds import GPIPE, KEEP, ONE_F_ONE_B, RECOMPUTE, SWAP
from memflow.strategy import Strategy

__all__ = [
    "State", "MOVES", "MOVE_WEIGHTS", "REPAIRS", "REPAIR_WEIGHTS", "make", "stage_kept_to",
    "shift_boundary", "flip_action", "flip_block", "refactor_mesh", "change_microbatches",
    "change_schedule", "toggle_shard", "toggle_host", "rebalance",
    "repair_action", "repair_boundary", "repair_shard", "repair_microbatches", "repair_stage_recompute",
]


@dataclass
class State:
    strategy: Strategy
    eval: Any = None  # simulator.Evaluation of strategy (or None)


Move = Callable[[State, Any, Any], Optional[Strategy]]


def make(st: Strategy, **kw) -> Strategy:
    """A copy of ``st`` with fields replaced (cheap: no dict round trip)."""
    return Strategy(
        dp=kw.get("dp", st.dp), pp=kw.get("pp", st.pp),
        stage_of=list(kw.get("stage_of", st.stage_of)), actions=list(kw.get("actions", st.actions)),
        microbatches=kw.get("microbatches", st.microbatches), schedule=kw.get("schedule", st.schedule),
        shard_state=list(kw.get("shard_state", st.shard_state)),
        optimizer_on_host=list(kw.get("optimizer_on_host", st.optimizer_on_host)),
    )


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def _ranges(stage_of: list[int], pp: int) -> list[tuple[int, int]]:
    out, a = [], 0
    for k in range(1, len(stage_of)):
        if stage_of[k] != stage_of[k - 1]:
            out.append((a, k))
            a = k
    out.append((a, len(stage_of)))
    return out


# ------------------------------------------------------------------ ordinary moves
def shift_boundary(state: State, rng, ctx) -> Strategy | None:
    """Move one stage boundary by one node (a node changes to the neighbouring stage)."""
    st = state.strategy
    if st.pp < 2:
        return None
    so = st.stage_of
    cuts = [k for k in range(1, len(so)) if so[k] != so[k - 1]]
    c = _pick(rng, cuts)
    s_left = so[c - 1]
    opts = []
    # cut moves left: node c-1 joins the right stage (left stage must keep a node)
    if c - 1 >= 1 and so[c - 2] == s_left:
        opts.append(-1)
    # cut moves right: node c joins the left stage
    if c + 1 < len(so) and so[c + 1] == so[c]:
        opts.append(+1)
    if not opts:
        return None
    d = _pick(rng, opts)
    new = list(so)
    if d < 0:
        new[c - 1] = so[c]
    else:
        new[c] = s_left
    return make(st, stage_of=new)


def flip_action(state: State, rng, ctx) -> Strategy | None:
    """Change one node's keep / recompute / swap."""
    st = state.strategy
    k = int(rng.integers(len(st.actions)))
    choices = [a for a in ctx.actions if a != st.actions[k]]
    acts = list(st.actions)
    acts[k] = _pick(rng, choices)
    return make(st, actions=acts)


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
    return make(st, actions=acts) if changed else None


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
    shard = [bool(any(st.shard_state)) and dp > 1] * pp
    host = [bool(any(st.optimizer_on_host))] * pp
    sched = st.schedule if pp > 1 else ONE_F_ONE_B
    return Strategy(dp=dp, pp=pp, stage_of=stage_of, actions=list(st.actions), microbatches=m, schedule=sched,
                    shard_state=shard, optimizer_on_host=host)


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
    return make(st, microbatches=m)


def change_schedule(state: State, rng, ctx) -> Strategy | None:
    """1F1B ↔ GPipe (only matters with several stages and micro-batches)."""
    st = state.strategy
    if st.pp < 2 or st.microbatches < 2:
        return None
    return make(st, schedule=GPIPE if st.schedule == ONE_F_ONE_B else ONE_F_ONE_B)


def toggle_shard(state: State, rng, ctx) -> Strategy | None:
    """Flip one stage's shard_state (needs dp > 1)."""
    st = state.strategy
    if st.dp < 2 or not ctx.allow_shard:
        return None
    s = int(rng.integers(st.pp))
    sh = list(st.shard_state)
    sh[s] = not sh[s]
    return make(st, shard_state=sh)


def toggle_host(state: State, rng, ctx) -> Strategy | None:
    """Flip one stage's optimizer_on_host."""
    st = state.strategy
    if not ctx.allow_host:
        return None
    s = int(rng.integers(st.pp))
    oh = list(st.optimizer_on_host)
    oh[s] = not oh[s]
    return make(st, optimizer_on_host=oh)


def rebalance(state: State, rng, ctx) -> Strategy | None:
    """Re-cut the current pp into time-balanced stages."""
    st = state.strategy
    if st.pp < 2:
        return None
    so = ctx.partition(st.pp, ctx.mb_of(st), st.actions)
    if so == st.stage_of:
        return None
    return make(st, stage_of=so)


# -------------------------------------------------------------------- repair moves
def _overfull_stage(state: State) -> int | None:
    """The stage of the device with the largest peak above capacity (None if none)."""
    ev = state.eval
    if ev is None:
        return None
    st = state.strategy
    cap = ev.capacity_bytes
    best, bs = None, None
    for s in range(st.pp):
        p = ev.peak_bytes[s * st.dp]
        if p > cap and (best is None or p > best):
            best, bs = p, s
    return bs


def _target_stage(state: State, rng) -> int:
    s = _overfull_stage(state)
    if s is None:
        st = state.strategy
        ev = state.eval
        if ev is not None:  # host over-full, or feasible: the fullest device's stage
            s = max(range(st.pp), key=lambda i: ev.peak_bytes[i * st.dp])
        else:
            s = int(rng.integers(st.pp))
    return s


def repair_action(state: State, rng, ctx) -> Strategy | None:
    """On the over-full stage, recompute or swap the kept node with the most saved bytes
    (host over-full: turn a swapped node into recompute / the host optimizer off)."""
    st = state.strategy
    ev = state.eval
    if ev is not None and not ev.host_fits and _overfull_stage(state) is None:
        sw = [k for k, a in enumerate(st.actions) if a == SWAP]
        if sw and (not any(st.optimizer_on_host) or rng.random() < 0.5):
            acts = list(st.actions)
            acts[_pick(rng, sw)] = RECOMPUTE
            return make(st, actions=acts)
        hs = [s for s in range(st.pp) if st.optimizer_on_host[s]]
        if hs:
            oh = list(st.optimizer_on_host)
            oh[_pick(rng, hs)] = False
            return make(st, optimizer_on_host=oh)
        return None
    s = _target_stage(state, rng)
    saved = ctx.node_saved(ctx.mb_of(st))
    cand = [k for k in range(len(st.actions)) if st.stage_of[k] == s and st.actions[k] == KEEP]
    if not cand:
        return None
    cand.sort(key=lambda k: (-saved[k], k))
    k = cand[0] if (len(cand) == 1 or rng.random() < 0.7) else cand[1]
    acts = list(st.actions)
    acts[k] = SWAP if (ctx.allow_swap and rng.random() < 0.4) else RECOMPUTE
    return make(st, actions=acts)


def stage_kept_to(st: Strategy, s: int, action: str) -> Strategy | None:
    """``st`` with every kept node of stage ``s`` given ``action`` (None when it keeps none)."""
    acts = list(st.actions)
    changed = False
    for k in range(len(acts)):
        if st.stage_of[k] == s and acts[k] == KEEP:
            acts[k] = action
            changed = True
    return make(st, actions=acts) if changed else None


def repair_stage_recompute(state: State, rng, ctx) -> Strategy | None:
    """Recompute every kept node of the over-full stage."""
    return stage_kept_to(state.strategy, _target_stage(state, rng), RECOMPUTE)


def repair_boundary(state: State, rng, ctx) -> Strategy | None:
    """Move a boundary node off the over-full stage onto its less-full neighbour."""
    st = state.strategy
    if st.pp < 2:
        return None
    s = _target_stage(state, rng)
    rs = _ranges(st.stage_of, st.pp)
    a, b = rs[s]
    if b - a < 2:
        return None
    ev = state.eval
    opts = []
    if s > 0:
        opts.append(-1)
    if s < st.pp - 1:
        opts.append(+1)
    if ev is not None and len(opts) == 2:
        pl, pr = ev.peak_bytes[(s - 1) * st.dp], ev.peak_bytes[(s + 1) * st.dp]
        d = -1 if pl < pr else +1
        if rng.random() < 0.25:
            d = -d
    else:
        d = _pick(rng, opts)
    new = list(st.stage_of)
    if d < 0:
        new[a] = s - 1
    else:
        new[b - 1] = s + 1
    return make(st, stage_of=new)


def repair_shard(state: State, rng, ctx) -> Strategy | None:
    """Shard the over-full stage's state (dp > 1), else keep its optimizer on the host."""
    st = state.strategy
    s = _target_stage(state, rng)
    if st.dp > 1 and ctx.allow_shard and not st.shard_state[s]:
        sh = list(st.shard_state)
        sh[s] = True
        return make(st, shard_state=sh)
    if ctx.allow_host and not st.optimizer_on_host[s]:
        oh = list(st.optimizer_on_host)
        oh[s] = True
        return make(st, optimizer_on_host=oh)
    return None


def repair_microbatches(state: State, rng, ctx) -> Strategy | None:
    """More, smaller micro-batches (less activation memory); GPipe → 1F1B first."""
    st = state.strategy
    if st.schedule == GPIPE and st.pp > 1 and st.microbatches > 1 and rng.random() < 0.5:
        return make(st, schedule=ONE_F_ONE_B)
    ms = [m for m in ctx.ms[st.dp] if m > st.microbatches]
    if not ms:
        return None
    return make(st, microbatches=ms[0])


MOVES: dict[str, Move] = {
    "shift_boundary": shift_boundary,
    "flip_action": flip_action,
    "flip_block": flip_block,
    "refactor_mesh": refactor_mesh,
    "change_microbatches": change_microbatches,
    "change_schedule": change_schedule,
    "toggle_shard": toggle_shard,
    "toggle_host": toggle_host,
    "rebalance": rebalance,
}
MOVE_WEIGHTS: dict[str, float] = {
    "shift_boundary": 3.0,
    "flip_action": 4.0,
    "flip_block": 1.0,
    "refactor_mesh": 1.0,
    "change_microbatches": 1.5,
    "change_schedule": 0.5,
    "toggle_shard": 0.7,
    "toggle_host": 0.5,
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
