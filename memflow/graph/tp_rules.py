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

import operator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import optimization_hint as hint_int

__all__ = ["Split", "NodeSplit", "analyse", "weight_of"]

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
    states: dict[str, Split] = field(default_factory=dict)  # fx name -> state of each split value
    reason: str = ""  # why nothing is split, when nothing is

    @property
    def split(self) -> bool:
        return bool(self.columns or self.embeddings)


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


def _groups(ish: tuple[int, ...], osh: tuple[int, ...]) -> list[tuple[list[int], list[int]]]:
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

    def __init__(self, gm: torch.fx.GraphModule, params: set[str], tp: int, blocked: set[str]):
        self.gm, self.params, self.tp, self.blocked = gm, params, tp, blocked
        self.state: dict[torch.fx.Node, Any] = {}  # Split, or a list of them (a split op's result)
        self.blocks: dict[str, int] = {}  # column linear -> blocks of its output features
        self.columns: list[str] = []
        self.rows: list[str] = []
        self.losses: list[str] = []
        self.embeddings: list[str] = []
        self.uses = {n.name: len(n.users) for n in gm.graph.nodes}
        self.nodes = {n.name: n for n in gm.graph.nodes}
        self.out_in: dict[str, tuple[int, int]] = {}  # column linear -> (out, in) features of its weight

    def _out_in(self, weight: str, layout: str) -> tuple[int, int]:
        sh = _shape(self.nodes[weight]) or (0, 0)
        return (sh[0], sh[-1]) if layout == "oi" else (sh[-1], sh[0])

    def _s(self, a: Any) -> Split | None:
        st = self.state.get(a) if isinstance(a, torch.fx.Node) else None
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
                for a in node.all_input_nodes:
                    if (st := self._s(a)) is not None or isinstance(self.state.get(a), list):
                        o = st.origins if st else frozenset().union(*(s.origins for s in self.state[a] if s))
                        raise _Blocked(o, "a split value leaves the node")
                continue
            if node.op != "call_function":
                continue
            ins = [a for a in node.all_input_nodes if self.state.get(a) is not None]
            if _packet(node) is aten.embedding and not ins and self._embedding(node):
                continue
            w = weight_of(node, self.params)
            if w is not None:
                self._linear(node, w)
                continue
            if not ins:
                continue
            if node.target is operator.getitem:
                lst = self.state.get(node.args[0])
                self.state[node] = lst[node.args[1]] if isinstance(lst, list) else None
                continue
            self.state[node] = self._op(node, [self._s(a) for a in ins], ins)

    # ---- linears
    def _linear(self, node: torch.fx.Node, w: tuple) -> None:
        x, weight, layout, bias = w
        st = self._s(x)
        single = self.uses[weight] == 1 and (bias is None or self.uses[bias] == 1)
        if st is None:
            if node.name in self.blocked or not single:
                return
            self.columns.append(node.name)
            self.state[node] = Split(-1, 0, frozenset([node.name]))
            self.out_in[node.name] = self._out_in(weight, layout)
            return
        st = self._fix(st)
        if st.dim != -1 or st.groups != 1 or not single:
            raise _Blocked(st.origins, f"{node.name} reads a split value it cannot contract")
        self.rows.append(node.name)  # its output is summed over the group: replicated after

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
        if st is None or ish is None or (osh is None and pk not in SPLITS):
            if pk is aten.cat:
                return self._cat(node, sts, origins)
            raise _Blocked(origins, f"{node.name} ({pk}) reads a split value")
        a = len(ish) + st.dim
        if pk in VIEWS:
            return self._view(node, st, ish, osh, a)
        if pk in (aten.transpose, aten.permute, aten.unsqueeze, aten.squeeze, aten.expand, aten.slice,
                  aten.select):
            return self._dims(node, pk, st, ish, osh, a)
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
        for gi, gj in _groups(ish, osh):
            if a not in gi:
                continue
            big_i = [i for i in gi if ish[i] != 1]
            big_j = [j for j in gj if osh[j] != 1]
            if big_i == [a] and len(big_j) == 1 and osh[big_j[0]] == ish[a]:
                return Split(big_j[0] - len(osh), st.groups, st.origins)
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
        r, ro = len(ish), len(osh)
        if pk is aten.transpose:
            d0, d1 = node.args[1] % r, node.args[2] % r
            b = d1 if a == d0 else d0 if a == d1 else a
        elif pk is aten.permute:
            b = [d % r for d in node.args[1]].index(a)
        elif pk is aten.expand:
            b = a + (ro - r)
        elif pk is aten.unsqueeze:
            d = node.args[1] % ro
            b = a + 1 if d <= a else a
        elif pk is aten.squeeze:
            dims = node.args[1] if len(node.args) > 1 else [i for i in range(r) if ish[i] == 1]
            dims = [dims] if isinstance(dims, int) else dims
            dims = [d % r for d in dims if ish[d % r] == 1]
            b = a - sum(1 for d in dims if d < a)
        else:  # slice, select
            d = node.args[1] % r if len(node.args) > 1 else 0
            if d == a:
                raise _Blocked(st.origins, f"{node.name} indexes the split dimension")
            b = a - 1 if pk is aten.select and d < a else a
        return Split(b - ro, st.groups, st.origins)

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
            if self._s(mask) is not None or (sh is not None and len(sh) >= 3 and sh[-3] != 1):
                raise _Blocked(origins, f"{node.name}: an attention mask per head")
        for s in sts:
            self._fix(s)
        return Split(-3, 1, origins)


def _shape_of(v: torch.Tensor) -> tuple[int, ...]:
    return tuple(hint_int(s) if not isinstance(s, int) else s for s in v.shape)


def analyse(gm: torch.fx.GraphModule, params: set[str], tp: int) -> NodeSplit:
    """The Megatron partitioning of a node's graph over ``tp`` ranks (see the module docstring).
    ``params``: the node module's placeholders that are trainable parameters only this node reads."""
    blocked: set[str] = set()
    reason = ""
    while True:
        prop = _Propagation(gm, params, tp, blocked)
        try:
            prop.run()
        except _Blocked as b:
            new = set(b.origins) - blocked
            reason = b.why
            if not new:  # nothing left to give up: should not happen
                return NodeSplit(reason=b.why)
            blocked |= new
            continue
        break
    if not (prop.columns or prop.embeddings):
        return NodeSplit(reason=reason or "no linear layer with a replicated input")
    out = NodeSplit(columns=list(prop.columns), rows=list(prop.rows), losses=list(prop.losses),
                    embeddings=list(prop.embeddings))
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
    out.states = {n.name: s for n, s in prop.state.items() if isinstance(s, Split)}
    return out
