"""Capture failures as one line, and torch's own output kept out of the way while capturing.

``torch.export`` reports a failure at length: the fake-tensor kernels log a
traceback per failed op, the symbolic-shape code logs warnings, and a
data-dependent branch prints the partial FX graph to stderr before raising.
:func:`quiet_capture` keeps all of that off the terminal while a step is
exported; :func:`explain` turns the exception into one line that names the
model's module that was running, the op where one is known, the line of the
user's code and what to change.
"""
from __future__ import annotations

import contextlib
import io
import logging
import operator
import re
import sys
import warnings
from pathlib import Path
from types import TracebackType
from typing import Any

import torch

__all__ = ["quiet_capture", "quiet_fake", "explain", "sparse_gradients", "value_sized", "routed_sizes"]

_TORCH_DIR = str(Path(torch.__file__).resolve().parent)
_MEMFLOW_DIR = str(Path(__file__).resolve().parent.parent)
# torch warns whenever something asks a FakeTensor for its data pointer (nn.TransformerEncoder's
# deepcopy of its layer does, under the fake mode the profiler builds models in): not the user's bug
_FAKE_DATA_PTR = r"Accessing the data pointer of FakeTensor"
# a node of a printed FX graph: `name: "f32[4, 8]" = torch.ops.aten.sum.default(arg, ...)`
_FX_LINE = re.compile(r'^\s*(\w+): "([^"]*)" = torch\.ops\.(\w+)\.(\w+)\.\w+\(([^)]*)\)', re.M)


