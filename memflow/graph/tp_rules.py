"""Which ops of a captured node can run split across a tensor-parallel group, found on its graph.

Megatron's scheme, derived from the node's own ops rather than from a table of
module classes: a linear whose weight is a parameter and whose input is the
same on every rank (*replicated*) can be *column*-split (each rank computes a
slice of its output features); that slice flows, still split, through the ops
that act on each slice alone (elementwise ops, views that keep the split
dimension whole or cut it into heads, transposes, attention over heads,
splits of a fused projection into q/k/v) until it reaches a linear whose
weight is a parameter and that contracts the split dimension: that one is
*row*-split (each rank multiplies its slice by its rows of the weight) and its
partial output is summed over the group (an all-reduce) before anything else
reads it. A split value that would reach an op outside these rules (a norm, a
reduction, the node's output) makes every column-split linear it came from
replicated again, and the analysis starts over without them: unknown ops stay
replicated, correctly.

Two more of Megatron's splits end a region without a row-split linear: a
cross-entropy loss over a column-split output layer's logits (each rank holds
its share of the vocabulary; the loss is computed from the group's maximum,
sum of exponentials and target logits, :class:`memflow.graph.tp.TPCrossEntropy`),
and an embedding table read by one lookup, split by rows of the vocabulary
(each rank looks up the ids in its range, the group sums the lookups).

The state of a value is ``None`` (replicated) or a :class:`Split`: the split
dimension counted from the end (broadcasting aligns shapes there), the number
of equal blocks that dimension is made of, each split alone (a fused QKV
projection's output is three blocks: every rank holds its heads of q, of k and
of v; 0 while not yet known), and the column-split linears it came from.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
try:
    from torch.fx.experimental.symbolic_shapes import optimization_hint as hint_int
except ImportError:  # torch < 2.13 (the GPU machines' 2.11)
    from torch.fx.experimental.symbolic_shapes import hint_int

from .sp_rules import Seq, moved_dim, seq_op

__all__ = ["Split", "Seq", "NodeSplit", "analyse", "weight_of", "view_groups"]

aten = torch.ops.aten

ELEMENTWISE = {
    aten.add, aten.sub, aten.mul, aten.div, aten.pow, aten.tanh, aten.gelu, aten.silu, aten.relu,
    aten.sigmoid, aten.neg, aten.exp, aten.rsqrt, aten.sqrt, aten.dropout, aten.clone, aten.contiguous,
    aten.alias, aten.detach, aten.to, aten._to_copy, aten.type_as, aten.where, aten.erf, aten.log,
    aten.abs, aten.reciprocal, aten.square, aten.masked_fill, aten.hardtanh, aten.leaky_relu, aten.mish,
}
VIEWS = {aten.view, aten.reshape, aten._unsafe_view}
SOFTMAX = {aten.softmax, aten._softmax, aten.log_softmax, aten._log_softmax}
SPLITS = {aten.split, aten.split_with_sizes, aten.chunk}
DIMS = {aten.transpose, aten.permute, aten.unsqueeze, aten.squeeze, aten.expand, aten.slice, aten.select}
IGNORED = {aten._assert_tensor_metadata}  # checks, no output
LINEARS = {aten.linear, aten.addmm, aten.mm, aten.matmul}


@dataclass(frozen=True)
class Split:
    dim: int  # negative: counted from the end
    groups: int  # equal blocks along dim, each split alone; 0: not yet known
    origins: frozenset  # names of the column-split linears it came from


@dataclass
class NodeSplit:
    """A node's partitioning: which linears are column- and row-split, how each sharded parameter
    is cut (node-module placeholder name -> (dim, blocks)), and the new shape arguments."""

    columns: list[str] = field(default_factory=list)
    rows: list[str] = field(default_factory=list)
    losses: list[str] = field(default_factory=list)  # cross-entropy over vocabulary-split logits
    embeddings: list[str] = field(default_factory=list)  # lookups in vocabulary-split tables
    shards: dict[str, tuple[int, int]] = field(default_factory=dict)
    states: dict[str, Any] = field(default_factory=dict)  # fx name -> state (Split or Seq) of each split value
    reason: str = ""  # why nothing is split, when nothing is
    # sequence parallelism (memflow.graph.sp_rules): value -> (dim, outer) of every token-split value's
    # layout at the collectives; the ops (by name) each gather or scatter feeds
    entry: dict[str, tuple[int, int]] = field(default_factory=dict)  # inputs split at the node's entry
    gathers: dict[str, tuple[int, int, tuple[str, ...]]] = field(default_factory=dict)  # made whole for ops
    enter_gathers: dict[str, tuple[int, int]] = field(default_factory=dict)  # made whole for column linears
    scatters: dict[tuple[str, int, int], tuple[str, ...]] = field(default_factory=dict)  # (whole, dim, outer): ops
    partials: dict[str, tuple[str, ...]] = field(default_factory=dict)  # whole, read by ops on split tokens
    rs: dict[str, tuple[int, int]] = field(default_factory=dict)  # row linears reduce-scattered
    out_seq: dict[int | None, tuple[int, int]] = field(default_factory=dict)  # output position -> layout

    @property
    def split(self) -> bool:
        return bool(self.columns or self.embeddings)

    @property
    def seq(self) -> bool:
        return bool(self.entry or self.gathers or self.enter_gathers or self.out_seq)


class _Blocked(Exception):
    def __init__(self, origins: frozenset, why: str):
        super().__init__(why)
        self.origins, self.why = origins, why


def _packet(node: torch.fx.Node) -> Any:
    return getattr(node.target, "overloadpacket", None) if node.op == "call_function" else None


def _shape(node: Any) -> tuple[int, ...] | None:
    v = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if not isinstance(v, torch.Tensor):
        return None
    return tuple(hint_int(s) if not isinstance(s, int) else s for s in v.shape)


def weight_of(node: torch.fx.Node, params: set[str]) -> tuple[Any, str, str, str | None] | None:
    """(input, weight placeholder, layout, bias placeholder) of a linear whose weight is a parameter:
    layout ``"oi"`` for a weight of shape [out, in] (``linear``, or ``mm``/``addmm`` of its ``t``),
    ``"io"`` for [in, out] (``mm``/``addmm`` of the parameter itself, as HF's Conv1D)."""
    pk = _packet(node)

    def param(n: Any) -> tuple[str, str] | None:
        if isinstance(n, torch.fx.Node) and n.op == "placeholder" and n.name in params:
            return n.name, "io"
        if (isinstance(n, torch.fx.Node) and _packet(n) in (aten.t, aten.transpose) and n.args
                and isinstance(n.args[0], torch.fx.Node) and n.args[0].name in params and len(n.users) == 1):
            return n.args[0].name, "oi"
        return None

    def bias(n: Any) -> str | None:
        return n.name if isinstance(n, torch.fx.Node) and n.op == "placeholder" and n.name in params else None

    if pk is aten.linear and isinstance(node.args[1], torch.fx.Node) and node.args[1].name in params:
        b = node.args[2] if len(node.args) > 2 else None
        if b is not None and bias(b) is None:
            return None
        return node.args[0], node.args[1].name, "oi", bias(b)
    if pk in (aten.mm, aten.matmul) and (w := param(node.args[1])):
        return node.args[0], w[0], w[1], None
    if pk is aten.addmm and (w := param(node.args[2])) and bias(node.args[0]):
        return node.args[1], w[0], w[1], bias(node.args[0])
    return None


def view_groups(ish: tuple[int, ...], osh: tuple[int, ...]) -> list[tuple[list[int], list[int]]]:
    """The dims of a view's input and output that hold the same elements, in order (size-1 dims
    join the group after them)."""
    out, i, j = [], 0, 0
    while i < len(ish) or j < len(osh):
        gi, gj, pi, pj = [], [], 1, 1
        while True:
            if pi <= pj and i < len(ish):
                gi.append(i)
                pi *= ish[i]
                i += 1
            elif j < len(osh):
                gj.append(j)
                pj *= osh[j]
                j += 1
            else:
                break
            if pi == pj and (i == len(ish) or ish[i] != 1) and (j == len(osh) or osh[j] != 1):
                break
        out.append((gi, gj))
    return out


class _Propagation:
    """One pass over a node's ops with a set of linears allowed to be column-split."""

    def __init__(self, gm: torch.fx.GraphModule, params: set[str], tp: int, blocked: set[str],
                 seq_in: dict[str, tuple[int, int]] | None = None, entry: set[str] | None = None,
                 columns: bool = True):
        self.gm, self.params, self.tp, self.blocked = gm, params, tp, blocked
        self.state: dict[torch.fx.Node, Any] = {}  # Split, Seq, or a list of them (a split op's result)
        self.blocks: dict[str, int] = {}  # column linear -> blocks of its output features
        self.columns: list[str] = []
        self.rows: list[str] = []
        self.losses: list[str] = []
        self.embeddings: list[str] = []
        self.uses = {n.name: len(n.users) for n in gm.graph.nodes}
        self.nodes = {n.name: n for n in gm.graph.nodes}
        self.out_in: dict[str, tuple[int, int]] = {}  # column linear -> (out, in) features of its weight
        self.allow_columns = columns
        # sequence parallelism: inputs that arrive token-split and those split at the entry
        self.whole: set = set()  # values the current op reads whole (gathered for it)
        self.entry: dict[str, tuple[int, int]] = {}
        self.gathers: dict[str, tuple[int, int, list[str]]] = {}
        self.enter_gathers: dict[str, tuple[int, int]] = {}
        self.scatters: dict[tuple[str, int, int], list[str]] = {}
        self.partials: dict[str, list[str]] = {}
        self.rs: dict[str, tuple[int, int]] = {}
        self.out_seq: dict[int | None, tuple[int, int]] = {}
        self.canon: tuple[tuple[int, ...], int, int] | None = None  # (global shape, dim, outer) of the tokens
        seq_in = seq_in or {}
        out = next(m for m in gm.graph.nodes if m.op == "output").args[0]
        self.out_shapes = {_shape(o) for o in (out if isinstance(out, (tuple, list)) else [out])
                           if isinstance(o, torch.fx.Node)}
        for n in gm.graph.nodes:
            if n.op != "placeholder":
                continue
            sh = _shape(n)
            if n.name in seq_in:
                d, o = seq_in[n.name]
                self.state[n] = Seq(d, o, frozenset([f"arr:{n.name}"]))
            elif n.name in (entry or ()) and f"in:{n.name}" not in blocked and self._entry_ok(n, sh):
                self.entry[n.name] = (-2, 1)
                self.state[n] = Seq(-2, 1, frozenset([f"in:{n.name}"]))
            else:
                continue
            if self.canon is None and sh is not None:
                self.canon = (sh, self.state[n].dim, self.state[n].outer)

    def _entry_ok(self, n: torch.fx.Node, sh: tuple | None) -> bool:
        """An activation worth splitting at the entry: floating, the shape of one of the node's
        outputs (the residual stream a block reads and writes), tokens divisible by the group."""
        v = n.meta.get("val")
        if sh is None or len(sh) < 2 or not v.is_floating_point() or sh[-2] < 2 or sh[-2] % self.tp:
            return False
        return sh in self.out_shapes

    def _out_in(self, weight: str, layout: str) -> tuple[int, int]:
        sh = _shape(self.nodes[weight]) or (0, 0)
        return (sh[0], sh[-1]) if layout == "oi" else (sh[-1], sh[0])

    def _st(self, a: Any) -> Any:
        return None if not isinstance(a, torch.fx.Node) or a in self.whole else self.state.get(a)

    def _s(self, a: Any) -> Split | None:
        st = self._st(a)
        return st if isinstance(st, Split) else None

    def _set_blocks(self, st: Split, k: int) -> None:
        for o in st.origins:
            if self.blocks.get(o, k) != k:
                raise _Blocked(st.origins, f"{o}'s output is split into {k} and {self.blocks[o]} blocks")
            self.blocks[o] = k

    def _fix(self, st: Split) -> Split:
        """A split value read as one block (its blocks become known: one)."""
        if st.groups == 0:
            self._set_blocks(st, 1)
            return Split(st.dim, 1, st.origins)
        return st

    def run(self) -> None:
        for node in self.gm.graph.nodes:
            if node.op == "output":
                out = node.args[0]
                items = list(enumerate(out)) if isinstance(out, (tuple, list)) else [(None, out)]
                for i, a in items:
                    st = self._st(a)
                    if isinstance(st, Seq):
                        self.out_seq[i] = (st.dim, st.outer)
                    elif isinstance(st, Split) or isinstance(st, list):
                        o = st.origins if isinstance(st, Split) else frozenset().union(
                            *(s.origins for s in st if isinstance(s, Split)))
                        raise _Blocked(o, "a split value leaves the node")
                continue
            if node.op != "call_function":
                continue
            self.whole = set()
            if any(isinstance(self.state.get(a), Seq) for a in node.all_input_nodes) and self._seq(node):
                continue
            ins = [a for a in node.all_input_nodes if self._st(a) is not None]
            if _packet(node) is aten.embedding and not ins and self._embedding(node):
                continue
            w = weight_of(node, self.params)
            if w is not None:
                self._linear(node, w)
                continue
            if not ins:
                continue
            if node.target is operator.getitem:
                lst = self._st(node.args[0])
                self.state[node] = lst[node.args[1]] if isinstance(lst, list) else None
                continue
            self.state[node] = self._op(node, [self._s(a) for a in ins], ins)

    # ---- sequence parallelism
    def _seq(self, node: torch.fx.Node) -> bool:
        """Token-split inputs: True when the op carried the split on (its state is set); else the
        inputs it needs whole are gathered for it (``self.whole``) and the caller goes on."""
        pk = _packet(node)
        if node.target is operator.getitem:
            return False
        if pk in IGNORED:
            return True
        w = weight_of(node, self.params)
        if w is not None:
            x = w[0]
            st = self.state.get(x)
            if isinstance(st, Seq) and self._column_ok(node, w):
                self.enter_gathers[x.name] = (st.dim, st.outer)
                self.whole.add(x)
            for a in node.all_input_nodes:
                if isinstance(self.state.get(a), Seq) and a not in self.whole:
                    self._gather(a, node)
            return False
        res, scatter, partial = seq_op(node, pk, self.state.get, _shape, VIEWS, DIMS, SOFTMAX, SPLITS,
                                       ELEMENTWISE, view_groups, self.tp)
        if res is not None:
            st = res[0] if isinstance(res, list) else res
            for a in scatter:
                self.scatters.setdefault((a.name, st.dim, st.outer), []).append(node.name)
            for a in partial:
                self.partials.setdefault(a.name, []).append(node.name)
            self.state[node] = res
            return True
        for a in node.all_input_nodes:
            if isinstance(self.state.get(a), Seq):
                self._gather(a, node)
        return False

    def _gather(self, a: torch.fx.Node, node: torch.fx.Node) -> None:
        st = self.state[a]
        lost = frozenset(o for o in st.origins if not o.startswith("arr:"))
        if lost:  # a split this node made, undone at once: not worth its collectives
            raise _Blocked(lost, f"{node.name} reads the tokens of {a.name} whole")
        self.gathers.setdefault(a.name, (st.dim, st.outer, []))[2].append(node.name)
        self.whole.add(a)

    def _column_ok(self, node: torch.fx.Node, w: tuple) -> bool:
        _, weight, _, bias = w
        single = self.uses[weight] == 1 and (bias is None or self.uses[bias] == 1)
        return self.allow_columns and node.name not in self.blocked and single

    def _rs_layout(self, osh: tuple | None) -> tuple[int, int] | None:
        """The token split of a row-split linear's output [tokens..., features] (None: all-reduced)."""
        if self.canon is None or osh is None:
            return None
        sh, d, o = self.canon
        if tuple(osh[:-1]) == tuple(sh[:-1]):
            return d, o
        if d == -2 and len(osh) == 2 and osh[0] == math.prod(sh[:-1]):
            return -2, o * math.prod(sh[:-2])
        return None

    # ---- linears
    def _linear(self, node: torch.fx.Node, w: tuple) -> None:
        x, weight, layout, bias = w
        st = self._s(x)
        single = self.uses[weight] == 1 and (bias is None or self.uses[bias] == 1)
        if st is None:
            if not self._column_ok(node, w):
                return
            self.columns.append(node.name)
            self.state[node] = Split(-1, 0, frozenset([node.name]))
            self.out_in[node.name] = self._out_in(weight, layout)
            return
        st = self._fix(st)
        if st.dim != -1 or st.groups != 1 or not single:
            raise _Blocked(st.origins, f"{node.name} reads a split value it cannot contract")
        self.rows.append(node.name)  # its output is summed over the group: replicated after
        lay = self._rs_layout(_shape(node)) if f"rs:{node.name}" not in self.blocked else None
        if lay is not None:  # ... or summed and split by tokens (sequence parallelism)
            self.rs[node.name] = lay
            self.state[node] = Seq(lay[0], lay[1], frozenset([f"rs:{node.name}"]))

    def _embedding(self, node: torch.fx.Node) -> bool:
        """A lookup in a vocabulary-sized table (at least four rows per column: not a table of
        positions or token types, whose lookups cost an all-reduce and save little) only it reads,
        split by rows (its output replicated)."""
        w = node.args[0]
        sh = _shape(w)
        if (not isinstance(w, torch.fx.Node) or w.name not in self.params or self.uses[w.name] != 1
                or node.name in self.blocked or sh is None or len(sh) != 2 or sh[0] < 4 * sh[1] or sh[0] % self.tp
                or any(bool(a) for a in node.args[3:])):  # (scale_grad_by_freq, sparse)
            return False
        self.embeddings.append(node.name)
        return True

    def _loss(self, node: torch.fx.Node, st: Split, ish: tuple) -> None:
        """Cross-entropy over logits split by class: the vocabulary-parallel loss, replicated after."""
        args = list(node.args) + [None, 1, -100, 0.0][len(node.args) - 2:]
        weight, reduction, _, smoothing = args[2:6]
        weight = node.kwargs.get("weight", weight)
        reduction = node.kwargs.get("reduction", reduction)
        smoothing = node.kwargs.get("label_smoothing", smoothing)
        st = self._fix(st)
        if (len(ish) != 2 or st.dim != -1 or st.groups != 1 or self._s(node.args[1]) is not None
                or weight is not None or reduction not in (1, 2) or smoothing):
            raise _Blocked(st.origins, f"{node.name}: a loss over split logits it cannot split")
        small = [o for o in st.origins if self.out_in[o][0] < 4 * self.out_in[o][1]]
        if small:  # a classifier's few classes: not worth the group's three all-reduces
            raise _Blocked(frozenset(small), f"{node.name}: a loss over a few classes")
        self.losses.append(node.name)

    # ---- everything else
    def _op(self, node: torch.fx.Node, sts: list, ins: list) -> Any:
        pk = _packet(node)
        origins = frozenset().union(*(s.origins for s in sts if s is not None))
        osh = _shape(node)
        if pk in IGNORED:
            return None
        if pk in ELEMENTWISE:
            return self._elementwise(node, sts, ins, origins, osh)
        st = sts[0]
        x = node.args[0]
        ish = _shape(x) if isinstance(x, torch.fx.Node) else None
        if st is None or ish is None or (osh is None and pk not in SPLITS and pk is not aten.unbind):
            if pk is aten.cat:
                return self._cat(node, sts, origins)
            raise _Blocked(origins, f"{node.name} ({pk}) reads a split value")
        a = len(ish) + st.dim
        if pk in VIEWS:
            return self._view(node, st, ish, osh, a)
        if pk in DIMS:
            return self._dims(node, pk, st, ish, osh, a)
        if pk is aten.unbind:  # (q, k, v) taken apart along another dimension than the split one
            d = (node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)) % len(ish)
            if d == a:
                raise _Blocked(origins, f"{node.name} takes the split dimension apart")
            vals = node.meta.get("val")
            return [Split(st.dim + (1 if d > a else 0), st.groups, st.origins)] * len(vals)
        if pk in SOFTMAX or pk in SPLITS:
            dim = node.args[1] if pk in SOFTMAX else (node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0))
            d = dim % len(ish)
            if pk in SOFTMAX:
                if d == a:
                    raise _Blocked(origins, f"{node.name}: softmax over the split dimension")
                return st
            return self._split(node, pk, st, ish, a, d)
        if pk is aten.cat:
            return self._cat(node, sts, origins)
        if pk is aten.scaled_dot_product_attention:
            return self._attention(node, origins)
        if pk is aten.cross_entropy_loss:
            self._loss(node, st, ish)
            return None
        if pk in (aten.matmul, aten.bmm):
            s2 = self._s(node.args[1])
            if s2 is None or st.dim != s2.dim or st.dim > -3:
                raise _Blocked(origins, f"{node.name}: a product over the split dimension")
            return Split(st.dim, self._fix(st).groups, origins)
        raise _Blocked(origins, f"{node.name} ({pk}) reads a split value")

    def _elementwise(self, node, sts, ins, origins, osh):
        split = [s for s in sts if s is not None]
        if len({(s.dim, s.groups) for s in split}) > 1:
            raise _Blocked(origins, f"{node.name} combines values split differently")
        st = split[0]
        for a in node.all_input_nodes:
            if self._s(a) is None:
                sh = _shape(a)
                if sh is not None and len(sh) >= -st.dim and sh[st.dim] != 1:
                    raise _Blocked(origins, f"{node.name} combines a split value with a whole one")
        if osh is None:
            return None
        return Split(st.dim, st.groups, origins)

    def _view(self, node, st, ish, osh, a):
        for gi, gj in view_groups(ish, osh):
            if a not in gi:
                continue
            big_i = [i for i in gi if ish[i] != 1]
            big_j = [j for j in gj if osh[j] != 1]
            if big_i == [a] and len(big_j) == 1 and osh[big_j[0]] == ish[a]:
                return Split(big_j[0] - len(osh), st.groups, st.origins)
            if (big_i == [a] and len(big_j) >= 3 and st.groups in (0, osh[big_j[0]]) and osh[big_j[0]] > 1
                    and osh[big_j[1]] % self.tp == 0):  # a fused projection cut into (q/k/v, heads, head dim)
                self._set_blocks(st, osh[big_j[0]])
                return Split(big_j[1] - len(osh), 1, st.origins)
            st = self._fix(st)
            if st.groups != 1:
                break
            if big_i == [a] and big_j and osh[big_j[0]] % self.tp == 0:  # cut into (heads, head dim)
                return Split(big_j[0] - len(osh), 1, st.origins)
            if big_i and big_i[0] == a and len(big_j) == 1:  # (heads, head dim) merged
                return Split(big_j[0] - len(osh), 1, st.origins)
            break
        raise _Blocked(st.origins, f"{node.name}: a view that moves the split dimension")

    def _dims(self, node, pk, st, ish, osh, a):
        b = moved_dim(node, pk, a, ish, osh)
        if b is None:
            raise _Blocked(st.origins, f"{node.name} indexes the split dimension")
        return Split(b - len(osh), st.groups, st.origins)

    def _split(self, node, pk, st, ish, a, d):
        vals = node.meta.get("val")
        k = len(vals) if isinstance(vals, (list, tuple)) else 0
        if d != a:
            return [Split(st.dim, st.groups, st.origins)] * k
        sizes = {tuple(_shape_of(v))[d] for v in vals}
        if len(sizes) != 1 or st.groups not in (0, k) or next(iter(sizes)) % self.tp:
            raise _Blocked(st.origins, f"{node.name} cuts the split dimension unevenly")
        self._set_blocks(st, k)
        return [Split(st.dim, 1, st.origins)] * k

    def _cat(self, node, sts, origins):
        ts = node.args[0]
        dim = node.args[1] if len(node.args) > 1 else 0
        ss = [self._s(t) for t in ts]
        if any(s is None for s in ss) or len({(s.dim, s.groups) for s in ss}) != 1:
            raise _Blocked(origins, f"{node.name} joins split and whole values")
        sh = _shape(node)
        if sh is None or dim % len(sh) == len(sh) + ss[0].dim:
            raise _Blocked(origins, f"{node.name} joins along the split dimension")
        return Split(ss[0].dim, ss[0].groups, origins)

    def _attention(self, node, origins):
        q, k, v = node.args[:3]
        sts = [self._s(t) for t in (q, k, v)]
        if any(s is None or s.dim != -3 for s in sts):
            raise _Blocked(origins, f"{node.name}: attention not split by heads")
        mask = node.args[3] if len(node.args) > 3 else node.kwargs.get("attn_mask")
        if isinstance(mask, torch.fx.Node):
            sh = _shape(mask)
            heads = _shape(q)
            if self._s(mask) is not None:
                raise _Blocked(origins, f"{node.name}: an attention mask split")
            if sh is not None and len(sh) >= 3 and sh[-3] != 1:
                if heads is None or sh[-3] != heads[-3] or sh[-3] % self.tp:
                    raise _Blocked(origins, f"{node.name}: an attention mask per head")
                # a bias per head (T5's relative positions): each rank takes its heads' part of it (its
                # gradient all-gathered back), as a whole operand split along the heads
                self.scatters.setdefault((mask.name, -3, 1), []).append(node.name)
        for s in sts:
            self._fix(s)
        return Split(-3, 1, origins)


