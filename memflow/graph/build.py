"""Build a model file's model and a batch, and capture the training step as a node program.

:func:`capture_program` builds the model and a batch (under ``FakeTensorMode``
or on real tensors), exports and splits the step into node modules
(:func:`memflow.graph.capture.split_step`) and returns the program that runs
them; :func:`fingerprint` hashes what the program was built from. The profiler
(:mod:`memflow.profile.build`) traces such programs into TaskGraphs; the
executor runs them.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ..kinds import TRAIN_DTYPES
from .capture import Captured, split_step
from .fakebuild import build_fake
from .diagnose import quiet_fake
from .program import StepProgram
from .tp import TPGroup, apply_tp
from .training import autocast

__all__ = ["capture_program", "program_of", "fingerprint", "model_signature", "DTYPES"]

DTYPES = TRAIN_DTYPES


def program_of(captured: Captured, tp: int = 1, tp_rank: int = 0, sequence: bool = True) -> StepProgram:
    """The node program of a captured step; with ``tp`` > 1, rank ``tp_rank``'s share of it
    (:func:`memflow.graph.tp.apply_tp`, with sequence parallelism unless ``sequence`` is False; its
    group's process group is set by whoever runs it)."""
    program = StepProgram(captured.split, captured.unread, captured.carried, captured.routed)
    if tp > 1:
        program.tp = TPGroup(tp, tp_rank)
        program.partitioning = apply_tp(program, program.tp, sequence=sequence)
    return program


def capture_program(spec: Any, batch_size: int, *, granularity: str | int = "auto", fake: bool = True,
                    dtype: str = "fp32", seed: int = 0, device: Any = None,
                    tp_rank: int = 0) -> tuple[Captured, StepProgram, Any, torch.nn.Module]:
    """Build the model and a batch (fake or real), capture and split the step.

    ``device`` (real tensors only): the model and batch are moved there before the
    export, which bakes device constants (masks, position ids) into the program;
    they are built on the CPU first, so every device starts from the same weights.
    With ``spec.tp`` > 1 the program is tensor-parallel rank ``tp_rank``'s (:func:`program_of`).
    Returns (captured, program, fake mode or None, model).
    """
    mode = FakeTensorMode(allow_non_fake_inputs=True) if fake else None
    ctx = mode if mode is not None else contextlib.nullcontext()
    torch.manual_seed(seed)
    model = build_fake(spec, mode) if mode is not None else spec.build()
    with ctx, quiet_fake():
        model.train()
        batch = spec.batch(batch_size)
    on = torch.device(device).type if device is not None and not fake else "cpu"
    if on != "cpu":  # pragma: no cover - needs a GPU
        model.to(device)
        batch = torch.utils._pytree.tree_map(
            lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, batch)
    with autocast(dtype, on):
        captured = split_step(spec, model, batch, granularity)
    with ctx if mode is not None else contextlib.nullcontext():
        program = program_of(captured, getattr(spec, "tp", 1), tp_rank, getattr(spec, "sequence", True))
    return captured, program, mode, model


def model_signature(model: torch.nn.Module) -> str:
    """A hash of what a model file built, without capturing anything: its parameters' and buffers'
    names, shapes and dtypes and its modules' classes (the profile cache checks a cached graph's
    against a fresh build's)."""
    rec = [[(n, list(t.shape), str(t.dtype)) for n, t in model.named_parameters()],
           [(n, list(t.shape), str(t.dtype)) for n, t in model.named_buffers()],
           [type(m).__qualname__ for m in model.modules()]]
    return hashlib.sha256(json.dumps(rec).encode()).hexdigest()[:20]


def fingerprint(model: torch.nn.Module, captured: Captured, batch_size: int, dtype: str, granularity: Any,
                tp: int = 1) -> str:
    """A stable hash of model structure + batch shapes + precision + node cut (+ tensor-parallel
    degree, where there is one)."""
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
    if tp > 1:
        rec["tp"] = tp
    h.update(json.dumps(rec, sort_keys=True).encode())
    return h.hexdigest()[:20]
