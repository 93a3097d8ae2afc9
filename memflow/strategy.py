"""The Strategy record: what the search chooses and the executor runs.

Mesh: ``dp`` data-parallel replicas × ``pp`` pipeline stages. Rank ``r``
(= device index in the cluster's order) runs stage ``r // dp`` as data-parallel
rank ``r % dp``, so the replicas of one stage sit on neighbouring devices
(inside one machine where possible, where all-reduce is cheapest).

Placement: ``stage_of[k]`` is node ``k``'s stage; stages are contiguous runs
of nodes in topological order, non-decreasing, each stage non-empty, so the
stage graph is acyclic.

Per node: ``actions[k]`` is ``keep`` | ``recompute`` | ``swap``.
Per stage: ``sharding[s]`` is how much of the stage's model state its
data-parallel ranks split (:data:`memflow.kinds.Sharding`): ``none``;
``optimizer`` (ZeRO-1: each rank steps its shard of the optimizer state, then
the parameters are broadcast); ``gradients`` (ZeRO-2: also the gradients, each
rank keeping its reduce-scattered share of each bucket); ``parameters``
(ZeRO-3/FSDP: also the parameters, gathered per node for its forward and its
backward). Without data parallelism every level shards nothing, but for
``parameters`` with the parameters on the host (below).
``optimizer_on_host[s]`` keeps that stage's optimizer state in host memory;
``params_on_host[s]`` also its parameters' shards (valid only with sharding ``parameters`` and the
optimizer on the host; at dp 1 a node's "shard" is all its parameters, streamed in from the host for
each pass and its gradients out: ZeRO-Offload/Infinity on one GPU). The plain data show both as one per-stage
``offload`` (:data:`memflow.kinds.Offload`: ``none`` / ``optimizer`` / ``optimizer+parameters``),
read back into the two; a record without ``offload`` reads as before.
Older plans' ``shard_state`` (a flag per stage, ZeRO-1) is read as
``optimizer`` / ``none``.
The global batch is split into ``dp`` shards, each into ``microbatches``.

Tensor parallelism: ``tp`` ranks run every stage replica together, each with its
share of every split node (:mod:`memflow.graph.tp`); ``partitioning[k]`` is node
``k``'s (``megatron`` or ``replicated``; empty: all replicated), derived from the
captured graph, not searched. The ``tp`` ranks of one replica are neighbours: rank
``r`` is tensor-parallel rank ``r % tp`` of virtual device ``r // tp``, which runs
stage ``(r // tp) // dp`` as data-parallel rank ``(r // tp) % dp`` (so a tensor-parallel
group sits inside one machine). Plain data omit ``tp`` and ``partitioning`` at 1 and
empty, so a record without them reads as before.

Swap-in depth: ``prefetch`` is how many nodes ahead of its own backward a swapped
node's tensors start back to a GPU (:data:`memflow.kinds.PREFETCH_DEPTHS`; 1: while
the next node's backward runs). Plain data omit it at 1.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import ConfigError, StrategyError
from .kinds import (ACTIONS, KEEP, OFFLOAD_NONE, OFFLOAD_OPTIMIZER, OFFLOAD_PARAMETERS, OFFLOADS, ONE_F_ONE_B,
                    RECOMPUTE, SCHEDULES, SELECTIVE, SHARD_NONE, SHARD_OPTIMIZER, SHARD_PARAMETERS, SHARDINGS, SWAP,
                    Action, Schedule, Sharding)
from .typed import from_data

__all__ = ["Strategy", "ACTIONS", "SCHEDULES", "KEEP", "RECOMPUTE", "SWAP", "SELECTIVE", "upgrade_dict", "dict_digest"]


def dict_digest(d: dict[str, Any]) -> str:
    """A short stable hash of a strategy's plain data (:meth:`Strategy.digest`)."""
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def _read_offload(d: dict) -> dict:
    """``d`` with its ``offload`` list (if any) read into ``optimizer_on_host`` / ``params_on_host``."""
    off = d.pop("offload")
    if not isinstance(off, list) or any(x not in OFFLOADS for x in off):
        raise StrategyError(f"strategy.offload must be a list of {list(OFFLOADS)}, got {off!r}")
    host = [x != OFFLOAD_NONE for x in off]
    if "optimizer_on_host" in d and d["optimizer_on_host"] != host:
        raise StrategyError(f"strategy.offload {off} disagrees with optimizer_on_host {d['optimizer_on_host']}")
    d["optimizer_on_host"] = host
    d["params_on_host"] = [x == OFFLOAD_PARAMETERS for x in off]
    return d


