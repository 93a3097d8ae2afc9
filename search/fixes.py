"""How a strategy changes by one step, and the fixes that free memory on an over-full stage.

The one-step edits — a node's action, a stage's per-stage option, a node across a stage
boundary — are shared by the chains' moves (:mod:`search.moves`), the final descent's
neighbourhood (:func:`search.mcmc.neighbours`) and the greedy repair (:mod:`search.repair`).
The memory-freeing fixes are built of them, each a plain function of the strategy that
returns the fixed strategy, or None where it does not apply:

* on a stage: its optimizer on the host (:func:`set_host`), its state sharded
  (:func:`set_shard`), its parameters' shards on the host too (ZeRO-3 only: :func:`set_params_host`),
  one of its kept nodes with the most saved bytes recomputed or swapped
  (:func:`kept_by_saved`, :func:`with_action`), all of its kept nodes at once
  (:func:`free_stage`), a recomputed node swapped or the reverse (:func:`exchange`), a node
  moved off it towards another stage (:func:`move_node`);
* on the whole pipeline: 1F1B for GPipe (:func:`one_f_one_b`), the next micro-batch count
  (:func:`more_microbatches`);
* host memory over-full: a swapped node recomputed, a host optimizer back on the device
  (:func:`host_relief`).

:func:`stage_fixes` and :func:`fixes` list them in the order the greedy repair tries them;
the chains pick one at random (:data:`search.moves.REPAIRS`).
"""
from __future__ import annotations

from memflow.kinds import GPIPE, KEEP, ONE_F_ONE_B, RECOMPUTE, SELECTIVE, SHARD_NONE, SHARD_PARAMETERS, SWAP
from memflow.strategy import Strategy

from .context import SearchContext

__all__ = [
    "make", "with_action", "can_shard", "shard_levels", "shard_up", "set_shard", "set_host", "set_params_host",
    "offload_on_one",
    "cuts", "boundary_shifts", "shifts",
    "cascade", "overfull_stages", "fullest_stage", "freeing_actions", "kept_by_saved", "free_stage", "deepen",
    "exchange", "move_node", "one_f_one_b", "more_microbatches", "unswaps", "host_offs", "host_relief",
    "stage_fixes", "fixes",
]


# ------------------------------------------------------------------ one-step edits
def make(st: Strategy, **kw) -> Strategy:
    """A copy of ``st`` with fields replaced (cheap: no dict round trip). A stage's parameters stay on
    the host only while it keeps ZeRO-3 (on one rank: the level that goes with them) and its optimizer
    on the host."""
    new = Strategy(
        dp=kw.get("dp", st.dp), pp=kw.get("pp", st.pp),
        stage_of=list(kw.get("stage_of", st.stage_of)), actions=list(kw.get("actions", st.actions)),
        microbatches=kw.get("microbatches", st.microbatches), schedule=kw.get("schedule", st.schedule),
        sharding=list(kw.get("sharding", st.sharding)),
        optimizer_on_host=list(kw.get("optimizer_on_host", st.optimizer_on_host)),
        params_on_host=list(kw.get("params_on_host", st.params_on_host)), prefetch=kw.get("prefetch", st.prefetch),
    )
    if new.prefetch != 1 and SWAP not in new.actions:  # (the depth means nothing without a swap: one
        new.prefetch = 1  # strategy, not one per depth, for the caches and the walk)
    ph = new.params_on_host
    if any(ph) and len(ph) == new.pp == len(new.optimizer_on_host) == len(new.sharding):
        new.params_on_host = [bool(ph[s] and new.optimizer_on_host[s]) and new.sharded(s) == SHARD_PARAMETERS
                              for s in range(new.pp)]
    return new


def with_action(st: Strategy, k: int, action: str) -> Strategy:
    """``st`` with node ``k``'s action set to ``action``."""
    acts = list(st.actions)
    acts[k] = action
    return make(st, actions=acts)