def _shape_of(v: torch.Tensor) -> tuple[int, ...]:
    return tuple(hint_int(s) if not isinstance(s, int) else s for s in v.shape)


def analyse(gm: torch.fx.GraphModule, params: set[str], tp: int, seq_in: dict[str, tuple[int, int]] | None = None,
            entry: set[str] | None = None, columns: bool = True) -> NodeSplit:
    """The Megatron partitioning of a node's graph over ``tp`` ranks (see the module docstring).
    ``params``: the node module's placeholders that are trainable parameters only this node reads.
    Sequence parallelism (:mod:`memflow.graph.sp_rules`): ``seq_in`` names the inputs that arrive
    token-split (placeholder -> (dim, outer)), ``entry`` the activations that may be split at the
    node's entry; ``columns`` False: no linear is column-split (tokens only)."""
    blocked: set[str] = set()
    reason = ""
    while True:
        prop = _Propagation(gm, params, tp, blocked, seq_in, entry, columns)
        try:
            prop.run()
        except _Blocked as b:
            new = set(b.origins) - blocked
            reason = b.why
            if not new:  # nothing left to give up: should not happen
                return _gathered(gm, seq_in, b.why)
            blocked |= new
            continue
        break
    out = NodeSplit(columns=list(prop.columns), rows=list(prop.rows), losses=list(prop.losses),
                    embeddings=list(prop.embeddings), entry=dict(prop.entry),
                    gathers={k: (d, o, tuple(u)) for k, (d, o, u) in prop.gathers.items()},
                    enter_gathers=dict(prop.enter_gathers),
                    scatters={k: tuple(u) for k, u in prop.scatters.items()},
                    partials={k: tuple(u) for k, u in prop.partials.items()}, rs=dict(prop.rs),
                    out_seq=dict(prop.out_seq))
    if not (out.split or out.seq):
        return NodeSplit(reason=reason or "no linear layer with a replicated input")
    by_name = {n.name: n for n in gm.graph.nodes}
    for name in prop.columns:
        _, weight, layout, bias = weight_of(by_name[name], params)
        g = prop.blocks.get(name, 1)
        out.shards[weight] = (0 if layout == "oi" else 1, g)
        if bias:
            out.shards[bias] = (0, g)
    for name in prop.rows:
        _, weight, layout, _ = weight_of(by_name[name], params)
        out.shards[weight] = (1 if layout == "oi" else 0, 1)
    for name in prop.embeddings:
        out.shards[by_name[name].args[0].name] = (0, 1)
    out.states = {n.name: s for n, s in prop.state.items() if isinstance(s, (Split, Seq))}
    return out


def _gathered(gm: torch.fx.GraphModule, seq_in: dict[str, tuple[int, int]] | None, why: str) -> NodeSplit:
    """Nothing split: the inputs that arrive token-split are gathered at the entry."""
    out = NodeSplit(reason=why)
    for n in gm.graph.nodes:
        if n.op == "placeholder" and n.name in (seq_in or {}):
            d, o = seq_in[n.name]
            out.gathers[n.name] = (d, o, tuple(u.name for u in n.users))
    return out
