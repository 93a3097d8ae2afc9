"""Baselines reported beside every search result.

* every seed (:mod:`search.seeds`) as a fixed strategy;
* Chen et al.'s √n checkpointing on data parallel: every node recomputed
  except every ⌈√n⌉-th, for a few micro-batch counts;
* ZeRO-2 with full recompute (``zero2+recompute``): every node recomputed, gradients and
  optimizer state sharded over the data-parallel ranks (what a DeepSpeed stage-2 user runs);
* FSDP (ZeRO-3: parameters too), every node kept (``fsdp``) or recomputed (``fsdp+recompute``):
  what a ``fully_shard`` user runs, with or without activation checkpointing; and every node kept
  with the parameters' shards and the optimizer on the host (``fsdp+offload``: ZeRO-Infinity's
  parameter offload, FSDP's ``CPUOffload``);
* Megatron-style tensor parallelism (on graphs captured for tp = the devices of a machine, the
  search's devices then being whole machines): tp × pp over the machines with 1F1B, every node
  kept (``megatron``) or recomputed (``megatron+recompute``), and tp × dp over the machines with
  FSDP (``tp+fsdp``, with more than one machine);
* a memory-unaware search: the same MCMC optimising time only, ignoring
  capacity (its best often does not fit: that is the point of MemFlow).
"""
from __future__ import annotations

import math

from memflow.kinds import KEEP, RECOMPUTE, SHARD_GRADIENTS, SHARD_PARAMETERS
from memflow.strategy import Strategy

from .context import SearchContext
from .fixes import offload_on_one
from .mcmc import ChainParams, ChainResult, Evaluator, run_chain
from .seeds import few_microbatches, seed_strategies, start_pool

__all__ = ["chen_sqrt_strategies", "sharded_strategies", "megatron_strategies", "fixed_baselines",
           "memory_unaware_search"]


def chen_sqrt_strategies(ctx: SearchContext) -> list[tuple[str, Strategy]]:
    n = ctx.n
    step = max(1, math.ceil(math.sqrt(n)))
    acts = [KEEP if (k + 1) % step == 0 else RECOMPUTE for k in range(n)]
    dp = max(ctx.dps)
    pp = ctx.N // dp
    out = []
    for m in few_microbatches(ctx, dp, pp):
        so = ctx.partition(pp, ctx.global_batch // (dp * m))
        out.append((f"chen-sqrt/m{m}", Strategy(dp=dp, pp=pp, stage_of=so, actions=list(acts), microbatches=m)))
    return out


def sharded_strategies(ctx: SearchContext) -> list[tuple[str, Strategy]]:
    """ZeRO-2 with every node recomputed, and FSDP (ZeRO-3) with every node kept or recomputed, on
    the most data-parallel mesh, for a few micro-batch counts (none without data parallelism; a
    level out of the search's levels is left out). On one device only ``fsdp+offload``: every node's
    parameters streamed in from the host, the optimizer there (ZeRO-Infinity on one GPU)."""
    dp = max(ctx.dps)
    if dp == 1 and offload_on_one(ctx):
        return [(f"fsdp+offload/m{m}", Strategy(dp=1, pp=ctx.N, stage_of=so, actions=[KEEP] * ctx.n, microbatches=m,
                                                sharding=[SHARD_PARAMETERS] * ctx.N, optimizer_on_host=[True] * ctx.N,
                                                params_on_host=[True] * ctx.N))
                for m in few_microbatches(ctx, 1, ctx.N) for so in [ctx.partition(ctx.N, ctx.global_batch // m)]]
    if dp < 2 or not ctx.allow_shard:
        return []
    pp = ctx.N // dp
    kinds = [(name, lv, act) for name, lv, act in (("zero2+recompute", SHARD_GRADIENTS, RECOMPUTE),
                                                    ("fsdp", SHARD_PARAMETERS, KEEP),
                                                    ("fsdp+recompute", SHARD_PARAMETERS, RECOMPUTE))
             if lv in ctx.shard_levels]
    out = []
    for m in few_microbatches(ctx, dp, pp):
        so = ctx.partition(pp, ctx.global_batch // (dp * m))
        for name, lv, act in kinds:
            out.append((f"{name}/m{m}", Strategy(dp=dp, pp=pp, stage_of=so, actions=[act] * ctx.n,
                                                 microbatches=m, sharding=[lv] * pp)))
        if SHARD_PARAMETERS in ctx.shard_levels and ctx.allow_host:
            out.append((f"fsdp+offload/m{m}", Strategy(dp=dp, pp=pp, stage_of=so, actions=[KEEP] * ctx.n,
                                                       microbatches=m, sharding=[SHARD_PARAMETERS] * pp,
                                                       optimizer_on_host=[True] * pp, params_on_host=[True] * pp)))
    return out


def megatron_strategies(ctx: SearchContext) -> list[tuple[str, Strategy]]:
    """On a cluster grouped by whole machines (tensor parallelism over each machine's devices):
    Megatron's tp × pp over the machines with 1F1B (every node kept, or recomputed), for a few
    micro-batch counts, and tp × dp with FSDP over the machines. None on any other cluster."""
    cl = ctx.cluster
    if getattr(cl, "group", 1) < 2 or cl.devices_per_node != 1:
        return []
    out = []
    pp = min(ctx.N, ctx.n)
    if ctx.N % pp == 0 and ctx.N // pp == 1 and 1 in ctx.ms:
        for m in few_microbatches(ctx, 1, pp):
            so = ctx.partition(pp, ctx.global_batch // m)
            for name, act in (("megatron", KEEP), ("megatron+recompute", RECOMPUTE)):
                out.append((f"{name}/m{m}", Strategy(dp=1, pp=pp, stage_of=list(so), actions=[act] * ctx.n,
                                                     microbatches=m)))
    if ctx.N > 1 and ctx.N in ctx.ms and SHARD_PARAMETERS in ctx.shard_levels:
        for m in few_microbatches(ctx, ctx.N, 1):
            out.append((f"tp+fsdp/m{m}", Strategy(dp=ctx.N, pp=1, stage_of=[0] * ctx.n, actions=[KEEP] * ctx.n,
                                                  microbatches=m, sharding=[SHARD_PARAMETERS])))
    return out


def fixed_baselines(ctx: SearchContext, evaluator: Evaluator | None = None) -> dict:
    """name → (Strategy, Evaluation) for the seeds, Chen's √n checkpointing, ZeRO-2 + recompute, FSDP
    and (on a cluster grouped by machines) Megatron's tensor parallelism."""
    evaluator = evaluator or Evaluator(ctx)
    out = {}
    for name, st in (seed_strategies(ctx) + chen_sqrt_strategies(ctx) + sharded_strategies(ctx)
                     + megatron_strategies(ctx)):
        ev, _ = evaluator.evaluate(st)
        out[name] = (st, ev)
    return out


def memory_unaware_search(ctx: SearchContext, rng, params: ChainParams) -> ChainResult:
    """The MCMC with the time-only objective (capacity ignored)."""
    p = ChainParams(**{**params.__dict__, "memory_aware": False})
    starts = start_pool(ctx)
    return run_chain(ctx, starts, rng, p)