def can_shard(st: Strategy, ctx: SearchContext) -> bool:
    """Whether ``st``'s stages may shard their state (ZeRO-1 needs data parallelism)."""
    return st.dp > 1 and ctx.allow_shard


def shard_levels(ctx: SearchContext, dp: int) -> list[str]:
    """The sharding levels the search may give a stage on ``dp`` data-parallel ranks, least first."""
    return list(ctx.shard_levels) if dp > 1 and ctx.allow_shard else [SHARD_NONE]


def shard_up(st: Strategy, s: int, ctx: SearchContext) -> Strategy | None:
    """``st`` with stage ``s``'s state sharded one level further; None where it cannot be."""
    lv = shard_levels(ctx, st.dp)
    i = lv.index(st.sharding[s]) if st.sharding[s] in lv else len(lv)
    return set_shard(st, s, lv[i + 1], ctx) if i + 1 < len(lv) else None


def set_shard(st: Strategy, s: int, level: str, ctx: SearchContext) -> Strategy | None:
    """``st`` with stage ``s``'s sharding level set to ``level``; None where sharding is not
    available (:func:`can_shard`) or the stage is so already."""
    if not can_shard(st, ctx) or st.sharding[s] == level:
        return None
    sh = list(st.sharding)
    sh[s] = level
    return make(st, sharding=sh)


def set_host(st: Strategy, s: int, on: bool, ctx: SearchContext) -> Strategy | None:
    """``st`` with stage ``s``'s optimizer on the host (``on``) or on the device; None where the
    context does not allow host optimizers or the stage is so already."""
    if not ctx.allow_host or st.optimizer_on_host[s] == on:
        return None
    oh = list(st.optimizer_on_host)
    oh[s] = on
    return make(st, optimizer_on_host=oh)


def offload_on_one(ctx: SearchContext) -> bool:
    """Whether a stage without data parallelism may stream its parameters from the host (ZeRO-3's
    level with the parameters on the host, on one rank: ZeRO-Offload/Infinity on one GPU)."""
    return ctx.allow_host and ctx.allow_shard and SHARD_PARAMETERS in ctx.shard_levels


def set_params_host(st: Strategy, s: int, on: bool, ctx: SearchContext) -> Strategy | None:
    """``st`` with stage ``s``'s parameters' shards on the host (``on``: its optimizer too) or back
    on the device (its optimizer stays on the host); None where the stage is not at ZeRO-3 on
    dp > 1 ranks, the context allows no host state, or the stage is so already. On one rank (dp 1)
    the stage's level goes to ``parameters`` with them and back to ``none`` without them."""
    if not ctx.allow_host or bool(st.params_on_host[s]) == on:
        return None
    ph, oh, sh = list(st.params_on_host), list(st.optimizer_on_host), list(st.sharding)
    if st.dp == 1:
        if on and not offload_on_one(ctx):
            return None
        sh[s] = SHARD_PARAMETERS if on else SHARD_NONE
    elif st.sharded(s) != SHARD_PARAMETERS:
        return None
    ph[s] = on
    oh[s] = oh[s] or on
    return make(st, params_on_host=ph, optimizer_on_host=oh, sharding=sh)


def cuts(stage_of: list[int]) -> list[int]:
    """The stage boundaries: each node index that starts a stage after the first."""
    return [c for c in range(1, len(stage_of)) if stage_of[c] != stage_of[c - 1]]


def boundary_shifts(stage_of: list[int], c: int) -> list[list[int]]:
    """``stage_of`` with the boundary at node ``c`` moved by one node, left then right, where the
    stage that gives the node keeps one."""
    out = []
    if c - 1 >= 1 and stage_of[c - 2] == stage_of[c - 1]:  # node c-1 joins the right stage
        new = list(stage_of)
        new[c - 1] = stage_of[c]
        out.append(new)
    if c + 1 < len(stage_of) and stage_of[c + 1] == stage_of[c]:  # node c joins the left stage
        new = list(stage_of)
        new[c] = stage_of[c - 1]
        out.append(new)
    return out


