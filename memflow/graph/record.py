"""The TaskGraph record: one training step of a model, as nodes with costs.

A *node* is a contiguous run of the captured forward graph that belongs to one
module at the chosen granularity (a transformer block, an embedding, the
loss). The executor splits and wraps the model at exactly these nodes, so a
pipeline split point can sit before any node, and ``checkpoint`` or an
offload hook can wrap any node.

Phases. One plain single-device step of ``n`` nodes runs ``2n + 1`` phases::

    F_0 .. F_{n-1}   forward of node k is phase k
    B_{n-1} .. B_0   backward of node k is phase n + (n - 1 - k)
    OPT              the optimizer step is phase 2n

Buffers. Every tensor storage allocated during the step is a *buffer* with
its byte size, the phase that allocated it, the phase during which it was
freed, and the phases that read it. Model state present before the step
(parameters, optimizer state) is not a buffer; it is the per-node
``param_bytes`` / ``optimizer_bytes``. Parameter gradients are buffers of
kind ``grad``. All byte figures are for the micro-batch size the graph was
captured at (``batch_size``).

The liveness replay (:func:`replay`) is the graph's own prediction of the
step's memory curve: in phase ``p`` the live bytes are the model state, the
buffers *carried through* ``p`` (allocated before ``p`` and freed after it),
plus the phase's ``transient`` bytes (the measured in-phase peak above the
carried bytes). For plain training it reproduces the traced peak exactly.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "Node",
    "Buffer",
    "TaskGraph",
    "Replay",
    "replay",
    "KIND_ACTIVATION",
    "KIND_GRAD",
    "KIND_INPUT_GRAD",
    "KIND_OPTIMIZER",
]

KIND_ACTIVATION = "activation"  # produced in a forward phase
KIND_GRAD = "grad"  # a parameter's gradient (lives until the optimizer step)
KIND_INPUT_GRAD = "input_grad"  # any other buffer made in a backward phase
KIND_OPTIMIZER = "optimizer"  # made in the optimizer phase (state or temporaries)


@dataclass
class Node:
    """One schedulable unit of the step. Bytes in bytes, times in seconds."""

    index: int
    name: str  # unique, e.g. "transformer.h.3"
    module_path: str  # the module it stands for ('' for the root)
    op_count: int = 0
    param_names: list[str] = field(default_factory=list)  # parameters and buffers it owns
    read_params: list[str] = field(default_factory=list)  # every parameter/buffer it reads (owned or shared)
    # ... and those it reads through views another node handed on (memflow.graph.aliases.alias_reads: a WGAN
    # critic's clipped weights): on a later stage they arrive as values, held as a replica is
    handed_params: list[str] = field(default_factory=list)
    read_inputs: list[str] = field(default_factory=list)  # the batch's inputs (placeholders) it reads
    param_count: int = 0
    param_bytes: int = 0
    grad_bytes: int = 0
    optimizer_bytes: int = 0  # optimizer state for this node's parameters
    fwd_flops: float = 0.0
    bwd_flops: float = 0.0
    fwd_bytes_accessed: float = 0.0  # bytes read + written by its memory-bound ops (no FLOP formula)
    bwd_bytes_accessed: float = 0.0
    out_bytes: int = 0  # bytes of tensors this node hands to later nodes
    saved_bytes: int = 0  # bytes made in forward and kept only for its own backward
    fwd_transient_bytes: int = 0  # in-phase peak above the carried bytes
    bwd_transient_bytes: int = 0
    # its forward run again by a recomputing backward: torch's non-reentrant checkpoint stops the
    # replay once the last tensor the backward needs is saved again, so what the forward makes after
    # that (a GRU's stacked output and final state) is never made there; the in-phase peak above the
    # carried bytes up to that last save. -1: not traced (the simulator takes fwd_transient_bytes)
    rec_fwd_transient_bytes: int = -1
    # what its backward has made (net, above the phase's start) when it first unpacks a saved tensor:
    # a recompute's replay runs then, beside those bytes (T5's block casts its output gradient to bf16
    # for the last linear's backward before that linear asks for its saved input)
    bwd_pre_replay_bytes: int = 0
    # how many tensors autograd saved in its forward (its pack hook's calls, inputs and parameters
    # included): a recomputed node that saves none holds nothing (torch's non-reentrant checkpoint
    # keeps its inputs only for its saved tensors' replay). -1: not traced (taken as some)
    saved_tensors: int = -1
    # its forward's in-phase peak above the carried bytes when it runs under the recompute action's
    # checkpoint (it keeps no saved tensor; traced with every node so). -1: not traced (the simulator takes
    # fwd_transient_bytes, an upper bound)
    ck_fwd_transient_bytes: int = -1
    # the same when the node is swapped as the CPU executor swaps (each saved tensor copied to the
    # host as it is saved, copied back when its backward asks for it); -1: not traced (fake-mode
    # graphs for a GPU, whose swap prefetches a node's tensors whole and keeps keep's transients)
    cpu_swap_fwd_transient_bytes: int = -1
    cpu_swap_bwd_transient_bytes: int = -1
    # ... that backward's less the parameter gradients it has made so far: a later micro-batch's, where each
    # is there already (steady_bwd_transient_bytes under the CPU executor's swap; -1: not traced, taken as
    # made anew: a swapped layer first on its stage, two micro-batches, 12% over)
    cpu_swap_steady_bwd_transient_bytes: int = -1
    # ... less only the gradients of parameters more than one node reads (z3_steady_bwd_transient_bytes
    # under that swap; -1: not traced)
    cpu_swap_z3_steady_bwd_transient_bytes: int = -1
    # ... its forward's under that swap had what it frees of the buffers made before it (what it reads last)
    # been held to its end, and the bytes of those it frees: a value every saver swapped dies in the last
    # forward reading it, inside that transient; a plan in which another node holds it (a reader's checkpoint,
    # a kept saver) carries it through that forward too (-1: not traced)
    cpu_swap_held_fwd_transient_bytes: int = -1
    cpu_swap_fwd_freed_bytes: int = -1
    # its backward's in-phase peak above the carried bytes had the saved tensors it frees been held to
    # its end: a swapped node's backward on a GPU while its copies to the host are still running (their
    # pack hook holds each device tensor until its copy ends). -1: not traced (bwd_transient_bytes)
    held_bwd_transient_bytes: int = -1
    low_held_bwd_transient_bytes: int = -1  # ... without the casts a ZeRO-3 unit gathers in bf16 (low_*)
    # its backward's in-phase peak above the carried bytes had what it frees of the buffers made before its
    # forward (its inputs) been held to its end: the node recomputed, whose checkpoint holds every input
    # its forward read until its backward is through (-1: not traced; bwd_transient_bytes)
    rec_held_bwd_transient_bytes: int = -1
    low_rec_held_bwd_transient_bytes: int = -1  # ... without the casts a ZeRO-3 unit gathers in bf16 (low_*)
    # its forward's in-phase peak above the carried bytes had what it frees of the buffers made before it (what
    # it reads last) been held to its end: an output a selective maker's policy holds, read last by this node
    # kept (-1: not traced; fwd_transient_bytes, to which the layout adds those bytes held)
    held_fwd_transient_bytes: int = -1
    # its backward's in-phase peak above the carried bytes less the parameter gradients it has made so far:
    # a later micro-batch's backward, where each gradient is there already (a step buffer) and the new one
    # is added into it and let go (-1: not traced; bwd_transient_bytes, which counts them twice there)
    steady_bwd_transient_bytes: int = -1
    # ... less only the gradients of the parameters more than one node reads (or reads through views another
    # handed on): a later micro-batch's under ZeRO-3, where a unit's gradient is made anew and a weight held
    # whole has its gradient there already (-1: not traced; the simulator takes the unit's gradients out of
    # steady_bwd_transient_bytes' cut, an AWD-LSTM's tied decoder 9% over so)
    z3_steady_bwd_transient_bytes: int = -1
    # its backward's in-phase peak above the carried bytes had each parameter gradient it adds into one an
    # earlier phase made (a tied weight's, read again by a later node) been held from then on: a pipeline
    # stage that holds that parameter without the later node makes its gradient there (-1: not traced; the
    # layout adds the gradient's bytes through the phase)
    first_bwd_transient_bytes: int = -1
    fwd_time_s: float = 0.0  # on the graph's device (measured or predicted)
    bwd_time_s: float = 0.0
    # measured on the CPU: its forward/backward time when swapped as the CPU executor swaps (the
    # pack hook copies each saved tensor to the host inline, the unpack hook copies it back when
    # the backward asks); -1: not measured (the simulator adds the copies at the host link's rate)
    cpu_swap_fwd_time_s: float = -1.0
    cpu_swap_bwd_time_s: float = -1.0
    # under the ``selective`` action (memflow.graph.selective), traced with every node selective:
    # the bytes its forward makes and its backward frees (the expensive ops' saved outputs; its
    # inputs, held by its checkpoint, not included), its backward's transient (the cheap ops' replay
    # runs there) and the replay's costs (the backward's above the kept backward's); its time on the
    # graph's device. -1: not traced (the simulator prices it by its kept saved bytes and full replay)
    sel_saved_bytes: int = -1
    sel_bwd_transient_bytes: int = -1
    # ... had what that backward frees of its inputs been held to its end (a kept maker saved one of them)
    sel_held_bwd_transient_bytes: int = -1
    # ... as a later micro-batch's backward, the gradients it makes there already (as steady_bwd_transient_bytes)
    sel_steady_bwd_transient_bytes: int = -1
    sel_fwd_transient_bytes: int = -1  # its forward's transient there (what the policy drops dies inside it)
    # sel_saved_bytes, sel_bwd_transient_bytes and sel_fwd_transient_bytes without the casts a ZeRO-3 unit
    # gathers in bf16 (as low_*: -1 where none; a selective GRU's replay casts its weights once per time step)
    low_sel_saved_bytes: int = -1
    low_sel_bwd_transient_bytes: int = -1
    low_sel_fwd_transient_bytes: int = -1
    # of sel_saved_bytes, the node's outputs (tensors later nodes read) that the policy holds for its
    # backward: the same storages the layout carries as the node's outputs, held to B_x (-1: not traced)
    sel_held_out_bytes: int = -1
    sel_replay_flops: float = 0.0
    sel_replay_bytes_accessed: float = 0.0
    sel_replay_ops: int = 0
    sel_replay_time_s: float = -1.0
    # tensor parallelism (TaskGraph.tp > 1; memflow.graph.tp): how the node is split over the group
    # ("megatron" or "replicated") and what its collectives move per rank: all-reduces in its forward
    # (after each row-split linear) and in its backward (the column-split linears' input gradients)
    partitioning: str = "replicated"
    # its transients as traced without the buffers of the graph's ``cast_params`` (a ZeRO-3 stage that
    # gathers those parameters in bf16 never makes them: simulator.lowcast); -1: none of its own
    low_fwd_transient_bytes: int = -1
    low_bwd_transient_bytes: int = -1
    low_rec_fwd_transient_bytes: int = -1
    tp_fwd_bytes: int = 0
    tp_fwd_collectives: int = 0
    tp_bwd_bytes: int = 0
    tp_bwd_collectives: int = 0


@dataclass
class Buffer:
    """A tensor storage allocated during the step (see module docstring)."""

    nbytes: int
    alloc_phase: int
    free_phase: int  # the phase during which it was freed (2n+1: survives the step)
    kind: str = KIND_ACTIVATION
    uses: list[int] = field(default_factory=list)  # phases whose ops read it
    param: str = ""  # for kind "grad": the parameter whose gradient it is
    # the views smaller than the storage that ops read, ``[bytes, phase, ...]`` each, listing the
    # phases that read that view and not the whole storage (a phase of ``uses`` listed in no view
    # read it whole): a pipeline stage that receives this buffer receives only what it reads, e.g.
    # a skip connection's gradient, one slice of a concatenation's gradient
    views: list[list[int]] = field(default_factory=list)
    # autocast's bf16 cast of this parameter (one of the graph's ``cast_params``), made in the forward
    cast: str = ""
    # held for a backward through autograd's saved-tensor hooks (a checkpoint drops it, a swap's pack hook
    # copies it); False: held some other way, as a custom autograd function's tensor kept on its ctx (HF's
    # grouped-mm MoE keeps its experts' offsets so): no action moves it
    packed: bool = True
    # where a value on this storage that a later node reads is sent across a pipeline cut as a contiguous
    # copy (memflow.graph.sending: a view of part of it, such as a slice a stage's last node returns), every
    # value on it a later node reads: ``[maker node, last reader node, bytes its send copies (0: none)]``. A
    # stage [a, b) sends those with a <= maker < b <= last reader; a copy is held until the micro-batch's
    # backward starts, and holds the storage no longer than the send
    copies: list[list[int]] = field(default_factory=list)
    # read as views smaller than it (``views``), made before the phase that frees it and freed there at that
    # phase's peak so far: how far the phase's peak after its free is below that (a stage that receives a
    # slice of it d bytes smaller peaks ``min(d, free_gap)`` lower there: a skip's gradient, a slice of a
    # concatenation's, alive at its backward's peak); 0: that peak came after it; -1: not traced
    free_gap: int = -1
    # ... the same in the CPU's all-swapped trace (-1: not traced, or not told apart there)
    swap_free_gap: int = -1
    # ... and in the selective figures of the node whose backward frees it (-1: not traced, not told apart, or
    # under autocast's casts of gathered weights): a selective encoder level of a U-Net cut before its decoder
    # counted each skip's whole concatenation gradient, 512 KiB (12-14%) over
    sel_free_gap: int = -1
    # ``[phase, gap]`` per phase an op read it in that it outlives: how far that phase's peak after the autograd
    # node reading it last there was through stands above its peak until then (a stage on which that node is
    # its last reader lets it go with the node's saved tensors: the phase peaks ``min(bytes, gap)`` lower than
    # with it held; a feature pyramid's head applied on a later stage to a received scale, 4 KiB, 5% over)
    read_gaps: list[list[int]] = field(default_factory=list)
    # ... the same with the phase's steady peaks: a later micro-batch's backward, where the reading node's
    # gradients add into those made already and its peak may come before it is through (a transposed conv
    # whose input a selective ReLU before it no longer holds: let go before its first micro-batch's peak, not
    # before a later one's; 1,984 B under)
    steady_read_gaps: list[list[int]] = field(default_factory=list)

    def read_bytes(self, phases) -> int:
        """The bytes of this storage that ``phases``' ops read: the whole storage if one of them read
        it whole, else the sum of the distinct views they read (at most the storage)."""
        if not self.views:  # read whole wherever it is read
            uses = self.uses
            return int(self.nbytes) if any(p in uses for p in phases) else 0
        phases = set(phases) & set(self.uses)
        if not phases:
            return 0
        partial = {p for v in self.views for p in v[1:]}
        if phases - partial:
            return int(self.nbytes)
        return min(int(self.nbytes), sum(int(v[0]) for v in self.views if phases.intersection(v[1:])))


@dataclass
class TaskGraph:
    """A profiled training step. See the module docstring for phases/buffers."""

    model_name: str
    batch_size: int  # the (micro-)batch size the costs are for
    dtype: str  # "fp32" or "bf16" (autocast mixed precision)
    nodes: list[Node]
    buffers: list[Buffer]
    optimizer: str = "AdamW"
    device: str = "cpu"  # the device kind the times are for
    time_source: str = "none"  # "measured" | "predicted" | "none"
    opt_transient_bytes: int = 0  # optimizer phase peak above the carried bytes
    opt_time_s: float = 0.0
    input_bytes: int = 0  # bytes of the batch itself (lives the whole step)
    inputs: dict[str, int] = field(default_factory=dict)  # the batch's placeholders -> bytes
    # ... and the phase in which the executor's copy of each is let go, where that is before the backward
    # ends: its last reader's forward (an L1 loss's target), or the backward of a node whose autograd held
    # it (saved, or kept on a custom op's ctx); traced, the step holding its copy alone
    input_free: dict[str, int] = field(default_factory=dict)
    # ... of those, the ones let go before that phase's peak by at least their bytes (its peak without them is
    # the traced one less them: a segmentation loss's per-pixel labels, let go by the NLL backward before the
    # log-softmax backward's allocation), where the phase's figures count the batch to the step's end
    input_early: list[str] = field(default_factory=list)
    # ... and those the CPU executor's swap lets go so too, traced with every node swapped (a swapped reader's
    # phase is priced from that trace: SegFormer's labels, its loss node swapped, 6-7.5% over counted there)
    input_early_swapped: list[str] = field(default_factory=list)
    # ... and per batch input the nodes whose forward saved it (a saved-tensor hook saw it), where no node
    # reads it through views another made: the stage a reader is on lets its own copy of an input other
    # stages read too (an autoencoder's image, its own target) go by these (:meth:`input_deaths`)
    input_holders: dict[str, list[int]] = field(default_factory=dict)
    fingerprint: str = ""
    # parameter/buffer name -> [bytes, grad bytes, optimizer-state bytes, owner node, dtype kind
    # (memflow.buckets.dtype_kind; absent in hand-made tables: one kind)]
    params: dict[str, list[int]] = field(default_factory=dict)
    # the tensor-parallel degree the step was captured for: every figure is one rank's of that group
    tp: int = 1
    # the trainable parameters one node reads and autocast only ever casts to bf16 (memflow.graph.casts):
    # what a ZeRO-3 unit gathers in bf16
    cast_params: list[str] = field(default_factory=list)
    # the trainable parameters a node hands on as views (memflow.graph.aliases): a ZeRO-3 unit keeps them whole
    whole_params: list[str] = field(default_factory=list)
    # per pipeline cut b whose gradients sent back travel as copies (memflow.graph.sending: a view of part
    # of a storage, one piece of a concatenation's gradient): ``[b, bytes]``, made as the stage from b ends
    # its backward and held until its next pass starts, in no traced phase (see Buffer.copies)
    bwd_send_copies: list[list[int]] = field(default_factory=list)
    # per value a later node reads that is a view of a batch input and would be sent as a copy (a
    # language model's targets, ``tokens[:, 1:]``, sliced by its first node and read by its loss):
    # ``[maker, last reader, bytes]``; no Buffer holds a batch input, so these are apart from Buffer.copies
    fwd_input_send_copies: list[list[int]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    # ----------------------------------------------------------------- shape
    @property
    def n(self) -> int:
        return len(self.nodes)

    @property
    def num_phases(self) -> int:
        return 2 * self.n + 1

    def fwd_phase(self, k: int) -> int:
        return k

    def bwd_phase(self, k: int) -> int:
        return 2 * self.n - 1 - k

    @property
    def opt_phase(self) -> int:
        return 2 * self.n

    def phase_name(self, p: int) -> str:
        n = self.n
        if p < n:
            return f"F:{self.nodes[p].name}"
        if p < 2 * n:
            return f"B:{self.nodes[2 * n - 1 - p].name}"
        if p == 2 * n:
            return "OPT"
        return "END"

    def node_of_phase(self, p: int) -> int:
        """The node a phase belongs to (-1 for the optimizer phase)."""
        n = self.n
        if p < n:
            return p
        if p < 2 * n:
            return 2 * n - 1 - p
        return -1

    def node_index(self, name: str) -> int:
        for nd in self.nodes:
            if nd.name == name:
                return nd.index
        raise KeyError(name)

    # ------------------------------------------------------------ aggregates
    @property
    def param_bytes(self) -> int:
        return sum(nd.param_bytes for nd in self.nodes)

    @property
    def optimizer_bytes(self) -> int:
        return sum(nd.optimizer_bytes for nd in self.nodes)

    @property
    def state_bytes(self) -> int:
        """Bytes resident before the step starts: params + optimizer state + batch."""
        return self.param_bytes + self.optimizer_bytes + self.input_bytes

    def transient_array(self) -> np.ndarray:
        """Per phase transient bytes (length 2n+1)."""
        n = self.n
        t = np.zeros(2 * n + 1, dtype=np.int64)
        for nd in self.nodes:
            t[nd.index] = nd.fwd_transient_bytes
            t[2 * n - 1 - nd.index] = nd.bwd_transient_bytes
        t[2 * n] = self.opt_transient_bytes
        return t

    def buffer_arrays(self) -> dict[str, np.ndarray]:
        """Buffers as arrays: nbytes, alloc_phase, free_phase (int64)."""
        return {
            "nbytes": np.array([b.nbytes for b in self.buffers], dtype=np.int64),
            "alloc": np.array([b.alloc_phase for b in self.buffers], dtype=np.int64),
            "free": np.array([b.free_phase for b in self.buffers], dtype=np.int64),
        }

    def edges(self) -> dict[tuple[int, int], int]:
        """(producer node, consumer node) -> bytes read in the consumer's forward."""
        n = self.n
        out: dict[tuple[int, int], int] = {}
        for b in self.buffers:
            if b.alloc_phase >= n:
                continue
            src = b.alloc_phase
            for u in sorted(set(b.uses)):
                if u < n and u != src:
                    out[(src, u)] = out.get((src, u), 0) + b.nbytes
        return out

    def to_networkx(self):
        """A networkx DiGraph of nodes (with their costs) and byte-weighted edges."""
        import networkx as nx

        g = nx.DiGraph()
        for nd in self.nodes:
            g.add_node(nd.index, **asdict(nd))
        for (s, d), nbytes in self.edges().items():
            g.add_edge(s, d, nbytes=nbytes)
        return g

    # ----------------------------------------------------------- serialising
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TaskGraph":
        d = dict(d)
        d["nodes"] = [Node(**x) for x in d["nodes"]]
        d["buffers"] = [Buffer(**x) for x in d["buffers"]]
        return cls(**d)

    def stage_input_bytes(self, a: int, b: int) -> int:
        """Bytes of the batch inputs that nodes ``a .. b-1`` read (a pipeline stage holds only those);
        a graph without per-node input reads: the whole batch on the first and last stage."""
        if not self.inputs:
            return self.input_bytes if (a == 0 or b == self.n) else 0
        names = {x for nd in self.nodes[a:b] for x in nd.read_inputs}
        return sum(self.inputs.get(x, 0) for x in names)

    def input_deaths(self, a: int, b: int) -> tuple:
        """Per batch input nodes ``a .. b-1`` read that the executor's copy of lets go before the
        stage's last backward phase with every node kept (:attr:`input_free`): ``(bytes, local
        phase, local readers)`` — held through that local phase and gone after it; a reader
        recomputed (its checkpoint holds what it reads) holds it to its own backward. An input
        another stage reads too, or let go in another stage's phase, is let go by what this stage's
        readers save (:attr:`input_holders`), a reader that saved none of it held to its backward but
        where the whole step let it go before; one read through views sent on is held to the end."""
        return tuple((nb, local, readers) for _name, nb, local, readers, _alone in self._deaths(a, b))

    def early_deaths(self, a: int, b: int) -> tuple:
        """Per entry of :meth:`input_deaths` (same order), whether the input is let go before its phase's
        peak (:attr:`input_early`): only where this stage lets it go where the whole step did."""
        return tuple(alone and name in self.input_early for name, _nb, _local, _readers, alone in self._deaths(a, b))

    def early_swapped_deaths(self, a: int, b: int) -> tuple:
        """Per entry of :meth:`input_deaths`, whether the input is let go before its phase's peak in the trace
        with every node swapped as the CPU executor swaps too (:attr:`input_early_swapped`)."""
        return tuple(alone and name in self.input_early and name in self.input_early_swapped
                     for name, _nb, _local, _readers, alone in self._deaths(a, b))

    def _deaths(self, a: int, b: int) -> list:
        """:meth:`input_deaths`' entries as ``(name, bytes, local phase, local readers, alone)``; ``alone``: no
        other stage reads it and this stage lets it go where the whole step did."""
        m, n = b - a, self.n
        out = []
        for name, nb in self.inputs.items():
            p = self.input_free.get(name)
            readers = [k - a for k in range(a, b) if name in self.nodes[k].read_inputs]
            if p is None or not readers or nb <= 0:
                continue
            k = p if p < n else 2 * n - 1 - p
            alone = a <= k < b and not any(name in nd.read_inputs for nd in self.nodes[:a] + self.nodes[b:])
            local = (k - a if p < n else 2 * m - 1 - (k - a)) if alone else self._held_by_savers(name, p, a, b)
            if local is not None and local < 2 * m - 1:
                out.append((name, nb, local, tuple(readers), alone))
        return out

    def _held_by_savers(self, name: str, p: int, a: int, b: int) -> int | None:
        """The local phase the copy of input ``name`` on the stage of nodes ``a .. b-1`` is let go in,
        by its readers there: one whose forward saved it holds it to its backward; one that did not, to
        its forward's end where the whole step let it go (the traced phase ``p``) before that reader's
        backward, else to its backward too (something no saved-tensor hook sees may hold it: a custom
        op's ctx). None where no holders were recorded (an input read through views sent on)."""
        holders = self.input_holders.get(name)
        if holders is None:
            return None
        n, m, held = self.n, b - a, set(holders)
        return max(2 * m - 1 - (k - a) if (k in held or p >= 2 * n - 1 - k) else k - a
                   for k in range(a, b) if name in self.nodes[k].read_inputs)

    def content_hash(self) -> str:
        blob = json.dumps(self.to_dict(), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


@dataclass
class Replay:
    """The liveness replay of a plain single-device step."""

    phase_bytes: np.ndarray  # peak live bytes in each phase (length 2n+1)
    carried_bytes: np.ndarray  # buffers carried through each phase
    state_bytes: int  # params + optimizer state + batch, resident all step

    @property
    def peak_bytes(self) -> int:
        return int(self.phase_bytes.max())

    @property
    def peak_phase(self) -> int:
        return int(self.phase_bytes.argmax())


def carried_bytes(num_phases: int, nbytes: np.ndarray, alloc: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Bytes of buffers alive through each whole phase: alloc < p < free."""
    diff = np.zeros(num_phases + 2, dtype=np.int64)
    lo = alloc + 1
    hi = np.minimum(free, num_phases)  # exclusive
    keep = lo < hi
    np.add.at(diff, lo[keep], nbytes[keep])
    np.add.at(diff, hi[keep], -nbytes[keep])
    return np.cumsum(diff)[:num_phases]


def replay(graph: TaskGraph, executor: bool = False) -> Replay:
    """The graph's own liveness replay of one plain single-device training step (the traced one: a
    training loop holding its batch to the end). ``executor``: as the executor runs it, where each
    micro-batch's inputs are held by the step alone, and one no node's backward needs is let go once
    its last reader's forward ends (:meth:`TaskGraph.input_deaths`), and one let go before its phase's
    peak is not counted at it (:meth:`TaskGraph.early_deaths`): the simulator's single stage, every node
    kept."""
    arr = graph.buffer_arrays()
    carried = carried_bytes(graph.num_phases, arr["nbytes"], arr["alloc"], arr["free"])
    if executor:
        for (nb, d, _), early in zip(graph.input_deaths(0, graph.n), graph.early_deaths(0, graph.n)):
            carried[d + 1 - early:2 * graph.n] -= nb
    state = graph.state_bytes
    phase = state + carried + graph.transient_array()
    return Replay(phase_bytes=phase, carried_bytes=carried, state_bytes=state)
