"""Capture a model's training step and cut it into task-graph nodes.

The user's unmodified model is wrapped with its loss (``LossModule``) and
captured with ``torch.export`` (non-strict; HF models need ``use_cache=False``,
which the examples set). The exported forward graph keeps each aten op's
``nn_module_stack``; ops are grouped into *nodes* at module granularity:

* ``granularity="auto"`` (default): the repeated blocks (children of one
  container that share a class, e.g. ``transformer.h.0 .. h.11``) and the
  modules between them (``wte``, ``ln_f``, ``lm_head``, ...). A module that
  contains blocks is opened up; any other module is one node.
* ``granularity=d`` (an int): modules ``d`` levels below the model root.

Ops that sit directly in an opened module (glue: reshapes, masks, the loss)
join the node that follows them, or the last node at the end. Nodes are
maximal contiguous runs of one module in execution order, so a pipeline split
point can sit before any node and ``checkpoint``/offload hooks wrap any node.
The graph is then split with ``torch.fx.passes.split_module`` into one
``GraphModule`` per node (see :mod:`memflow.graph.program`), which both the
profiler and the executor run.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch.distributions import Distribution
from torch.fx.passes.split_module import split_module

from ..errors import CaptureError, ModelLoadError
from ..memory import storages
from .autograd_fns import kept_functions
from . import fake_kernels  # noqa: F401 - registers fake kernels torch lacks (F.ctc_loss)
from .diagnose import explain, quiet_capture, routed_sizes, sparse_gradients, value_sized
from ..model_file import LossModule, flatten
from .inplace import out_of_place

__all__ = ["Captured", "export_step", "group_fx_nodes", "split_step", "block_paths", "unread_state"]

ROOT = "model"  # LossModule registers the user's model as attribute `model`


@dataclass
class Captured:
    """An exported step cut into nodes."""

    split: torch.fx.GraphModule  # top graph calling submod_0 .. submod_{n-1}
    names: list[str]  # node names in execution order
    module_paths: list[str]  # module each node stands for (relative to the model)
    op_counts: list[int]
    flat_inputs: list[torch.Tensor]  # the batch as flat tensors (placeholders)
    treespec: Any
    symbolic_batch: bool = False  # exported with a symbolic batch dimension (runs at any batch size >= 2)
    # the model's parameters and buffers the step never reads, (name, owner node, tensor): model state
    # all the same (see unread_state)
    unread: list = field(default_factory=list)
    # plain attributes the forward set to tensors (``self.mem = h.detach()``) or whose flag or counter it
    # changed, as ``path.attr``: state carried to the next call, which the captured step never updates
    # (see _assignments)
    carried: list = field(default_factory=list)
    # modules that size tensors by numbers read from tensors (``.tolist()``: a mixture of experts' per-expert
    # token counts), see memflow.graph.diagnose.routed_sizes: measured at the profiled batch's sizes
    routed: list = field(default_factory=list)


_ASSERT_META = torch.ops.aten._assert_tensor_metadata.default


def assert_meta(t: Any, *args: Any, dtype: Any = None, **kw: Any) -> None:
    """The export's check at a ``.to()`` of its input's dtype, device and layout, but a floating dtype
    autocast decides: the step is exported under the CPU's autocast and also run under CUDA's rules
    (:func:`memflow.graph.training.gpu_semantics`), where an op such as ``norm`` gives fp32 that the CPU
    gives in bf16 (HF's CLIP: ``image_embeds.t().to(device)`` checked for bf16). Still the aten op, so
    what watches the ops (:mod:`memflow.graph.casts`) sees it as before."""
    if (dtype is not None and isinstance(t, torch.Tensor) and t.dtype != dtype and t.dtype.is_floating_point
            and dtype.is_floating_point):
        dtype = t.dtype
    return _ASSERT_META(t, *args, dtype=dtype, **kw)


assert_meta.overloadpacket = _ASSERT_META.overloadpacket  # (what walks the graph by op takes it as the check)


def _strip_guards(gm: torch.fx.GraphModule) -> None:
    for node in list(gm.graph.nodes):
        if node.op == "call_module" and str(node.target).startswith("_guards"):
            gm.graph.erase_node(node)
        elif node.op == "call_function" and node.target is _ASSERT_META:
            node.target = assert_meta
    for name, _ in list(gm.named_children()):
        if name.startswith("_guards"):
            delattr(gm, name)
    gm.graph.lint()
    gm.recompile()


def export_step(spec: Any, model: torch.nn.Module, batch: Any,
                batch_dims: list[bool] | None = None) -> tuple[torch.fx.GraphModule, list, Any]:
    """Export ``LossModule(spec, model)`` on ``batch``; returns (graph module, flat inputs, treespec).

    ``batch_dims``: per flat input, whether its leading dimension is the batch
    dimension; given, that dimension is exported as one symbolic size (at least
    2), so the program runs at any batch size >= 2 (see :func:`size_nodes`)."""
    why = sparse_gradients(spec, model)
    if why:
        raise CaptureError(why)
    flat, treespec = flatten(batch)
    wrapper = LossModule(spec, model, treespec)
    dynamic = None
    if batch_dims is not None:
        dim = torch.export.Dim("batch", min=2, max=2**31 - 2)
        dynamic = (tuple({0: dim} if b else None for b in batch_dims),)  # forward(*flat_tensors)
    try:
        carried: set = set()
        with quiet_capture(), _lean_fx(), kept_functions(), _casts_in_forward(), _assignments(model, carried), \
                _unchecked_distributions(), _no_grad_in_forward(spec):
            ep = torch.export.export(wrapper, tuple(flat), dynamic_shapes=dynamic, strict=False)
            gm = ep.module()
            _strip_guards(gm)
    except ModelLoadError as e:  # the model file's own contract, checked again inside the trace: its line
        raise CaptureError(str(e)) from None
    except Exception as e:  # noqa: BLE001 - any export failure is a capture error
        raise CaptureError(explain(spec, model, e)) from None
    gm.meta["memflow_carried"] = sorted(carried)
    why = value_sized(spec, model, gm, _module_path)
    if why:
        raise CaptureError(why)
    gm.meta["memflow_routed"] = routed_sizes(gm, _module_path)
    return gm, list(flat), treespec


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def _changes_scalar(mod: torch.nn.Module, name: str, value: Any) -> bool:
    """A flag flipped or a counter advanced (``self.initialized = True``, ``self.calls += 1``): the
    program is traced with the value it had, and bakes it in. Only a call's first set of it counts (HF's
    Funnel sets ``pooling_mult = 1`` at the start of every forward, then doubles it: the call's own work),
    and not any number set anew (HF's Swin sets ``shift_size`` from the input's size, the same each call)."""
    old = mod.__dict__.get(name)
    if name == "training" or type(old) is not type(value):
        return False
    return (isinstance(value, bool) and value != old) or (type(value) is int and value == old + 1)


def _holds_tensors(v: Any) -> bool:
    return isinstance(v, torch.Tensor) or (isinstance(v, (tuple, list)) and any(_holds_tensors(x) for x in v))


@contextlib.contextmanager
def _assignments(model: torch.nn.Module, out: set):
    """Adds to ``out`` each plain attribute of ``model``'s modules that code sets to tensors (or a tuple /
    list holding some), or whose flag it flips or counter it advances, meanwhile, as ``path.attr``: state
    a forward keeps for its next call (``self.hidden = (h.detach(), c.detach())``; Glow's ActNorm
    initialising itself from the first batch, ``self.initialized = True``: the program traced before the
    flag was set initialises every step), unless its first set in the call is to None (then what the last
    call left is let go unread: HF RecurrentGemma's recurrent state). Parameters, buffers, submodules and
    private names (torch's own:
    an LSTM's ``_flat_weights``) aside, and what torch's own code sets (the old hook-based ``weight_norm``
    / ``spectral_norm`` set ``module.weight`` before every forward: made, not carried). torch.export puts
    such attributes back after it and warns of tensors alone, not of a tuple set where None stood."""
    paths = {id(m): p for p, m in model.named_modules()}
    plain = torch.nn.Module.__setattr__
    seen: set = set()  # (module, attribute) set already in this capture: later sets are the call's own work
    reset: set = set()  # ... set to None first: what a last call left there is let go unread (HF RecurrentGemma)

    def setattr_(self: torch.nn.Module, name: str, value: Any) -> None:
        p = paths.get(id(self))
        if p is not None and not name.startswith("_") and name not in self._parameters and name not in self._buffers:
            first = (id(self), name) not in seen
            seen.add((id(self), name))
            if first and value is None:
                reset.add((id(self), name))
            if ((id(self), name) not in reset
                    and (_holds_tensors(value) or (first and _changes_scalar(self, name, value)))
                    and not sys._getframe(1).f_code.co_filename.startswith(_TORCH_DIR)):
                out.add(f"{p}.{name}" if p else name)
        plain(self, name, value)

    torch.nn.Module.__setattr__ = setattr_
    try:
        yield
    finally:
        torch.nn.Module.__setattr__ = plain


@contextlib.contextmanager
def _unchecked_distributions():
    """torch.distributions checks its arguments by default (``Normal(mu, sigma)``: ``if not
    constraint.check(sigma).all(): raise``), a branch on values torch.export cannot capture: every VAE
    written with ``rsample`` / ``kl_divergence`` was refused. The check changes no result; while a step
    is exported it is off (as ``Distribution.set_default_validate_args(False)``), and a non-finite loss
    still stops the run. A distribution built with ``validate_args=True`` keeps its check (and its line)."""
    before = Distribution._validate_args
    Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        Distribution.set_default_validate_args(before)


@contextlib.contextmanager
def _no_grad_in_forward(spec: Any):
    """A forward that takes a gradient itself (``torch.autograd.grad(..., create_graph=True)``: WGAN-GP's
    gradient penalty, a double backward) is a backward inside the step, which a captured forward and its
    backward cannot hold: exported on real tensors it failed as a tensor made outside torch's ops (with a
    hint about ``.data`` that did not apply), on fake tensors it was captured without the inner backward's
    memory. While a step is exported, such a call from the model's code is its own one-line error."""
    orig = torch.autograd.grad

    def grad(*args, **kwargs):
        caller = sys._getframe(1)
        path = caller.f_code.co_filename
        if not path.startswith(_TORCH_DIR):
            raise ModelLoadError(
                f"{getattr(spec, 'path', 'model')}: the model's forward calls torch.autograd.grad at "
                f"{os.path.basename(path)}:{caller.f_lineno} (a gradient inside the step: a gradient penalty, a "
                "double backward); MemFlow captures one forward and its backward and cannot plan a backward "
                "inside the forward: train this model without MemFlow, or without the term")
        return orig(*args, **kwargs)

    torch.autograd.grad = grad
    try:
        yield
    finally:
        torch.autograd.grad = orig


@contextlib.contextmanager
def _casts_in_forward():
    """``module.to(...)`` / ``.float()`` inside forward that changes no tensor of the module is the
    module itself. Exported, parameters are wrapped tensors that ``Module._apply`` swaps rather than
    sets, which fails even for a cast to what they already are (HF Switch Transformers' router casts
    its classifier to float32 in every forward: "_apply(): Couldn't swap Linear.weight")."""
    orig = torch.nn.Module._apply

    def _apply(self, fn, recurse=True):
        tensors = list(self.parameters(recurse)) + list(self.buffers(recurse))
        if tensors and all(fn(t) is t for t in tensors):
            return self
        return orig(self, fn, recurse)

    torch.nn.Module._apply = _apply
    try:
        yield
    finally:
        torch.nn.Module._apply = orig


@contextlib.contextmanager
def _lean_fx():
    """fx graph modules made inside generate their Python code only when something calls
    them or reads it (the export's intermediate modules never are: ~0.5 s of code generation
    per GPT-2-medium export), and fx nodes record no Python stack trace (each costs a
    traceback extraction; nothing here reads ``stack_trace``: ~0.5 s per export)."""
    import torch.fx.config as fx_config
    from torch.fx._lazy_graph_module import _use_lazy_graph_module

    has = hasattr(fx_config, "do_not_emit_stack_traces")  # (torch >= 2.12)
    old = fx_config.do_not_emit_stack_traces if has else None
    if has:
        fx_config.do_not_emit_stack_traces = True
    try:
        with _use_lazy_graph_module(True):
            yield
    finally:
        if has:
            fx_config.do_not_emit_stack_traces = old


_SIZE_CHECKS = ("_assert_scalar", "sym_constrain_range", "sym_constrain_range_for_size")


def size_nodes(gm: torch.fx.GraphModule) -> set[torch.fx.Node]:
    """The nodes that only compute sizes from the inputs' symbolic dimensions.

    A graph exported with a symbolic batch dimension reads it
    (``aten.sym_size.int``), does integer arithmetic on it and may check its
    range; a graph exported at a fixed batch size has none of these (its sizes
    are constants), so this set is empty there. They are not operations of any
    node: grouping skips them and :func:`split_step` places each with its inputs.
    """
    from torch.fx.experimental.symbolic_shapes import free_symbols

    syms: set = set()
    for node in gm.graph.nodes:
        if node.op == "placeholder" and isinstance(node.meta.get("val"), torch.Tensor):
            syms |= free_symbols(node.meta["val"])
    out: set[torch.fx.Node] = set()
    if not syms:
        return out
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        val = node.meta.get("val")
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            fs = free_symbols(val)
            if fs and fs <= syms:
                out.add(node)
        elif (val is None and getattr(node.target, "__name__", "").split(".")[0] in _SIZE_CHECKS
              and node.all_input_nodes and all(a in out for a in node.all_input_nodes)):
            out.add(node)
    return out


#: the most blocks :func:`block_paths` opens nested sequential blocks up to (a model with more stays coarse)
MAX_BLOCKS = 64


def _repeated_children(mod: torch.nn.Module, path: str) -> list[str]:
    """Paths of ``mod``'s children that share their class with a sibling and hold parameters."""
    by_cls: dict[type, list[str]] = {}
    for name, ch in mod.named_children():
        if any(True for _ in ch.parameters()):
            by_cls.setdefault(type(ch), []).append(name)
    return [f"{path}.{nm}" if path else nm for names in by_cls.values() if len(names) >= 2 for nm in names]


def block_paths(model: torch.nn.Module, max_blocks: int = MAX_BLOCKS) -> set[str]:
    """Paths (relative to ``model``) of the repeated blocks that become nodes.

    A block is a child of an ``nn.ModuleList``/``nn.Sequential`` that shares
    its class with a sibling and holds parameters; blocks inside blocks are
    not counted (a block is one node), except where an outer block is itself an
    ``nn.Sequential`` of repeated blocks (a ResNet stage of residual blocks: a
    node that is a large share of the step, so a pipeline could cut only between
    stages). Such blocks are opened, their blocks becoming the nodes, when the
    blocks number at most ``max_blocks`` after it (all or none: a very deep model
    keeps its coarse nodes, and the search its size). An ``nn.ModuleList`` inside
    a block is never opened: nothing says its children run one after another
    (a mixture of experts' experts do not).
    """
    blocks: set[str] = set()
    mods = dict(model.named_modules())
    for path, mod in mods.items():
        if not isinstance(mod, (torch.nn.ModuleList, torch.nn.Sequential)):
            continue
        if any(path == b or path.startswith(b + ".") for b in blocks):
            continue
        blocks.update(_repeated_children(mod, path))
    inner = {b: _repeated_children(mods[b], b) for b in blocks if isinstance(mods[b], torch.nn.Sequential)}
    inner = {b: ch for b, ch in inner.items() if ch}
    if inner and len(blocks) - len(inner) + sum(len(ch) for ch in inner.values()) <= max_blocks:
        for b, ch in inner.items():
            blocks.discard(b)
            blocks.update(ch)
    return blocks


def _module_path(node: torch.fx.Node) -> str:
    """Deepest module path of an fx node, relative to the user's model ('' = root)."""
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    # export names look like "model.transformer.h.0" (attribute path from LossModule)
    path = re.sub(r"^L__self__\.?", "", path)
    if path == ROOT:
        return ""
    if path.startswith(ROOT + "."):
        return path[len(ROOT) + 1:]
    return path


def _unit_of(path: str, opened: set[str], depth: int | None) -> str | None:
    """The node-level module a module path belongs to (None = glue)."""
    if not path:
        return None
    parts = path.split(".")
    if depth is not None:
        if len(parts) < depth:
            return None
        return ".".join(parts[:depth])
    for i in range(1, len(parts) + 1):
        prefix = ".".join(parts[:i])
        if prefix not in opened:
            return prefix
    return None


def group_fx_nodes(gm: torch.fx.GraphModule, model: torch.nn.Module, granularity: str | int = "auto") -> tuple[dict, list[str]]:
    """Assign every compute fx node a segment index; returns (node -> segment, segment units)."""
    depth = None
    if granularity != "auto":
        try:
            depth = int(granularity)
        except (TypeError, ValueError):
            raise CaptureError(f"granularity must be 'auto' or a positive integer depth, got {granularity!r}") from None
        if depth < 1:
            raise CaptureError(f"granularity depth must be >= 1, got {depth}")
    blocks = block_paths(model)
    opened: set[str] = {""}
    for b in blocks:
        parts = b.split(".")
        for i in range(1, len(parts)):
            opened.add(".".join(parts[:i]))
    sizes = size_nodes(gm)
    compute = [n for n in gm.graph.nodes
               if n.op in ("call_function", "call_method", "call_module") and n not in sizes]
    units = [_unit_of(_module_path(n), opened, depth) for n in compute]
    # glue joins the next real unit; trailing glue joins the last one
    nxt = None
    for i in range(len(units) - 1, -1, -1):
        if units[i] is None:
            units[i] = nxt
        else:
            nxt = units[i]
    last = None
    for i, u in enumerate(units):
        if u is None:
            units[i] = last if last is not None else ""
        else:
            last = u
    seg_of: dict[torch.fx.Node, int] = {}
    seg_units: list[str] = []
    for n, u in zip(compute, units):
        if not seg_units or seg_units[-1] != u:
            seg_units.append(u)
        seg_of[n] = len(seg_units) - 1
    if not seg_units:
        raise CaptureError("the captured step has no operations")
    return seg_of, seg_units


def _unique_names(units: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for u in units:
        base = u or "model"
        seen[base] = seen.get(base, 0) + 1
        out.append(base if seen[base] == 1 else f"{base}#{seen[base]}")
    return out


def split_step(spec: Any, model: torch.nn.Module, batch: Any, granularity: str | int = "auto",
               batch_dims: list[bool] | None = None) -> Captured:
    """Export the step and split it into one GraphModule per node (``batch_dims``: see :func:`export_step`)."""
    gm, flat, treespec = export_step(spec, model, batch, batch_dims)
    symbolic = False
    if batch_dims is not None:  # the batch dimension stayed symbolic (torch did not specialise it)
        vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
        symbolic = len(vals) == len(batch_dims) and all(
            not b or (isinstance(v, torch.Tensor) and isinstance(v.shape[0], torch.SymInt))
            for v, b in zip(vals, batch_dims))
    seg_of, seg_units = group_fx_nodes(gm, model, granularity)
    out_of_place(gm, seg_of)  # no node modifies another's output in place (nn.ReLU(inplace=True))
    counts = [0] * len(seg_units)
    for s in seg_of.values():
        counts[s] += 1
    # size computations (symbolic batch only) go with their latest input; placeholders count as node 0
    size_seg: dict[torch.fx.Node, int] = {}
    sizes = size_nodes(gm)
    for node in gm.graph.nodes:
        if node in sizes:
            size_seg[node] = max([seg_of.get(a, size_seg.get(a, 0)) for a in node.all_input_nodes], default=0)

    def callback(node: torch.fx.Node) -> int:
        if node in seg_of:
            return seg_of[node]
        if node in size_seg:
            return size_seg[node]
        # get_attr / placeholder: the segment of the first user that computes
        for u in node.users:
            if u in seg_of:
                return seg_of[u]
        return 0

    try:
        split = split_module(gm, gm, callback, keep_original_order=True)
    except Exception as e:  # noqa: BLE001
        raise CaptureError(f"could not split the captured step into nodes: {type(e).__name__}: {e}") from None
    return Captured(
        split=split,
        names=_unique_names(seg_units),
        module_paths=seg_units,
        op_counts=counts,
        flat_inputs=flat,
        treespec=treespec,
        symbolic_batch=symbolic,
        unread=unread_state(model, split, seg_units),
        carried=list(gm.meta.get("memflow_carried", [])),
        routed=list(gm.meta.get("memflow_routed", [])),
    )


def unread_state(model: torch.nn.Module, split: torch.fx.GraphModule, units: list[str]) -> list:
    """The parameters and buffers of ``model`` (persistent or not) that the split step never reads,
    as ``(name, owner node, tensor)``; a parameter as a plain tensor on its storage (nothing steps it).
    Names are the step's (``model.<path>``, as the read ones are).

    The model holds them on its device all the same, so they are model state: each belongs to the
    first node standing for its module or a module around it (``blocks.0.mask`` to node
    ``blocks.0``), else the first node inside its module, else node 0 (a module the step never
    runs, the model's root)."""
    read = {id(st) for t in [*split.parameters(), *split.buffers()] for st in storages(t)}
    for node in split.graph.nodes:
        if node.op == "get_attr":
            obj: Any = split
            for part in str(node.target).split("."):
                obj = getattr(obj, part, None)
            if isinstance(obj, torch.Tensor):
                read.update(id(st) for st in storages(obj))
    out = []
    for name, t in [*model.named_parameters(), *model.named_buffers()]:
        sts = storages(t)
        if not sts or any(id(st) in read for st in sts):
            continue
        read.update(id(st) for st in sts)  # a storage two names share is held once
        out.append((f"{ROOT}.{name}", _owner(name.rpartition(".")[0], units), t.detach()))  # named as the step's
    return out


def _owner(module: str, units: list[str]) -> int:
    """The node holding state of ``module`` that no node reads (see :func:`unread_state`)."""
    for k, u in enumerate(units):
        if u and (module == u or module.startswith(u + ".")):
            return k
    for k, u in enumerate(units):
        if not module or u.startswith(module + "."):
            return k
    return 0