def shifts(stage_of: list[int]):
    """Every ``stage_of`` with one node moved across one stage boundary (every stage kept non-empty)."""
    for c in cuts(stage_of):
        yield from boundary_shifts(stage_of, c)


def cascade(stage_of: list[int], s: int, t: int) -> list[int]:
    """``stage_of`` with stage ``s`` one node smaller and stage ``t`` one node larger: the
    boundaries in between each shift by one node (the stages between keep their sizes)."""
    so = list(stage_of)
    if t > s:  # the last node of each stage s..t-1 moves on to the stage after it
        for j in range(s, t):
            so[max(k for k in range(len(so)) if stage_of[k] == j)] = j + 1
    else:  # the first node of each stage t+1..s moves back to the stage before it
        for j in range(s, t, -1):
            so[min(k for k in range(len(so)) if stage_of[k] == j)] = j - 1
    return so


# ------------------------------------------------------------- which stage, which nodes
def overfull_stages(st: Strategy, ev) -> list[int]:
    """The stages whose devices' peaks exceed capacity, fullest first (ties: the earlier stage)."""
    cap = ev.capacity_bytes
    return sorted((s for s in range(st.pp) if ev.peak_bytes[s * st.dp] > cap),
                  key=lambda s: (-ev.peak_bytes[s * st.dp], s))


def fullest_stage(st: Strategy, ev) -> int:
    """The stage whose devices' peak is the largest (ties: the earliest)."""
    return max(range(st.pp), key=lambda s: ev.peak_bytes[s * st.dp])


def freeing_actions(ctx: SearchContext) -> tuple[str, ...]:
    """The actions that free a kept node's tensors: recompute, swap where allowed, and selective where
    the profile traced it (it frees less than recompute, for less time)."""
    return tuple(a for a in ctx.actions if a != KEEP)


def kept_by_saved(st: Strategy, s: int, ctx: SearchContext, top: int | None = None) -> list[int]:
    """Stage ``s``'s kept nodes, the most saved bytes first (ties: the earlier node); the first
    ``top`` of them when given."""
    saved = ctx.node_saved(ctx.mb_of(st))
    kept = sorted((k for k in range(len(st.actions)) if st.stage_of[k] == s and st.actions[k] == KEEP),
                  key=lambda k: (-saved[k], k))
    return kept if top is None else kept[:top]


# ------------------------------------------------------------------------- the fixes
def free_stage(st: Strategy, s: int, action: str) -> Strategy | None:
    """``st`` with every kept node of stage ``s`` given ``action`` (None when it keeps none):
    where the stage's peak falls while two nodes' tensors are alive, freeing either alone
    frees nothing."""
    acts = list(st.actions)
    changed = False
    for k in range(len(acts)):
        if st.stage_of[k] == s and acts[k] == KEEP:
            acts[k] = action
            changed = True
    return make(st, actions=acts) if changed else None


def exchange(st: Strategy, k: int) -> Strategy | None:
    """``st`` with node ``k`` swapped where it recomputes, recomputed where it swaps or is selective
    (they free different bytes); None where it keeps."""
    a = st.actions[k]
    if a == KEEP:
        return None
    return with_action(st, k, SWAP if a == RECOMPUTE else RECOMPUTE)


def deepen(st: Strategy, k: int) -> Strategy | None:
    """``st`` with node ``k`` recomputed where it is selective (its saved outputs freed too); None
    otherwise."""
    return with_action(st, k, RECOMPUTE) if st.actions[k] == SELECTIVE else None


def move_node(st: Strategy, s: int, t: int) -> Strategy | None:
    """``st`` with one node off stage ``s`` towards stage ``t`` (:func:`cascade`); None where
    stage ``s`` has a single node."""
    if st.stage_of.count(s) < 2:
        return None
    return make(st, stage_of=cascade(st.stage_of, s, t))


