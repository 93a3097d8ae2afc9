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
from typing import Callable, Mapping, Union

import numpy as np

from memflow.errors import ConfigError
from memflow.graph.record import TaskGraph
from memflow.kinds import ACTIONS, KEEP, ONE_F_ONE_B, RECOMPUTE, Schedule
from memflow.strategy import Strategy
from memflow.simulator import Simulator
from memflow.schedule import inflight

__all__ = ["SearchContext", "GraphProvider", "divisors", "balanced_partition"]

GraphProvider = Union[Callable[[int], TaskGraph], Mapping[int, TaskGraph]]


def divisors(x: int, at_most: int | None = None) -> list[int]:
    """The divisors of ``x`` (≥ 1) in increasing order, only those ≤ ``at_most`` when given.
    Trial division up to √x (and no further than ``at_most``): a divisor d ≤ √x pairs with x / d."""
    top = math.isqrt(x) if at_most is None else min(math.isqrt(x), at_most)
    small = [d for d in range(1, top + 1) if x % d == 0]
    large = [x // d for d in reversed(small) if x // d > top and (at_most is None or x // d <= at_most)]
    return small + large


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
                 max_microbatches: int | None = None, allow_swap: bool = True,
                 allow_shard: bool = True, allow_host: bool = True):
        if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < 1:
            raise ConfigError(f"global_batch must be an int ≥ 1, got {global_batch!r}")
        self._src = graphs
        self.global_batch = global_batch
        self.cluster = cluster
        self.N = cluster.num_devices
        self.allow_swap = allow_swap
        self.allow_shard = allow_shard
        self.allow_host = allow_host
        self._graphs: dict[int, TaskGraph] = {}
        self._sims: dict[int, Simulator] = {}
        self._costs: dict = {}
        self._parts: dict = {}
        cand = [d for d in divisors(self.N) if global_batch % d == 0]
        if not cand:
            raise ConfigError(
                f"global batch {global_batch} cannot be split over any data-parallel degree dividing "
                f"{self.N} devices (need global_batch % dp == 0 for some dp | {self.N})")
        # the graph at the largest data-parallel degree's micro-batch gives the node count
        first = self.graph(global_batch // max(cand))
        self.n = first.n
        self.dps = [d for d in cand if self.N // d <= self.n]
        if not self.dps:
            raise ConfigError(
                f"no valid mesh: {self.N} devices need pp = N/dp ≤ {self.n} nodes with global_batch "
                f"{global_batch} divisible by dp")
        self.ms: dict[int, list[int]] = {}
        for d in self.dps:
            self.ms[d] = divisors(global_batch // d, max_microbatches) or [1]
        self.actions = ACTIONS if allow_swap else (KEEP, RECOMPUTE)

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
        key = (pp, mb, tuple(actions) if actions is not None and RECOMPUTE in actions else None)
        p = self._parts.get(key)
        if p is None:
            costs = self.node_costs(mb)
            if key[2] is not None:
                g = self.graph(mb)
                costs = costs + np.array([nd.fwd_time_s if a == RECOMPUTE else 0.0
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

    def nearest_m(self, dp: int, target: float) -> int:
        """The valid micro-batch count for ``dp`` closest to ``target`` (log scale; ties: larger)."""
        ms = self.ms[dp]
        return min(ms, key=lambda m: (abs(math.log(m / target)), -m))
