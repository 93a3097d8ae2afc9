"""One rank's pipeline stage: its nodes, parameters, links and micro-batch passes.

Rank ``r`` runs stage ``r // dp`` as data-parallel rank ``r % dp``; with tensor
parallelism, tensor-parallel rank ``r % tp`` of the group ``r // tp``, which runs
stage ``(r // tp) // dp`` as data-parallel rank ``(r // tp) % dp``
(:meth:`memflow.strategy.Strategy.coords`): the data-parallel groups and the
links between stages join the ranks of one tensor-parallel index. The stage
keeps the nodes ``[lo, hi)`` of the captured :class:`StepProgram` and the
parameters they read (the split graph's ``get_attr`` values and any
parameters inside node modules), and the model state they hold that no node
reads (``StepProgram.unread_of``: an unused buffer is memory all the same). It receives ``values_crossing(lo)`` from
the previous stage, sends ``values_crossing(hi)`` to the next one (values
made earlier and passed through included), reads the batch's placeholders
locally (every rank has the batch) and, on the last stage, produces the
loss.
"""
from __future__ import annotations

import inspect
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import _disable_current_modes

from ..errors import ExecutionError
from ..kinds import SHARD_GRADIENTS, SHARD_NONE, SHARD_PARAMETERS, replay_safe
from ..graph.actions import HostSwap, make_wrap
from ..graph.aliases import escaping_params, replay_unsafe_nodes
from ..graph.casts import low_reads, param_readers
from ..graph.program import StepProgram
from .comm import StageLink
from .grads import BucketedAllReduce, sync_shared
from .zero import ReduceScatterSync
from .zero3 import Zero3Sync, unit_params

__all__ = ["Stage", "build_groups", "optimizer_kwargs", "stage_state", "owned_params"]


def optimizer_kwargs(opt: torch.optim.Optimizer) -> dict[str, Any]:
    """The constructor keyword arguments of ``opt`` (its ``defaults`` its class accepts)."""
    sig = inspect.signature(type(opt).__init__)
    ok = set(sig.parameters) - {"self", "params"}
    return {k: v for k, v in opt.defaults.items() if k in ok}


def build_groups(program: StepProgram, stage_of: list[int], dp: int, pp: int, rank: int,
                 timeout: timedelta, tp: int = 1) -> tuple[Any, dict[int, Any], dict[int, tuple[int, ...]]]:
    """Create (on every rank, in one order) the dp groups, the tied-weight groups and (tp > 1) the
    tensor-parallel groups, whose process group this rank's program gets.

    Returns (this rank's dp group, {id(param): group} for this rank's shared
    params, {id(param): stages reading it}).
    """
    stages_of: dict[int, set[int]] = {}
    objs: dict[int, Any] = {}
    for k, c in enumerate(program.calls):
        for a in c.arg_names:
            if a in program.attrs:
                v = program.attr_value(a)
                stages_of.setdefault(id(v), set()).add(stage_of[k])
                objs[id(v)] = v
    my_stage, my_t = rank // tp // dp, rank % tp
    dp_group = None
    for s in range(pp):
        for t in range(tp):
            g = dist.new_group([(s * dp + d) * tp + t for d in range(dp)], timeout=timeout)
            if s == my_stage and t == my_t:
                dp_group = g
    if tp > 1:
        for v in range(pp * dp):
            g = dist.new_group([v * tp + t for t in range(tp)], timeout=timeout)
            if v == rank // tp:
                program.tp.group = g
    keys = sorted({tuple(sorted(st)) for pid, st in stages_of.items()
                   if len(st) > 1 and isinstance(objs[pid], torch.nn.Parameter) and objs[pid].requires_grad})
    by_key = {}
    for key in keys:
        for t in range(tp):
            g = dist.new_group([(s * dp + d) * tp + t for s in key for d in range(dp)], timeout=timeout)
            if t == my_t:
                by_key[key] = g
    shared: dict[int, Any] = {}
    for pid, st in stages_of.items():
        key = tuple(sorted(st))
        if key in by_key and my_stage in key:
            shared[pid] = by_key[key]
    return dp_group, shared, {pid: tuple(sorted(st)) for pid, st in stages_of.items()}