def one_f_one_b(st: Strategy) -> Strategy | None:
    """``st`` with 1F1B for GPipe (fewer micro-batches in flight); None where it is not GPipe
    over several stages and micro-batches."""
    if st.schedule != GPIPE or st.pp < 2 or st.microbatches < 2:
        return None
    return make(st, schedule=ONE_F_ONE_B)


def more_microbatches(st: Strategy, ctx: SearchContext) -> Strategy | None:
    """``st`` at the next valid micro-batch count (smaller micro-batches); None at the last."""
    more = [m for m in ctx.ms[st.dp] if m > st.microbatches]
    return make(st, microbatches=more[0]) if more else None


def unswaps(st: Strategy) -> list[Strategy]:
    """``st`` with one swapped node recomputed instead, for each (less host memory)."""
    return [with_action(st, k, RECOMPUTE) for k, a in enumerate(st.actions) if a == SWAP]


def host_offs(st: Strategy, ctx: SearchContext) -> list[Strategy]:
    """``st`` with one stage's parameters back on the device, for each that has them on the host,
    then with one stage's optimizer back on the device (its parameters too), for each."""
    out = [set_params_host(st, s, False, ctx) for s in range(st.pp)]
    out += [set_host(st, s, False, ctx) for s in range(st.pp)]
    return [c for c in out if c is not None]


def host_relief(st: Strategy, ctx: SearchContext) -> list[Strategy]:
    """The fixes for an over-full host: :func:`unswaps`, then :func:`host_offs`."""
    return unswaps(st) + host_offs(st, ctx)


def stage_fixes(st: Strategy, s: int, ctx: SearchContext, top: int | None = None,
                recut: bool = True) -> list[Strategy]:
    """The fixes that free memory on stage ``s``: its optimizer on the host, its state sharded, its
    parameters' shards on the host (at ZeRO-3),
    each of its ``top`` kept nodes with the most saved bytes recomputed and swapped, all its kept
    nodes at once (where it keeps several), each of its freed nodes exchanged (recompute ↔ swap,
    where swapping is allowed) and, with ``recut``, one node off it towards every other stage."""
    out = [c for c in (set_host(st, s, True, ctx), shard_up(st, s, ctx), set_params_host(st, s, True, ctx))
           if c is not None]
    actions = freeing_actions(ctx)
    kept = kept_by_saved(st, s, ctx, top)
    out += [with_action(st, k, a) for k in kept for a in actions]
    if len(kept) > 1:
        out += [free_stage(st, s, a) for a in actions]
    if ctx.allow_swap:
        out += [c for c in (exchange(st, k) for k in range(len(st.actions)) if st.stage_of[k] == s)
                if c is not None]
    out += [c for c in (deepen(st, k) for k in range(len(st.actions)) if st.stage_of[k] == s) if c is not None]
    if recut and st.pp > 1:
        out += [c for c in (move_node(st, s, t) for t in range(st.pp) if t != s) if c is not None]
    return out


def fixes(st: Strategy, ev, ctx: SearchContext, top: int | None = None, recut: bool = True) -> list[Strategy]:
    """Every fix of ``st`` (evaluated as ``ev``) that may free memory where it overflows: with no
    device over-full but the host, :func:`host_relief`; else :func:`stage_fixes` on each over-full
    stage, fullest first, then 1F1B for GPipe and the next micro-batch count (only valid ones)."""
    full = overfull_stages(st, ev)
    if not full and not ev.host_fits:
        return host_relief(st, ctx)
    out = [c for s in full for c in stage_fixes(st, s, ctx, top, recut)]
    out += [c for c in (one_f_one_b(st), more_microbatches(st, ctx)) if c is not None]
    return [c for c in out if ctx.valid(c)]
