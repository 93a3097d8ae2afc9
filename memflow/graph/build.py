"""Build the profiled TaskGraph of a model file's training step.

``capture_graph`` captures the step under ``FakeTensorMode`` (no real memory:
a 7B-parameter model is costed on a laptop) and traces the memory and FLOPs
of every node. ``capture_graphs`` gives the same graphs for several batch
sizes at once, from one model and (where it can) one export. Times are filled
in by :mod:`memflow.profile.timing` (measured on this host) or
:mod:`memflow.profile.roofline` (predicted for a named GPU).
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ..errors import CaptureError, MemflowError
from .capture import Captured, split_step
from .program import StepProgram
from .record import TaskGraph

__all__ = ["capture_graph", "capture_graphs", "capture_program", "fingerprint", "DTYPES"]

DTYPES = ("fp32", "bf16")


def _autocast(dtype: str):
    if dtype == "fp32":
        return contextlib.nullcontext()
    if dtype == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    raise CaptureError(f"unknown training precision {dtype!r}; valid: {list(DTYPES)}")


def capture_program(spec: Any, batch_size: int, *, granularity: str | int = "auto", fake: bool = True,
                    dtype: str = "fp32", seed: int = 0) -> tuple[Captured, StepProgram, Any, torch.nn.Module]:
    """Build the model and a batch (fake or real), capture and split the step.

    Returns (captured, program, fake mode or None, model).
    """
    mode = FakeTensorMode(allow_non_fake_inputs=True) if fake else None
    ctx = mode if mode is not None else contextlib.nullcontext()
    torch.manual_seed(seed)
    with ctx:
        model = spec.build()
        model.train()
        batch = spec.batch(batch_size)
    with _autocast(dtype):
        captured = split_step(spec, model, batch, granularity)
    return captured, StepProgram(captured.split), mode, model


def fingerprint(model: torch.nn.Module, captured: Captured, batch_size: int, dtype: str, granularity: Any) -> str:
    """A stable hash of model structure + batch shapes + precision + node cut."""
    h = hashlib.sha256()
    rec = {
        "params": [(n, list(p.shape), str(p.dtype)) for n, p in model.named_parameters()],
        "buffers": [(n, list(b.shape), str(b.dtype)) for n, b in model.named_buffers()],
        "modules": [type(m).__qualname__ for m in model.modules()],
        "inputs": [(list(t.shape), str(t.dtype)) for t in captured.flat_inputs],
        "nodes": list(zip(captured.names, captured.op_counts)),
        "batch_size": batch_size,
        "dtype": dtype,
        "granularity": str(granularity),
    }
    h.update(json.dumps(rec, sort_keys=True).encode())
    return h.hexdigest()[:20]


def capture_graph(spec: Any, batch_size: int | None = None, *, dtype: str = "fp32",
                  granularity: str | int = "auto", measure: bool = False, repeats: int = 5,
                  seed: int = 0, accounted: bool = False) -> TaskGraph:
    """The TaskGraph of one training step of ``spec``'s model at ``batch_size``.

    ``measure=False`` (default): everything runs under ``FakeTensorMode``; no
    real parameter or activation memory is allocated; nodes carry memory,
    FLOPs and bytes but no times (see :mod:`memflow.profile.roofline`).
    ``measure=True``: the step runs on real tensors on this host; memory is
    the accounted live bytes of that run and every node's forward/backward
    time is measured (median of ``repeats``).
    """
    from ..profile.timing import apply_measured_times, measure_phase_times
    from ..profile.trace import trace_step, unique_params

    batch_size = batch_size or spec.batch_size
    if batch_size < 1:
        raise CaptureError(f"batch size must be >= 1, got {batch_size}")
    captured, program, mode, model = capture_program(spec, batch_size, granularity=granularity, dtype=dtype,
                                                     fake=not measure, seed=seed)
    ctx = mode if mode is not None else contextlib.nullcontext()
    try:
        with ctx:
            opt = spec.make_optimizer(unique_params(captured.split))
            with _autocast(dtype):
                graph = trace_step(program, captured.flat_inputs, opt, captured.names, captured.module_paths,
                                   model_name=spec.name, batch_size=batch_size, dtype=dtype)
                if measure and repeats > 0:
                    times = measure_phase_times(program, captured.flat_inputs, opt, repeats=repeats,
                                               accounted=accounted)
                    apply_measured_times(graph, times, device="cpu")
    except MemflowError:
        raise
    except Exception as e:  # noqa: BLE001
        first = (str(e).strip().splitlines() or [""])[0]
        raise CaptureError(f"{spec.path}: tracing the training step failed: {type(e).__name__}: {first[:300]}") from None
    graph.fingerprint = fingerprint(model, captured, batch_size, dtype, granularity)
    graph.meta["granularity"] = str(granularity)
    graph.meta["memory_source"] = "measured" if measure else "fake"
    graph.meta["accounted_times"] = bool(measure and accounted)
    return graph


def _batch_dims(batches: dict[int, list]) -> list[bool] | None:
    """Per flat input, whether its leading dimension is the batch dimension, when the
    batches at these sizes differ only there (every input a tensor; the rest of
    each shape and every dtype the same); otherwise None."""
    sizes = list(batches)
    first = batches[sizes[0]]
    if not first or any(len(batches[b]) != len(first) for b in sizes):
        return None
    dims = []
    for i, t0 in enumerate(first):
        ts = [batches[b][i] for b in sizes]
        if not all(isinstance(t, torch.Tensor) and t.dtype == t0.dtype and t.dim() == t0.dim() for t in ts):
            return None
        if all(t.shape == t0.shape for t in ts):
            dims.append(False)
        elif t0.dim() > 0 and all(t.shape[0] == b and t.shape[1:] == t0.shape[1:] for t, b in zip(ts, sizes)):
            dims.append(True)
        else:
            return None
    return dims if any(dims) else None


def capture_graphs(spec: Any, sizes: list[int], *, dtype: str = "fp32", granularity: str | int = "auto",
                   seed: int = 0) -> dict[int, TaskGraph]:
    """``{b: capture_graph(spec, b, dtype=dtype, granularity=granularity)}`` for every size, faster.

    The graphs are the same ones (fake mode, no times); what is shared is the work
    that does not depend on the batch size: the model is built once, one export
    with a symbolic batch dimension serves every size >= 2 (a size-1 batch gets
    its own export: torch specialises size-1 dimensions, so the general program
    need not be the one exported at size 1; a batch whose shapes do not scale
    along the leading dimension gets one export per size), and the optimizer
    state made by the first size's warm-up step serves the other sizes, whose
    warm-up steps then skip the optimizer step (the traced steps are
    steady-state steps either way; see :func:`memflow.profile.trace.trace_step`).
    Where the symbolic export or a trace through it fails, those sizes are
    captured one by one as before.
    """
    from ..model_file import flatten
    from ..profile.trace import trace_step, unique_params

    sizes = list(dict.fromkeys(sizes))
    for b in sizes:
        if b < 1:
            raise CaptureError(f"batch size must be >= 1, got {b}")
    if len(sizes) < 2:
        return {b: capture_graph(spec, b, dtype=dtype, granularity=granularity, seed=seed) for b in sizes}
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    torch.manual_seed(seed)
    with mode:
        model = spec.build()
        model.train()
    rng = torch.get_rng_state()
    made: dict[int, Any] = {}
    batches: dict[int, list] = {}  # flat inputs
    for b in sizes:
        torch.set_rng_state(rng)  # each batch made as if right after the build, as capture_program does
        with mode:
            made[b] = spec.batch(b)
        batches[b] = flatten(made[b])[0]

    programs: list[tuple[Captured, StepProgram, list[int], bool]] = []  # (captured, program, sizes, symbolic)
    general = [b for b in sizes if b >= 2]
    dims = _batch_dims({b: batches[b] for b in general}) if len(general) >= 2 else None
    if dims is not None:
        b0 = max(general)
        try:
            with _autocast(dtype):
                captured = split_step(spec, model, made[b0], granularity, batch_dims=dims)
            program = StepProgram(captured.split)
        except Exception:  # noqa: BLE001 - not exportable with a symbolic batch: one export per size
            pass
        else:
            if captured.symbolic_batch:
                programs.append((captured, program, general, True))
    done = {b for _, _, bs, _ in programs for b in bs}
    for b in sizes:
        if b not in done:
            with _autocast(dtype):
                captured = split_step(spec, model, made[b], granularity)
            programs.append((captured, StepProgram(captured.split), [b], False))

    graphs: dict[int, TaskGraph] = {}
    state = None  # the optimizer state after the first traced size (keyed by parameter)
    for captured, program, bs, symbolic in programs:
        for b in bs:
            inputs = batches[b]
            try:
                with mode:
                    params = unique_params(captured.split)
                    opt = spec.make_optimizer(params)
                    if state is not None:
                        for prm in params:
                            if prm in state:
                                opt.state[prm] = state[prm]
                    with _autocast(dtype):
                        graph = trace_step(program, inputs, opt, captured.names, captured.module_paths,
                                           model_name=spec.name, batch_size=b, dtype=dtype,
                                           state_ready=state is not None)
            except MemflowError:
                raise
            except Exception as e:  # noqa: BLE001
                if symbolic:  # the symbolic program could not run this size: the old way for what is left
                    for rest in sizes:
                        if rest not in graphs:
                            graphs[rest] = capture_graph(spec, rest, dtype=dtype, granularity=granularity, seed=seed)
                    return {b: graphs[b] for b in sizes}
                first = (str(e).strip().splitlines() or [""])[0]
                raise CaptureError(f"{spec.path}: tracing the training step failed: {type(e).__name__}: "
                                   f"{first[:300]}") from None
            state = opt.state
            graph.fingerprint = fingerprint(model, dataclasses.replace(captured, flat_inputs=inputs), b, dtype,
                                            granularity)
            graph.meta["granularity"] = str(granularity)
            graph.meta["memory_source"] = "fake"
            graph.meta["accounted_times"] = False
            graphs[b] = graph
    return {b: graphs[b] for b in sizes}