def stage_state(program: StepProgram, lo: int, hi: int) -> tuple[list[torch.Tensor], dict[int, int]]:
    """The model state nodes ``[lo, hi)`` hold: the tensors they read (``get_attr`` values and their
    modules' parameters and buffers, in the order the nodes read them) and the model state no node reads
    (held all the same), and ``id(tensor) -> `` the first node reading it (its gradient is final after that
    node's backward)."""
    seen: dict[int, torch.Tensor] = {}
    first: dict[int, int] = {}
    for k in range(lo, hi):
        c = program.calls[k]
        ts = [program.attr_value(a) for a in c.arg_names if a in program.attrs]
        for t in [t for t in ts if isinstance(t, torch.Tensor)] + list(c.module.parameters()) + list(c.module.buffers()):
            seen.setdefault(id(t), t)
            first.setdefault(id(t), k)
        for _, t in program.unread_of(k):  # model state no node reads: held here all the same
            seen.setdefault(id(t), t)
    return list(seen.values()), first


def owned_params(params: list[torch.nn.Parameter], first: dict[int, int], lo: int, hi: int,
                 skip: set | frozenset = frozenset()) -> list[list[torch.nn.Parameter]]:
    """Per local node of ``[lo, hi)``: the parameters (of ``params``, but ``skip``'s ids) whose gradient its
    backward makes final, in the order the nodes read them (as the profiler lists them)."""
    owned: list[list[torch.nn.Parameter]] = [[] for _ in range(hi - lo)]
    for p in params:
        if id(p) not in skip:
            owned[first[id(p)] - lo].append(p)
    return owned


class Where(dict):
    """Where a stage's program is (``phase``, ``node``, ``mb``), calling ``hook(self)`` on each change (the
    worker counts each place's peak bytes: :attr:`memflow.executor.report.RankReport.phase_peaks`)."""

    hook = None

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        if self.hook is not None:
            self.hook(self)

    def update(self, *args, **kw) -> None:
        super().update(*args, **kw)
        if self.hook is not None:
            self.hook(self)


