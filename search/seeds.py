"""Seed strategies: the chains' starting points, also reported as baselines.

* ``dp``: pure data parallel (dp = N), everything kept;
* ``dp+recompute``: data parallel with every node recomputed;
* ``dp+shard``: data parallel with ZeRO-1 (optimizer state sharded over the replicas);
* ``pipeline-pp{p}``: for each pp dividing N (dp = N/pp), time-balanced stages, 1F1B.

Each with a few micro-batch counts (name suffix ``/m{m}``). Where the global
batch does not split N ways, the largest valid dp stands in for N.
"""
from __future__ import annotations

import itertools

from memflow.kinds import KEEP, ONE_F_ONE_B, RECOMPUTE, SHARD_OPTIMIZER, SWAP
from memflow.strategy import Strategy

from . import fixes as fx
from .context import SearchContext

__all__ = ["seed_strategies", "few_microbatches", "start_pool", "frugal_strategies"]


def few_microbatches(ctx: SearchContext, dp: int, pp: int, count: int = 3) -> list[int]:
    """A few valid micro-batch counts: pp, 2pp, 4pp (1, 2, 4 without a pipeline), nearest valid."""
    base = [pp * f for f in (1, 2, 4)] if pp > 1 else [1, 2, 4]
    out = []
    for t in base:
        m = ctx.nearest_m(dp, t)
        if m not in out:
            out.append(m)
    return out[:count]


def seed_strategies(ctx: SearchContext) -> list[tuple[str, Strategy]]:
    n = ctx.n
    out: list[tuple[str, Strategy]] = []
    dp_max = max(ctx.dps)
    pp0 = ctx.N // dp_max
    for m in few_microbatches(ctx, dp_max, pp0):
        mb = ctx.global_batch // (dp_max * m)
        so = ctx.partition(pp0, mb)
        out.append((f"dp/m{m}", Strategy(dp=dp_max, pp=pp0, stage_of=so, actions=[KEEP] * n, microbatches=m)))
        out.append((f"dp+recompute/m{m}", Strategy(dp=dp_max, pp=pp0, stage_of=list(so), actions=[RECOMPUTE] * n,
                                                   microbatches=m)))
        if dp_max > 1 and ctx.allow_shard:
            out.append((f"dp+shard/m{m}", Strategy(dp=dp_max, pp=pp0, stage_of=list(so), actions=[KEEP] * n,
                                                   microbatches=m, sharding=[SHARD_OPTIMIZER] * pp0)))
    for dp in sorted(ctx.dps, reverse=True):
        pp = ctx.N // dp
        if dp == dp_max or pp < 2:
            continue
        for m in few_microbatches(ctx, dp, pp):
            mb = ctx.global_batch // (dp * m)
            out.append((f"pipeline-pp{pp}/m{m}", Strategy(dp=dp, pp=pp, stage_of=ctx.partition(pp, mb),
                                                          actions=[KEEP] * n, microbatches=m, schedule=ONE_F_ONE_B)))
    return out


def start_pool(ctx: SearchContext) -> list[tuple[str, Strategy]]:
    """The seeds plus a time-balanced, all-kept strategy for every other valid
    (dp, micro-batch count), and with a pipeline one balanced by memory
    (:meth:`SearchContext.state_partition` with 1F1B's micro-batches in flight):
    the chains' restart points."""
    out = seed_strategies(ctx)
    have = {st.key() for _, st in out}
    n = ctx.n
    for dp in sorted(ctx.dps, reverse=True):
        pp = ctx.N // dp
        for m in ctx.ms[dp]:
            mb = ctx.global_batch // (dp * m)
            cuts = [("balanced", ctx.partition(pp, mb))]
            if pp > 1:  # and balanced by what each stage holds with 1F1B's micro-batches in flight
                cuts.append(("memory-balanced", ctx.state_partition(pp, mb, m)))
            for name, so in cuts:
                st = Strategy(dp=dp, pp=pp, stage_of=so, actions=[KEEP] * n, microbatches=m)
                if st.key() not in have:
                    have.add(st.key())
                    out.append((f"{name}-dp{dp}-pp{pp}/m{m}", st))
    return out


def frugal_strategies(ctx: SearchContext) -> list[tuple[str, Strategy]]:
    """Per valid mesh, the strategies that hold least on a device: the most micro-batches, cuts
    balanced by time and by what each stage holds, every node recomputed (or every node swapped), and every
    stage's state as far off the device as the context allows (the deepest sharding level, the
    optimizer and the parameters on the host). Where the chains found nothing that fits, the
    repair starts from these as well: the only region that fits can be a corner no chain reached
    (a random 3-node instance on 4 devices fits only as 2 × 2 with both stages' state on the
    host; 9 of 10 search seeds reported that nothing fits)."""
    out: list[tuple[str, Strategy]] = []
    n = ctx.n
    for dp in sorted(ctx.dps, reverse=True):
        pp = ctx.N // dp
        m = max(ctx.ms[dp])
        mb = ctx.global_batch // (dp * m)
        cuts = [ctx.partition(pp, mb)]  # balanced by time; with a pipeline, by what each stage holds too
        if pp > 1 and ctx.state_partition(pp, mb, m) != cuts[0]:
            cuts.append(ctx.state_partition(pp, mb, m))
        for so, act in itertools.product(cuts, (RECOMPUTE, SWAP)):
            if act not in ctx.actions:
                continue
            st = Strategy(dp=dp, pp=pp, stage_of=list(so), actions=[act] * n, microbatches=m)
            for s in range(pp):
                st = fx.set_shard(st, s, fx.shard_levels(ctx, dp)[-1], ctx) or st
                st = fx.set_host(st, s, True, ctx) or st
                st = fx.set_params_host(st, s, True, ctx) or st
            out.append((f"frugal-{act}-dp{dp}-pp{pp}/m{m}", ctx.fix(st)))
    return out