def upgrade_dict(d: Any) -> Any:
    """A strategy's plain data with an older record's ``shard_state`` (one flag per stage, ZeRO-1)
    as ``sharding`` (``optimizer`` / ``none``), and its ``offload`` (if any) as the flags it stands
    for; anything else unchanged (checked where read)."""
    if isinstance(d, dict) and "offload" in d:
        d = _read_offload(dict(d))
    if not isinstance(d, dict) or "shard_state" not in d:
        return d
    d = dict(d)
    old = d.pop("shard_state")
    if "sharding" not in d and isinstance(old, list) and all(isinstance(x, bool) for x in old):
        d["sharding"] = [SHARD_OPTIMIZER if x else SHARD_NONE for x in old]
    elif "sharding" not in d:
        raise StrategyError(f"strategy: shard_state must be a list of booleans, got {old!r}")
    return d


@dataclass
class Strategy:
    dp: int
    pp: int
    stage_of: list[int]
    actions: list[Action]
    microbatches: int = 1
    schedule: Schedule = ONE_F_ONE_B
    sharding: list[Sharding] = field(default_factory=list)
    optimizer_on_host: list[bool] = field(default_factory=list)
    params_on_host: list[bool] = field(default_factory=list)
    tp: int = 1
    partitioning: list[str] = field(default_factory=list)
    prefetch: int = 1

    def __post_init__(self) -> None:
        if not self.sharding:
            self.sharding = [SHARD_NONE] * self.pp
        if not self.optimizer_on_host:
            self.optimizer_on_host = [False] * self.pp
        if not self.params_on_host:
            self.params_on_host = [False] * self.pp

    @property
    def offload(self) -> list[str]:
        """Per stage what lives in host memory (:data:`memflow.kinds.Offload`)."""
        return [OFFLOAD_PARAMETERS if p else (OFFLOAD_OPTIMIZER if h else OFFLOAD_NONE)
                for h, p in zip(self.optimizer_on_host, self.params_on_host)]

    def params_host(self, s: int) -> bool:
        """Whether stage ``s``'s parameter shards live in host memory (ZeRO-3 with the optimizer on the host;
        at dp 1 a shard is the whole of a node's parameters)."""
        return bool(self.params_on_host[s]) and self.sharded(s) == SHARD_PARAMETERS

    # ------------------------------------------------------------ factories
    @classmethod
    def single(cls, n_nodes: int, dp: int = 1, action: str = KEEP, microbatches: int = 1) -> "Strategy":
        """All nodes on one stage, replicated ``dp`` times."""
        return cls(dp=dp, pp=1, stage_of=[0] * n_nodes, actions=[action] * n_nodes, microbatches=microbatches)

    @classmethod
    def from_boundaries(cls, n_nodes: int, boundaries: list[int], **kw: Any) -> "Strategy":
        """Stages cut before each node index in ``boundaries`` (sorted, in 1..n-1)."""
        stage_of, s = [], 0
        cuts = set(boundaries)
        for k in range(n_nodes):
            if k in cuts:
                s += 1
            stage_of.append(s)
        kw.setdefault("actions", [KEEP] * n_nodes)
        return cls(pp=s + 1, stage_of=stage_of, **kw)

    # -------------------------------------------------------------- queries
    @property
    def num_devices(self) -> int:
        return self.dp * self.pp * self.tp

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(stage, data-parallel rank, tensor-parallel rank) of ``rank``."""
        v = rank // self.tp
        return v // self.dp, v % self.dp, rank % self.tp

    def rank_of(self, stage: int, dp_rank: int, tp_rank: int = 0) -> int:
        return (stage * self.dp + dp_rank) * self.tp + tp_rank

    def stage_nodes(self, s: int) -> list[int]:
        return [k for k, st in enumerate(self.stage_of) if st == s]

    def boundaries(self) -> list[int]:
        """Node indices where a new stage starts."""
        return [k for k in range(1, len(self.stage_of)) if self.stage_of[k] != self.stage_of[k - 1]]

    def device_of(self, stage: int, dp_rank: int) -> int:
        return self.rank_of(stage, dp_rank)

    def stage_of_device(self, device: int) -> int:
        return self.coords(device)[0]

    def copy(self, **changes: Any) -> "Strategy":
        d = asdict(self)
        if "offload" in changes:  # (read into the flags it stands for)
            d.pop("params_on_host")
            if "optimizer_on_host" not in changes:
                d.pop("optimizer_on_host")
        d.update(changes)
        return Strategy.from_dict(d)

    def key(self) -> tuple:
        """A hashable identity (for caches and de-duplication)."""
        return (
            self.dp, self.pp, tuple(self.stage_of), tuple(self.actions), self.microbatches,
            self.schedule, tuple(self.sharding), tuple(self.optimizer_on_host), tuple(self.params_on_host),
            self.tp, self.prefetch,
        )

    def digest(self) -> str:
        """A short stable hash of the strategy (a plan records the one its prediction is for)."""
        return dict_digest(self.to_dict())

    # ----------------------------------------------------------- validation
    def validate(self, n_nodes: int, n_devices: int | None = None, batch_size: int | None = None) -> None:
        """Raise :class:`StrategyError` with the arithmetic when invalid."""
        if self.dp < 1 or self.pp < 1 or self.tp < 1:
            raise StrategyError(f"dp, pp and tp must be >= 1, got dp {self.dp}, pp {self.pp}, tp {self.tp}")
        if n_devices is not None and self.num_devices != n_devices:
            tp = f" × tp {self.tp}" if self.tp > 1 else ""
            raise StrategyError(
                f"dp {self.dp} × pp {self.pp}{tp} = {self.num_devices} devices, cluster has {n_devices}"
            )
        if self.prefetch < 1:
            raise StrategyError(f"prefetch (nodes ahead a swapped node's copy back starts) must be >= 1, "
                                f"got {self.prefetch}")
        if self.partitioning and len(self.partitioning) != n_nodes:
            raise StrategyError(f"strategy.partitioning covers {len(self.partitioning)} nodes, graph has {n_nodes}")
        if len(self.stage_of) != n_nodes or len(self.actions) != n_nodes:
            raise StrategyError(
                f"strategy covers {len(self.stage_of)} stages / {len(self.actions)} actions, graph has {n_nodes} nodes"
            )
        bad = sorted({a for a in self.actions if a not in ACTIONS})
        if bad:
            raise StrategyError(f"unknown memory action(s) {bad}; valid: {list(ACTIONS)}")
        if self.schedule not in SCHEDULES:
            raise StrategyError(f"unknown schedule {self.schedule!r}; valid: {list(SCHEDULES)}")
        if self.microbatches < 1:
            raise StrategyError(f"microbatches must be >= 1, got {self.microbatches}")
        if self.pp > n_nodes:
            raise StrategyError(f"pp {self.pp} stages > {n_nodes} graph nodes")
        if self.stage_of and (self.stage_of[0] != 0 or self.stage_of[-1] != self.pp - 1):
            raise StrategyError(f"stages must run 0..{self.pp - 1} in order, got {self.stage_of[0]}..{self.stage_of[-1]}")
        for k in range(1, len(self.stage_of)):
            step = self.stage_of[k] - self.stage_of[k - 1]
            if step not in (0, 1):
                raise StrategyError(
                    f"node {k} jumps from stage {self.stage_of[k - 1]} to {self.stage_of[k]}: stages must be contiguous"
                )
        bad = sorted({x for x in self.sharding if x not in SHARDINGS})
        if bad:
            raise StrategyError(f"unknown sharding level(s) {bad}; valid: {list(SHARDINGS)}")
        if any(len(x) != self.pp for x in (self.sharding, self.optimizer_on_host, self.params_on_host)):
            raise StrategyError(f"per-stage options must have {self.pp} entries")
        for s, on in enumerate(self.params_on_host):
            if on and (self.sharded(s) != SHARD_PARAMETERS or not self.optimizer_on_host[s]):
                raise StrategyError(
                    f"stage {s}: offload {OFFLOAD_PARAMETERS!r} needs sharding 'parameters' and the "
                    f"optimizer on the host (got sharding {self.sharding[s]!r}, dp {self.dp}, optimizer on host "
                    f"{bool(self.optimizer_on_host[s])})")
        if batch_size is not None:
            self.check_batch(batch_size)

    def check_batch(self, batch_size: int) -> None:
        """Raise :class:`StrategyError` unless ``batch_size`` splits into dp × microbatches equal parts."""
        if batch_size % (self.dp * self.microbatches):
            raise StrategyError(
                f"batch {batch_size} is not divisible by dp {self.dp} × microbatches {self.microbatches}"
                f" = {self.dp * self.microbatches}"
            )

    def microbatch_size(self, batch_size: int) -> int:
        return batch_size // (self.dp * self.microbatches)

    # ----------------------------------------------------------- serialising
    def to_dict(self) -> dict[str, Any]:
        """Plain data: the fields, with ``params_on_host`` shown as the per-stage ``offload``."""
        d = asdict(self)
        del d["params_on_host"]
        d["offload"] = self.offload
        if self.tp == 1:
            del d["tp"]
        if not self.partitioning:
            del d["partitioning"]
        if self.prefetch == 1:
            del d["prefetch"]
        return d

    plain_data = to_dict  # (memflow.typed.to_data: plan files and JSON show ``offload``)
    upgrade_data = staticmethod(upgrade_dict)  # (memflow.typed.from_data: and read it back)

    def sharded(self, s: int) -> Sharding:
        """Stage ``s``'s effective sharding level: ``none`` without data parallelism, except
        ``parameters`` with the parameters on the host (one rank streams each node's parameters in from
        the host and its gradients out: ZeRO-Offload/Infinity on one GPU, TensorFlowMem's variables on
        the host)."""
        if self.dp > 1 or (self.sharding[s] == SHARD_PARAMETERS and self.params_on_host[s]):
            return self.sharding[s]
        return SHARD_NONE

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Strategy":
        """A strategy from plain data, every field's type checked (StrategyError naming the field).
        An older record's ``shard_state`` flags are read as ``optimizer`` / ``none``."""
        d = upgrade_dict(d)
        try:
            return from_data(cls, d, "strategy")
        except ConfigError as e:
            raise StrategyError(str(e)) from None

    def summary(self) -> str:
        n_re = self.actions.count(RECOMPUTE)
        n_sw = self.actions.count(SWAP)
        tp = f" × tp {self.tp}" if self.tp > 1 else ""
        out = (f"dp {self.dp} × pp {self.pp}{tp}, {self.microbatches} micro-batch(es), {self.schedule}, "
               f"{n_re} recompute, {n_sw} swap")
        if n_sw and self.prefetch > 1:
            out += f" (copied back {self.prefetch} nodes ahead)"
        n_sel = self.actions.count(SELECTIVE)
        if n_sel:
            out += f", {n_sel} selective"
        if self.dp > 1:
            for lvl in SHARDINGS[1:]:
                c = self.sharding.count(lvl)
                if c:
                    out += f", {lvl} sharded on {c}/{self.pp} stage(s)"
        if any(self.optimizer_on_host):
            out += f", optimizer on host on {sum(self.optimizer_on_host)}/{self.pp} stage(s)"
        if any(self.params_on_host):
            out += f", parameters on host on {sum(self.params_on_host)}/{self.pp} stage(s)"
        return out