class Stage:
    """The nodes, state and communication of one rank."""

    def __init__(self, program: StepProgram, stage_of: list[int], actions: list[str], rank: int, dp: int,
                 pp: int, microbatches: int, device: torch.device, timeout: timedelta, bucket_cap: int,
                 sharding: str = SHARD_NONE, params_host: bool = False, tp: int = 1, low: set | None = None,
                 prefetch: int = 1):
        self.program = program
        self.prefetch = prefetch  # swapped nodes' copies back start this many nodes ahead (on a GPU)
        self.rank, self.dp, self.pp, self.tp = rank, dp, pp, tp
        self.stage, self.dp_rank, self.tp_rank = rank // tp // dp, rank // tp % dp, rank % tp
        self.m = microbatches
        self.device = device
        nodes = [k for k, s in enumerate(stage_of) if s == self.stage]
        self.lo, self.hi = nodes[0], nodes[-1] + 1
        self.first = self.stage == 0
        self.last = self.stage == pp - 1
        self.current = Where(phase="setup", node=None)

        # ---- state this stage reads
        self.attr_names = list(dict.fromkeys(a for k in range(self.lo, self.hi) for a in program.calls[k].arg_names
                                             if a in program.attrs))
        self.tensors, first = stage_state(program, self.lo, self.hi)
        self.params = [t for t in self.tensors if isinstance(t, torch.nn.Parameter) and t.requires_grad]
        self.buffers = [t for t in self.tensors if not (isinstance(t, torch.nn.Parameter) and t.requires_grad)]
        self.attr_env = {a: program.attr_value(a) for a in self.attr_names}
        read = {a for k in range(self.lo, self.hi) for a in program.calls[k].arg_names}
        self.reads_input = [p in read for p in program.placeholders]  # batch inputs this stage reads

        # ---- groups (every rank creates all of them, in the same order)
        self.dp_group, shared_groups, readers = build_groups(program, stage_of, dp, pp, rank, timeout, tp)
        # the replicas' all-reduces in one order on every stage: by group (its stages), then by where the
        # program first reads each (a stage's own reading order differs: a tied autoencoder's decoder reads
        # the encoder's weights last layer first, and gloo matched one rank's 3072 floats with another's 1536)
        order = {pid: i for i, pid in enumerate(readers)}
        shared_by_key: dict[tuple[int, ...], tuple[list, Any]] = {}
        for p in sorted(self.params, key=lambda t: order.get(id(t), len(order))):
            g = shared_groups.get(id(p))
            if g is not None:
                shared_by_key.setdefault(readers[id(p)], ([], g))[0].append(p)
        self.shared = [shared_by_key[k] for k in sorted(shared_by_key)]
        shared_ids = {id(p) for ps, _ in self.shared for p in ps}
        owned = owned_params(self.params, first, self.lo, self.hi, shared_ids)
        # (dp 1: ZeRO-3 only with the parameters on the host, each node's streamed in and out)
        self.sharding = sharding if dp > 1 or (sharding == SHARD_PARAMETERS and params_host) else SHARD_NONE
        self.z3: Zero3Sync | None = None
        self.host_tensors: list[torch.Tensor] = []  # model state this rank holds in host memory
        if self.sharding == SHARD_GRADIENTS:  # ZeRO-2: each rank keeps its slice of every bucket
            self.sync = ReduceScatterSync(owned, self.dp_group, dp, self.dp_rank, bucket_cap)
        elif self.sharding == SHARD_PARAMETERS:  # ZeRO-3: each node's parameters sharded, gathered per pass
            readers = {i: {k if k >= 0 else -1 - k for k in ks} for i, ks in param_readers(program).items()}
            units, rest = unit_params(owned, readers, escaping_params(program))
            # the units' parameters autocast only casts (low) are gathered in bf16 (memflow.graph.casts); a
            # node reads its parameters as arguments (program.attrs): the gathered slice is passed in their place
            reads = {k - self.lo: r for k, r in low_reads(program, low or set()).items() if self.lo <= k < self.hi}
            self.sync = self.z3 = Zero3Sync(units, rest, self.dp_group, dp, self.dp_rank, bucket_cap,
                                            host=params_host, low={i for r in reads.values() for _, i in r},
                                            reads=reads)
            sharded = {id(p) for ps in units for p in ps}
            # the model state this rank holds: its shards in place of the units' parameters (whose
            # flat buffers are counted as they are gathered and freed); host shards are host bytes
            self.host_tensors = self.z3.host_pieces()
            self.tensors = ([] if params_host else self.z3.pieces()) + [t for t in self.tensors
                                                                         if id(t) not in sharded]
        else:
            self.sync = BucketedAllReduce(owned, self.dp_group, dp, bucket_cap)

        # ---- links to neighbouring stages
        self.prev = StageLink(self._rank_of(self.stage - 1), program.values_crossing(self.lo), device) \
            if not self.first else None
        self.next = StageLink(self._rank_of(self.stage + 1), program.values_crossing(self.hi), device) \
            if not self.last else None
        self.keep = set(self.next.names) if self.next else set()

        self.live = None
        self.swapper = HostSwap(None, set(), device)
        # (a node whose replay would differ from its forward keeps, as the simulator priced it)
        self.wrap = make_wrap(replay_safe(actions, set(replay_unsafe_nodes(program))), self.swapper)
        if self.z3 is not None and any(pt.low for pt in self.z3.buckets):  # (inside the action: a replay re-reads)
            acted = self.wrap
            self.wrap = lambda k, fn: acted(k, self.z3.bind(k - self.lo, fn))
        self.states: dict[int, tuple[list, Any]] = {}
        self.losses: list[torch.Tensor] = []

    def _host_value(self, t: torch.Tensor) -> torch.Tensor:
        """A copy of the 0-dim ``t`` in host memory (the device's storage behind it can go)."""
        if t.device.type == "cuda":  # pragma: no cover - needs a GPU (no sync: a pinned copy on the stream)
            return torch.empty((), dtype=t.dtype, pin_memory=True).copy_(t, non_blocking=True)
        with _disable_current_modes():  # (the CPU: a copy no accounting counts, as the trace's)
            return t.clone()

    def _rank_of(self, stage: int) -> int:
        """The rank of ``stage`` with this rank's data- and tensor-parallel indices."""
        return (stage * self.dp + self.dp_rank) * self.tp + self.tp_rank

    def attach_memory(self, live) -> None:
        self.live = live
        self.swapper.live = live
        self.swapper.param_ptrs = {t.untyped_storage().data_ptr() for t in self.tensors}
        if self.z3 is not None:
            self.z3.live = live
            self.z3.param_ptrs = self.swapper.param_ptrs
        if isinstance(self.sync, ReduceScatterSync):
            self.sync.live = live

    # ------------------------------------------------------------ passes
    def forward(self, i: int, inputs: list[torch.Tensor]) -> None:
        """Micro-batch ``i``'s forward on this stage; ``inputs`` (its batch tensors the stage reads) is emptied:
        the stage holds each only while something reads or saves it."""
        prog = self.program
        self.current["mb"] = i
        if self.prev is not None:
            self.prev.wait_pending()
        env: dict[str, Any] = dict(zip(prog.placeholders, inputs))
        env.update(self.attr_env)
        self.swapper.batch_inputs(inputs)
        # the env holds the batch from here, each input until its last reader is through, as the trace's step
        # held its copy (a list held to the forward's end kept CANINE's character ids, which only its hash
        # embedding reads and nothing saves, 512 bytes above its plan through every later forward)
        inputs.clear()
        if self.prev is not None:
            self.current.update(phase="receive (forward)", node=self.lo)
            env.update(self.prev.recv_values())
        sts = []
        for k in range(self.lo, self.hi):
            self.current.update(phase="forward", node=k)
            self.swapper.key = (i, k)
            self.swapper.reap()
            if self.z3 is not None:
                self.z3.before_forward(k - self.lo)
            sts.append(prog.forward_node(k, env, wrap=self.wrap))
            if self.z3 is not None:
                self.z3.after_forward(k - self.lo)
            prog.drop_dead(env, k, self.keep, self.hi)
        loss = None
        if self.next is not None:
            self.current.update(phase="send (forward)", node=self.hi - 1)
            self.next.send_values(env)
        else:
            loss = env[prog.loss_name]
            if not loss.requires_grad:
                raise ExecutionError("the loss does not require grad (it depends on no trainable parameter, or "
                                     "was detached): there is nothing to train; the run was stopped before its "
                                     "first backward pass")
            self.losses.append(loss.detach())
        env.clear()
        self.states[i] = (sts, loss)

    def backward(self, i: int) -> None:
        prog = self.program
        self.current["mb"] = i
        if self.prev is not None:
            self.prev.wait_pending()
        sts, loss = self.states.pop(i)
        grads: dict[str, torch.Tensor] = {}
        if self.last:
            grads[prog.loss_name] = torch.full_like(loss, 1.0 / self.m)
        else:
            # that micro-batch's activations are dropped before its gradients' buffers are made (the
            # simulator's sent values die as the backward starts: a stage of one embedding held both, 18%)
            self.next.release_oldest_forward()
            self.current.update(phase="receive (backward)", node=self.hi - 1)
            grads.update(self.next.recv_grads())
        d = self.prefetch
        for k in range(self.hi - 1, max(self.hi - 1 - d, self.lo - 1), -1):  # the last d nodes' copies
            self.swapper.prefetch(i, k)
        for k in range(self.hi - 1, self.lo - 1, -1):
            self.current.update(phase="backward", node=k)
            if k - d >= self.lo:
                self.swapper.prefetch(i, k - d)  # overlaps node k's backward (CUDA)
            if self.z3 is not None:
                self.z3.before_backward(k - self.lo)
            prog.backward_node(k, sts[k - self.lo], grads)
            if loss is not None:  # (the loss node's backward is over: its value kept off the device, the
                # storage behind it let go, as the trace lets it go; CPU's mse_loss is a view of its unreduced buffer)
                self.losses[i] = self._host_value(self.losses[i])
                loss = None
            if self.z3 is not None:  # (every micro-batch: its unit's reduce-scatter; the last: buckets)
                self.z3.after_backward(k - self.lo)
            else:
                self.sync.node_done(k - self.lo)  # (last micro-batch: start the buckets node k completes)
        if self.z3 is not None:
            self.z3.end_backward()
        sts.clear()
        self.swapper.drop(i)
        if self.prev is not None:
            self.current.update(phase="send (backward)", node=self.lo)
            self.prev.send_grads(grads)
        grads.clear()

    def finish_grads(self) -> None:
        """Wait for sends, average dp grads, sum tied-weight replicas."""
        self.current.update(phase="gradient sync", node=None, mb=None)
        for link in (self.prev, self.next):
            if link is not None:
                link.wait_all()
        self.sync.finish()
        sync_shared(self.shared, self.dp)
