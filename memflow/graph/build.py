"""Build the profiled TaskGraph of a model file's training step.

``capture_graph`` captures the step under ``FakeTensorMode`` (no real memory:
a 7B-parameter model is costed on a laptop) and traces the memory and FLOPs
of every node. Times are filled in by :mod:`memflow.profile.timing`
(measured on this host) or :mod:`memflow.profile.roofline` (predicted for a
named GPU).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ..errors import CaptureError, MemflowError
from .capture import Captured, split_step
from .program import StepProgram
from .record import TaskGraph

__all__ = ["capture_graph", "capture_program", "fingerprint", "DTYPES"]

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
