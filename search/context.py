"""The search context: the valid mesh / micro-batch choices, one graph and one
:class:`~simulator.Simulator` per micro-batch size, and cached per-node costs.

The simulator needs the graph profiled at the strategy's micro-batch size
``global_batch // (dp × microbatches)``; the caller supplies a *graph
provider* (``Callable[[int], TaskGraph]`` or a mapping micro-batch size →
graph). Only ``(dp, microbatches)`` with ``global_batch % (dp × m) == 0`` are
valid, with ``pp = num_devices // dp ≤ nodes``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Union

import numpy as np

from memflow.errors import ConfigError
from memflow.graph.record import TaskGraph
from memflow.kinds import (ACTIONS, KEEP, OFFLOAD_NONE, OFFLOAD_PARAMETERS, OFFLOADS, ONE_F_ONE_B, PREFETCH_DEPTHS,
                          RECOMPUTE, SEARCHABLE_SHARDINGS, SELECTIVE, SHARD_PARAMETERS, SWAP, Schedule)
from memflow.strategy import Strategy
from memflow.simulator import Simulator
from memflow.schedule import inflight

#: the sharding levels the search gives stages, least first (those the executor and simulator run)
SEARCHED_SHARDINGS = SEARCHABLE_SHARDINGS

__all__ = ["SearchContext", "GraphProvider", "MeshLimits", "mesh_choices", "divisors", "balanced_partition"]

GraphProvider = Union[Callable[[int], TaskGraph], Mapping[int, TaskGraph]]


def divisors(x: int, at_most: int | None = None) -> list[int]:
    """The divisors of ``x`` (≥ 1) in increasing order, only those ≤ ``at_most`` when given.
    Trial division up to √x (and no further than ``at_most``): a divisor d ≤ √x pairs with x / d."""
    top = math.isqrt(x) if at_most is None else min(math.isqrt(x), at_most)
    small = [d for d in range(1, top + 1) if x % d == 0]
    large = [x // d for d in reversed(small) if x // d > top and (at_most is None or x // d <= at_most)]
    return small + large


@dataclass(frozen=True)
class MeshLimits:
    """The parts of the strategy a user fixes (None: searched): data-parallel degree, pipeline stages,
    micro-batch count, and a bound on the micro-batch count (1: one forward/backward pass per step)."""

    dp: int | None = None
    pp: int | None = None
    microbatches: int | None = None
    max_microbatches: int | None = None
    sharding: str | None = None  # every stage's sharding level
    offload: str | None = None  # what every stage keeps in host memory (memflow.kinds.Offload)
    # micro-batch sizes the model cannot run at (a BatchNorm1d's training at one sample: its capture fails)
    skip_sizes: frozenset = frozenset()


def mesh_choices(num_devices: int, global_batch: int, limits: MeshLimits = MeshLimits(),
                 max_stages: int | None = None) -> dict[int, list[int]]:
    """Every valid data-parallel degree (dp | devices, dp | batch, and ``pp = devices / dp`` at most
    ``max_stages``) with its valid micro-batch counts (they divide the batch per replica), within
    ``limits``. A limit nothing satisfies is a ConfigError that shows the arithmetic."""
    N, gb, lim = num_devices, global_batch, limits
    dps = [d for d in divisors(N) if gb % d == 0]
    if not dps:
        raise ConfigError(f"global batch {gb} cannot be split over any data-parallel degree dividing {N} devices "
                          f"(need global_batch % dp == 0 for some dp | {N})")
    if lim.pp is not None:
        if N % lim.pp:
            raise ConfigError(f"pp {lim.pp} does not divide the {N} devices")
        if lim.dp is not None and lim.dp * lim.pp != N:
            raise ConfigError(f"dp {lim.dp} × pp {lim.pp} = {lim.dp * lim.pp} ≠ {N} devices")
        want = N // lim.pp
    else:
        want = lim.dp
    if want is not None:
        if N % want:
            raise ConfigError(f"dp {want} does not divide the {N} devices")
        if gb % want:
            raise ConfigError(f"global batch {gb} is not divisible by dp {want}")
        dps = [want]
    if max_stages is not None:
        fit = [d for d in dps if N // d <= max_stages]
        if not fit:
            raise ConfigError(f"pp {N // dps[0]} stages > {max_stages} graph nodes" if want is not None else
                              f"no valid mesh: {N} devices need pp = N/dp ≤ {max_stages} nodes with global batch "
                              f"{gb} divisible by dp")
        dps = fit
    m = lim.microbatches
    skip = lim.skip_sizes
    if m is None:
        out = {d: [k for k in divisors(gb // d, lim.max_microbatches) or [1] if gb // d // k not in skip] for d in dps}
    else:
        ok = [d for d in dps if (gb // d) % m == 0]
        if not ok:
            what = f"dp {dps[0]} × microbatches {m} = {dps[0] * m}" if len(dps) == 1 else \
                f"microbatches {m} × any dp in {dps}"
            raise ConfigError(f"global batch {gb} is not divisible by {what}")
        out = {d: [m] for d in ok if gb // d // m not in skip}
    out = {d: ms for d, ms in out.items() if ms}
    if not out:
        raise ConfigError(f"the model cannot run at micro-batch size(s) {sorted(skip)}, and every mesh of global "
                          f"batch {gb} on {N} devices needs one of them")
    return out


def balanced_partition(costs, pp: int, extra=None, weights=None) -> list[int]:
    """``stage_of`` splitting ``costs`` (per node, in order) into ``pp`` contiguous,
    non-empty stages minimising the largest stage sum (exact linear-partition DP;
    ties go to the earliest cut). With ``extra`` (per node), stage ``j``'s sum is its
    ``costs`` plus ``weights[j]`` (per stage; default 1) × its ``extra``."""
    n = len(costs)
    if pp <= 1:
        return [0] * n
    if pp >= n:
        return list(range(n))
    # Python floats: the same float64 values as numpy's, without numpy's per-scalar cost in the loop
    pre = np.concatenate([[0.0], np.cumsum(np.asarray(costs, dtype=float))]).tolist()
    pex = np.concatenate([[0.0], np.cumsum(np.asarray(extra, dtype=float))]).tolist() if extra is not None else None
    INF = math.inf
    # best[j][i]: minimal max-sum splitting the first i nodes into j stages
    best = [[INF] * (n + 1) for _ in range(pp + 1)]
    cut = [[0] * (n + 1) for _ in range(pp + 1)]
    best[0][0] = 0.0
    for j in range(1, pp + 1):
        prev_row, row, cut_row = best[j - 1], best[j], cut[j]
        w = float(weights[j - 1]) if weights is not None else 1.0
        for i in range(j, n - (pp - j) + 1):
            bv, bc = INF, j - 1
            pi = pre[i]
            for c in range(j - 1, i):
                prev = prev_row[c]
                if prev == INF:
                    continue
                v = pi - pre[c]
                if pex is not None:
                    v += w * (pex[i] - pex[c])
                if not v > prev:  # v = max(prev, v), as max() picks it
                    v = prev
                if v < bv - 1e-15:
                    bv, bc = v, c
            row[i], cut_row[i] = bv, bc
    cuts, i = [], n
    for j in range(pp, 0, -1):
        c = cut[j][i]
        cuts.append(c)
        i = c
    cuts = sorted(cuts)[1:]  # the first is 0
    stage_of, s, cs = [], 0, set(cuts)
    for k in range(n):
        if k in cs:
            s += 1
        stage_of.append(s)
    return stage_of


class SearchContext:
    """Everything the moves, the chains and the exact solver share for one problem."""

    def __init__(self, graphs: GraphProvider, global_batch: int, cluster, *,
                 max_microbatches: int | None = None, limits: MeshLimits | None = None, allow_swap: bool = True,
                 allow_shard: bool = True, allow_host: bool = True):
        if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < 1:
            raise ConfigError(f"global_batch must be an int ≥ 1, got {global_batch!r}")
        self._src = graphs
        self.global_batch = global_batch
        self.cluster = cluster
        self.N = cluster.num_devices
        self.allow_swap = allow_swap
        self.allow_shard = allow_shard
        self.shard_levels: tuple = SEARCHED_SHARDINGS  # a stage's sharding levels, least first
        self.fixed_sharding = (limits or MeshLimits()).sharding
        if self.fixed_sharding is not None:
            if self.fixed_sharding not in SEARCHED_SHARDINGS:
                raise ConfigError(f"sharding must be one of {list(SEARCHED_SHARDINGS)}, got {self.fixed_sharding!r}")
            self.shard_levels = (self.fixed_sharding,)
        self.fixed_offload = (limits or MeshLimits()).offload
        if self.fixed_offload is not None and self.fixed_offload not in OFFLOADS:
            raise ConfigError(f"offload must be one of {list(OFFLOADS)}, got {self.fixed_offload!r}")
        if self.fixed_offload == OFFLOAD_PARAMETERS:
            if self.fixed_sharding not in (None, SHARD_PARAMETERS):
                raise ConfigError(f"offload {OFFLOAD_PARAMETERS} needs sharding parameters, got {self.fixed_sharding}")
            self.shard_levels = (SHARD_PARAMETERS,)
        self.allow_host = allow_host
        self._graphs: dict[int, TaskGraph] = {}
        self._sims: dict[int, Simulator] = {}
        self._costs: dict = {}
        self._parts: dict = {}
        limits = limits or MeshLimits()
        if max_microbatches is not None:
            bound = min(max_microbatches, limits.max_microbatches or max_microbatches)
            limits = replace(limits, max_microbatches=bound)
        self.limits = limits
        cand = mesh_choices(self.N, global_batch, limits)
        # the graph at the largest data-parallel degree's first micro-batch size gives the node count
        d = max(cand)
        first = self.graph(global_batch // (d * cand[d][0]))
        self.n = first.n
        self.ms: dict[int, list[int]] = mesh_choices(self.N, global_batch, limits, max_stages=self.n)
        self.dps = list(self.ms)
        # the per-node actions searched (memflow.kinds' order): swap where allowed, selective where the
        # profile traced it (a graph without its figures, e.g. a synthetic one, has the three others)
        self.allow_selective = any(nd.sel_saved_bytes >= 0 for nd in first.nodes)
        self.actions = tuple(a for a in ACTIONS if (a != SWAP or allow_swap) and (a != SELECTIVE or self.allow_selective))
        # how far ahead a swapped node's copy back may start: a GPU prefetches on a side stream; the
        # CPU copies each back when its backward asks (the depth changes nothing there)
        self.prefetch_depths: tuple = (PREFETCH_DEPTHS if SWAP in self.actions and cluster.device.kind != "cpu"
                                       else (1,))

    # ------------------------------------------------------------- graphs
    def microbatch_sizes(self) -> list[int]:
        return sorted({self.global_batch // (d * m) for d in self.dps for m in self.ms[d]})

    def graph(self, mb: int) -> TaskGraph:
        g = self._graphs.get(mb)
        if g is None:
            src = self._src
            g = src[mb] if isinstance(src, Mapping) else src(mb)
            if g is None:
                raise ConfigError(f"graph provider returned None for micro-batch size {mb}")
            self._graphs[mb] = g
        return g

    def graphs_dict(self) -> dict[int, TaskGraph]:
        """Every graph the search may need (to ship to worker processes)."""
        return {mb: self.graph(mb) for mb in self.microbatch_sizes()}

    def sim(self, mb: int) -> Simulator:
        s = self._sims.get(mb)
        if s is None:
            g = self.graph(mb)
            if g.n != self.n:
                raise ConfigError(f"graph at micro-batch {mb} has {g.n} nodes, expected {self.n}")
            s = self._sims[mb] = Simulator(g, self.cluster)
        return s

    def mb_of(self, st: Strategy) -> int:
        return self.global_batch // (st.dp * st.microbatches)

    def sim_for(self, st: Strategy) -> Simulator:
        return self.sim(self.mb_of(st))

    def valid(self, st: Strategy) -> bool:
        return (st.dp in self.ms and st.microbatches in self.ms[st.dp] and st.dp * st.pp == self.N)

    # ---------------------------------------------------------- node costs
    def node_costs(self, mb: int) -> np.ndarray:
        """fwd + bwd seconds per node at micro-batch ``mb``."""
        c = self._costs.get(("t", mb))
        if c is None:
            g = self.graph(mb)
            c = self._costs[("t", mb)] = np.array([nd.fwd_time_s + nd.bwd_time_s for nd in g.nodes])
        return c

    def node_saved(self, mb: int) -> np.ndarray:
        """Bytes a node's recompute/swap frees per micro-batch (saved + output bytes)."""
        c = self._costs.get(("s", mb))
        if c is None:
            g = self.graph(mb)
            c = self._costs[("s", mb)] = np.array([nd.saved_bytes + nd.out_bytes for nd in g.nodes], dtype=float)
        return c

    def partition(self, pp: int, mb: int, actions=None) -> list[int]:
        """A time-balanced ``stage_of`` for ``pp`` stages (recomputed nodes cost a second forward)."""
        key = (pp, mb, tuple(actions) if actions is not None and (RECOMPUTE in actions or SELECTIVE in actions)
               else None)
        p = self._parts.get(key)
        if p is None:
            costs = self.node_costs(mb)
            if key[2] is not None:
                g = self.graph(mb)
                costs = costs + np.array([nd.fwd_time_s if a == RECOMPUTE else _replay_s(nd) if a == SELECTIVE else 0.0
                                          for nd, a in zip(g.nodes, actions)])
            p = self._parts[key] = balanced_partition(costs, pp)
        return list(p)

    def state_partition(self, pp: int, mb: int, m: int | None = None, schedule: Schedule = ONE_F_ONE_B) -> list[int]:
        """A ``stage_of`` for ``pp`` stages balancing what each holds: parameters, gradients,
        optimizer state and the activations its nodes make (all-keep), once per micro-batch
        in flight on the stage when ``m`` is given (1F1B: an early stage holds more of them,
        so it is given fewer nodes), else once."""
        key = ("state", pp, mb, m, schedule if m is not None else None)
        p = self._parts.get(key)
        if p is None:
            g = self.graph(mb)
            made = [0] * g.n
            for buf in g.buffers:
                if buf.alloc_phase < g.n:
                    made[buf.alloc_phase] += int(buf.nbytes)
            state = [nd.param_bytes + nd.grad_bytes + nd.optimizer_bytes for nd in g.nodes]
            weights = None if m is None else [inflight(pp, s, m, schedule) for s in range(pp)]
            p = self._parts[key] = balanced_partition(state, pp, made, weights)
        return list(p)

    def fix(self, st: Strategy) -> Strategy:
        """``st`` with the parts the user fixed that a move may have changed set back (in place):
        the sharding level and the offload of every stage."""
        lv = self.fixed_sharding if self.fixed_offload != OFFLOAD_PARAMETERS else SHARD_PARAMETERS
        if lv is not None and any(x != lv for x in st.sharding):
            st.sharding = [lv] * st.pp
        off = self.fixed_offload
        if off is not None and st.offload != [off] * st.pp:
            st.optimizer_on_host = [off != OFFLOAD_NONE] * st.pp
            st.params_on_host = [off == OFFLOAD_PARAMETERS] * st.pp
        return st

    def nearest_m(self, dp: int, target: float) -> int:
        """The valid micro-batch count for ``dp`` closest to ``target`` (log scale; ties: larger)."""
        ms = self.ms[dp]
        return min(ms, key=lambda m: (abs(math.log(m / target)), -m))


def _replay_s(nd) -> float:
    """A selective node's replay time (its whole forward's where untraced)."""
    return nd.sel_replay_time_s if nd.sel_saved_bytes >= 0 and nd.sel_replay_time_s >= 0 else nd.fwd_time_s