@contextlib.contextmanager
def quiet_fake():
    """Ignore torch's warning about a FakeTensor's data pointer (MemFlow runs fake tensors knowingly)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_FAKE_DATA_PTR)
        yield


@contextlib.contextmanager
def quiet_capture():
    """No logging, warnings or stderr prints from torch (or the model's libraries) while a step is
    captured: what went wrong is raised, and :func:`explain` says it in one line."""
    before = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(before)


def _frames(e: BaseException) -> list[tuple[Any, int]]:
    """(frame, line) of every traceback entry of ``e``, then of the exceptions it was raised from."""
    out: list[tuple[Any, int]] = []
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        tb: TracebackType | None = e.__traceback__
        here = []
        while tb is not None:
            here.append((tb.tb_frame, tb.tb_lineno))
            tb = tb.tb_next
        out += here  # an exception it was raised from was caught further in: its frames come after
        e = e.__cause__ or e.__context__
    return out


def _library(module: Any) -> bool:
    """``module``'s class comes from an installed library (transformers, timm), not the user's files."""
    src = getattr(sys.modules.get(type(module).__module__), "__file__", "") or ""
    return "site-packages" in src and not src.startswith(_TORCH_DIR)


def _user_code(path: str) -> bool:
    return not (path.startswith(_TORCH_DIR) or path.startswith(_MEMFLOW_DIR) or "site-packages" in path
                or path.startswith("<"))


def _scalar_source(graph: str) -> str:
    """The op whose result a data-dependent branch read (``aten.sum`` in ``if x.sum() > 0``), from the
    partial FX graph torch attaches: the first op of the chain of 0-dim results that ends in the
    graph's last node (``sum → gt → ne → item``)."""
    nodes = {m.group(1): (m.group(2), f"{m.group(3)}.{m.group(4)}", [a.strip() for a in m.group(5).split(",")])
             for m in _FX_LINE.finditer(graph)}
    if not nodes:
        return ""
    name = list(nodes)[-1]
    while True:
        _, op, args = nodes[name]
        src = args[0] if args else ""
        if src not in nodes or not nodes[src][0].endswith("[]"):  # its input is not a 0-dim value
            if op in ("aten.sym_size", "aten.sym_numel") and src in nodes:  # a size only a value decides
                return f"the size of {nodes[src][1]}'s result"  # (`if x.nonzero().size(0) > 0`)
            return op
        name = src


_CAUSED_BY = re.compile(r"Caused by: \(([^:()]+\.py):(\d+) in ")


def _caused_at(e: BaseException) -> str:
    """``file.py:line`` of the code torch names as the cause of a data-dependent guard (library code too:
    HF's models compute their loss inside the model), or ""."""
    for m in _CAUSED_BY.finditer(str(e)):
        if not (Path(_TORCH_DIR) / m.group(1)).exists():  # (torch's own code, named from its root: not where)
            return f"{Path(m.group(1)).name}:{m.group(2)}"
    return ""


def explain(spec: Any, model: torch.nn.Module, e: BaseException) -> str:
    """One line for a failed export of ``spec``'s step: the model's module that was running, the op,
    the user's line, what went wrong and, where it is known, what to change."""
    where = getattr(spec, "path", "model")
    names = {id(m): name for name, m in model.named_modules()}
    module = op = line = lib = None
    packed = False
    for frame, lineno in _frames(e):
        loc = frame.f_locals
        packed = packed or any(isinstance(v, torch.nn.utils.rnn.PackedSequence) for v in loc.values())
        owner = loc.get("self")
        if owner is not None and id(owner) in names:
            module = owner
        func = loc.get("func")
        if op is None and isinstance(func, torch._ops.OpOverload):  # the op as the model called it
            op = str(func.overloadpacket)
        path = frame.f_code.co_filename
        if _user_code(path):
            line = f"{Path(path).name}:{lineno}"
        elif "site-packages" in path and not path.startswith((_TORCH_DIR, _MEMFLOW_DIR)):
            lib = f"{Path(path).name}:{lineno}"  # (the last library frame: where a library's model branched)
    if module is None:
        mod = "the model"
    elif names[id(module)]:
        mod = f"module `{names[id(module)]}` ({type(module).__name__})"
    else:
        mod = f"the model's forward ({type(module).__name__})"
    at = f" at {line}" if line else ""
    # (by name: importing torch's symbolic-shapes module takes sympy, ~0.5 s a plan that needs neither)
    if any(c.__name__ == "GuardOnDataDependentSymNode" for c in type(e).__mro__):
        if not line and (_caused_at(e) or lib):
            at = f" at {_caused_at(e) or lib}"
        src = _scalar_source(getattr(e, "partial_fx_graph", "") or "")
        read = f"reads a tensor's value ({src})" if src else "reads a tensor's value"
        picked = src.startswith(("aten.nonzero", "aten.where", "the size of aten.nonzero", "the size of aten.where"))
        fix = _routed_fix(names.get(id(module), ""), module) if module is not None and picked else ""
        if fix:
            fix = f"an expert's tokens are picked by value: {fix}"
        elif src.startswith(("aten.rand", "aten.bernoulli", "aten.uniform", "aten.normal")):
            fix = ("a random draw decides what runs (LayerDrop: `if torch.rand([]) < p` skips a layer): set its "
                   "probability to 0 (HF: layerdrop, encoder_layerdrop, decoder_layerdrop)")
        elif module is not None and hasattr(module, "num_batches_tracked") and getattr(module, "momentum", 0) is None:
            # (torch's batch norm reads its own step count for a cumulative average: not the batch's values)
            fix = (f"{type(module).__name__}(momentum=None) reads its own step count (num_batches_tracked) as a "
                   "number every step, for its cumulative average: give it a momentum (torch's default is 0.1)")
        elif module is not None and type(module).__module__.startswith("torch.nn.") and names.get(id(module)):
            # (torch's own module branching inside: no torch.cond the user can write there)
            fix = (f"torch's {type(module).__name__} decides what to run by the batch's values inside itself: "
                   "replace it with a fixed-shape equivalent"
                   + (" (a full nn.Linear over the vocabulary and F.cross_entropy)"
                      if isinstance(module, torch.nn.AdaptiveLogSoftmaxWithLoss) else ""))
        elif line or (module is not None and names.get(id(module)) and not _library(module)):
            fix = "use torch.cond, or compute it outside the model"
        elif module is not None and names.get(id(module)):  # (inside a library's model: FSMT's padding mask)
            fix = ("the library's code branches on the batch's values there: pass what it derives from them where "
                   "it takes them as inputs (an attention mask, decoder inputs), or the model cannot be captured")
        else:  # (library code in the model's own forward: HF's models branch on the labels' values for their loss)
            fix = ("compute it outside the model: where it is the library's own loss, return (inputs, labels) from "
                   "example_batch with the labels left out of the inputs dict, and define loss_fn(output, labels)")
        return (f"{where}: data-dependent control flow in {mod}{at}: Python code {read} to decide what to run; "
                f"torch.export cannot capture it: {fix}")
    first = (str(e).strip().splitlines() or [""])[0][:300].rstrip(".")
    what = f"{type(e).__name__}: {first}" if first else type(e).__name__
    inside = f" in {mod}" + (f" ({op})" if op else "") + at if module is not None or op else ""
    # (a library's own check on a mask it keeps only when traced, HF Informer's after its distilling layer
    # halved the sequence, is a ValueError with no op)
    masked = isinstance(e, ValueError) and "mask" in first.lower()
    hint = ("; check the shapes example_batch returns against what the model expects"
            if (op and isinstance(e, RuntimeError)) or masked else "")
    if hint and module is not None and _library(module):  # (HF Autoformer, Nystromformer: a mask they drop
        # eagerly when it is all ones, where its values can be read, is kept under export, on a path they break)
        hint += ("; where they train in plain PyTorch, the library's code takes another path under torch.export "
                 "than when it runs eagerly (an all-ones attention mask a model drops eagerly is kept when traced): "
                 "then this model cannot be captured as it is")
    if "fake tensor in the exported program constant" in first:  # (a tensor the trace did not make)
        hint = ("; a tensor reached through .data (or made outside torch's ops) became a constant of the "
                "graph: change a parameter in forward as `with torch.no_grad(): p.clamp_(...)`, not through "
                "`p.data`")
        first = "a fake tensor in the exported program's constants"
        what = f"{type(e).__name__}: {first}"
    if packed:  # (an RNN over a PackedSequence sizes its work by the lengths' values)
        hint = ("; a packed sequence (pack_padded_sequence) sizes the RNN's work by its lengths' values, which "
                "torch.export cannot read: run the RNN on the padded batch and pick each sequence's last output "
                "by its length (gather), or mask the padding")
    return f"{where}: torch.export could not capture the training step{inside}: {what}{hint}"



def sparse_gradients(spec: Any, model: torch.nn.Module) -> str:
    """One line where a module of ``model`` makes sparse gradients (``Embedding(sparse=True)``,
    ``EmbeddingBag(sparse=True)``), else "": a sparse gradient's size is the count of distinct ids in
    each batch, which no plan made before the batch is seen can bound."""
    for name, mod in model.named_modules():
        if isinstance(mod, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and mod.sparse:
            return (f"{getattr(spec, 'path', 'model')}: module `{name}` ({type(mod).__name__}) is built with "
                    "sparse=True: its gradient is a sparse tensor sized by the ids each batch holds, which MemFlow "
                    "does not plan; build it with sparse=False (a dense gradient; SparseAdam then becomes Adam)")
    return ""


def _routed_fix(path: str, mod: Any) -> str:
    """What to change where a module routing tokens to experts (by its name, or experts in a
    ModuleList/ModuleDict) picks them by value, else ""."""
    kids = list(mod.children()) if isinstance(mod, torch.nn.Module) else []
    if not (re.search(r"expert|moe|rout", f"{path} {type(mod).__name__}", re.I)
            or any(isinstance(m, (torch.nn.ModuleList, torch.nn.ModuleDict)) for m in kids)):
        return ""
    return ("run every expert on every token and weight each output by its routing weight (zero where not "
            "routed), or gather a fixed number of tokens per expert (a capacity) with topk")


def value_sized(spec: Any, model: torch.nn.Module, gm: torch.fx.GraphModule, module_of: Any) -> str:
    """One line where the exported step ``gm`` makes a tensor whose size depends on tensor values
    (``nonzero``, ``torch.where(mask)``, a boolean index, ``unique``, ``masked_select``: an op torch tags
    ``dynamic_output_shape``), else "". ``module_of(node)``: the model's module path of an FX node. Such a
    size is known only when the batch is seen, so no tensor of the step can be sized ahead of it: the
    line names the module and the op, and says how to give it a fixed shape (fx nodes carry no stack trace
    here: :func:`memflow.graph.capture.export_step` exports without them)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols  # (export has loaded it)

    def value_shaped(n: Any) -> bool:
        val = n.meta.get("val")
        return isinstance(val, torch.Tensor) and bool(free_unbacked_symbols(val.shape))

    # an op torch tags as sized by values (a boolean index, nonzero) whose result here is: other ops give
    # such sizes in the export's meta (one_hot) yet run at fixed sizes, as integer indexing does
    bad = next((n for n in gm.graph.nodes if n.op == "call_function"  # (the tag first: every export runs this)
                and torch.Tag.dynamic_output_shape in getattr(n.target, "tags", ()) and value_shaped(n)), None)
    if bad is None:
        return ""
    seen, todo = {bad}, [bad]  # the first value-sized op it stems from names the cause (torch.where)
    while todo:
        for a in todo.pop().all_input_nodes:
            if a not in seen and value_shaped(a):
                seen.add(a)
                todo.append(a)
    node = next(n for n in gm.graph.nodes if n in seen)
    src = node.args[0] if node.target is operator.getitem and node.args else node  # (torch.where's tuple)
    target = getattr(src, "target", node.target)
    name = getattr(target, "overloadpacket", getattr(target, "__name__", str(target)))
    path = module_of(node)
    try:
        mod = model.get_submodule(path) if path else model
        where = f"module `{path}` ({type(mod).__name__})" if path else f"the model's forward ({type(mod).__name__})"
    except AttributeError:
        mod, where = None, f"module `{path}`"
    fix = _routed_fix(path, mod) or ("keep every element and zero what the mask leaves out (x * mask, "
                                     "torch.where(mask, x, 0)) instead of selecting it")
    return (f"{getattr(spec, 'path', 'model')}: {where} makes a tensor whose size depends on tensor values "
            f"({name}: torch.where on a mask, nonzero, a boolean index, unique), so no plan can size the step "
            f"before it sees the batch; give it a fixed shape: {fix}")


def routed_sizes(gm: torch.fx.GraphModule, module_of: Any) -> list[str]:
    """The modules of the exported step ``gm`` that make tensors sized by numbers read from tensors
    (``.tolist()`` / ``.item()``: a mixture of experts splitting its tokens by each expert's count, HF's
    JetMoE), in step order. They run: the trace measures them at the profiled batch's sizes, which
    another batch's routing changes (JetMoE's first stage peaked 512 B, 0.06%, above its plan with two
    micro-batches routed otherwise than the traced one)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols  # (export has loaded it)

    read = set()  # the symbols numbers read from tensors stand for
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target in (torch.ops.aten._local_scalar_dense.default,
                                                    torch.ops.aten.item.default):
            v = n.meta.get("val")
            if isinstance(v, torch.SymInt):
                read |= free_unbacked_symbols(v)
    if not read:
        return []
    out: list[str] = []
    for n in gm.graph.nodes:
        v = n.meta.get("val")
        if isinstance(v, torch.Tensor) and free_unbacked_symbols(v.shape) & read:
            path = module_of(n) or "the model's forward"
            if path not in out:
                out.append(path)
    return out
