"""Which parameters autocast only ever casts: the ones a ZeRO-3 unit can gather in bf16.

Under bf16 autocast with fp32 parameters, a weight a matmul reads is cast to bf16 (``aten._to_copy``)
and the copy is what the matmul reads and saves for its backward. A parameter whose *every* forward
read is such a cast (views of it aside: a transpose, a detach) is never used in fp32 by the forward;
gathering it in bf16 (rounded from the fp32 shard as autocast's cast rounds) hands the node exactly
the tensor autocast would have made, and the backward's gradient is converted to fp32 as autocast's
cast's backward converts it. So the numerics are plain autocast training's, the gathered bytes are
half, and the unsharded cast copy the node saved is gone (:mod:`memflow.executor.zero3`,
:mod:`simulator.zero3`). A norm's weight (read by ``layer_norm`` in fp32) or an embedding's (read by
``embedding``) is not cast-only and stays fp32.

:func:`cast_only` runs the forward once under a dispatch mode that records, per parameter storage,
the ops that read it: the profiler (on its fake tensors) and every executor rank (under a fake
mode of its own: no compute, no memory) call the same function on the same program, so the plan and
the run agree on the set. :func:`memflow.memory.cast_source` tells a traced op that is such a cast.
"""
from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..memory import LOW_DTYPES, cast_source, storages, tensors_in
from .training import autocast, casts

__all__ = ["cast_only", "cast_source", "low_reads", "param_readers", "LOW_DTYPES"]

_ASSERT_META = torch.ops.aten._assert_tensor_metadata.default


class _Reads(TorchDispatchMode):
    """Per parameter (by storage), whether an op other than a view or a low-precision cast read it."""

    def __init__(self, keys: dict):
        super().__init__()
        self.keys = keys  # id(storage) -> parameter id (aliases added as views are made)
        self.hold: list = []  # the alias storages (kept alive: their ids must not be reused)
        self.cast: set = set()
        self.other: set = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        hit = {self.keys[id(st)] for t in tensors_in(kwargs, tensors_in(args)) for st in storages(t)
               if id(st) in self.keys}
        out = func(*args, **kwargs)
        if hit and func is _ASSERT_META and kwargs.get("dtype", args[3] if len(args) > 3 else None) is not None:
            self.other |= hit  # (the export's check of a `.float()`'s input: it must stay fp32)
        elif hit and tensors_in(out):  # (a metadata query, e.g. a fake tensor's device, reads nothing)
            if cast_source(func, args, kwargs, self.keys) is not None:
                self.cast |= hit
            elif func.is_view or func is torch.ops.aten.detach.default or func is torch.ops.aten.alias.default:
                for t in tensors_in(out):  # (a view of a fake or converted tensor may have its own storage)
                    for st in storages(t):
                        self.keys.setdefault(id(st), next(iter(hit)))
                        self.hold.append(st)
            else:
                self.other |= hit
        return out


def cast_only(program: Any, inputs: list, dtype: str, device_type: str = "cpu",
              fake: bool = False) -> set[int]:
    """``id``\\ s of the trainable parameters of ``program`` whose every read in one forward of ``inputs``
    under ``dtype``'s autocast is a cast to a low precision (empty without autocast). ``fake``: run it
    under a fake mode of its own (real parameters and inputs; nothing computed or allocated)."""
    if not casts(dtype):
        return set()
    params = [p for p in _params(program) if p.requires_grad and p.is_floating_point() and p.dtype == torch.float32]
    keys = {id(st): id(p) for p in params for st in storages(p)}
    if not keys:
        return set()
    mode = contextlib.nullcontext()
    if fake:
        from torch._subclasses.fake_tensor import FakeTensorMode
        mode = FakeTensorMode(allow_non_fake_inputs=True)
    reads = _Reads(keys)
    env = None
    with mode, torch.no_grad(), autocast(dtype, device_type), reads:
        torch.clear_autocast_cache()
        env = program.initial_env(inputs)
        for k in range(program.n):
            program.forward_node(k, env, boundary=False)
            program.drop_dead(env, k)
        torch.clear_autocast_cache()
    del env
    return reads.cast - reads.other


def _params(program: Any) -> list:
    seen, out = set(), []
    for k in range(program.n):
        c = program.calls[k]
        ts = [program.attr_value(a) for a in c.arg_names if a in program.attrs] + list(c.module.parameters())
        for t in ts:
            if isinstance(t, torch.nn.Parameter) and id(t) not in seen:
                seen.add(id(t))
                out.append(t)
    return out


def param_readers(program: Any) -> dict[int, set]:
    """``id(tensor) -> `` the nodes that read it: ``k`` as an argument of node ``k``'s call
    (``program.attrs``), ``-1 - k`` held by node ``k``'s module."""
    readers: dict[int, set] = {}
    for k, c in enumerate(program.calls):
        for a in c.arg_names:
            if a in program.attrs:
                readers.setdefault(id(program.attr_value(a)), set()).add(k)
        for t in c.module.parameters():
            readers.setdefault(id(t), set()).add(-1 - k)
    return readers


def low_reads(program: Any, ids: set) -> dict[int, list[tuple[int, int]]]:
    """Of the parameters ``ids`` (:func:`cast_only`'s), those a ZeRO-3 unit gathers in bf16: read by one
    node only, as an argument of its call (``program.attrs``; not held by a node's module). Per node
    ``k``, ``[(argument position, id(parameter))]``. The profiler and the executor both take this set."""
    readers = param_readers(program)
    out: dict[int, list] = {}
    for k, c in enumerate(program.calls):
        for pos, a in enumerate(c.arg_names):
            if a in program.attrs:
                t = program.attr_value(a)
                if id(t) in ids and readers.get(id(t)) == {k}:
                    out.setdefault(k, []).append((pos, id(t)))
    return out
