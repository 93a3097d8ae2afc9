"""Measure a plain training step on this host: peak live tensor bytes and time.

This is the ground truth the task graph is checked against: the user's model
trained the ordinary way (``loss.backward(); opt.step(); opt.zero_grad()``),
with live tensor bytes counted by :class:`memflow.memory.LiveBytes` and
wall time taken as the median over repeats, after a warm-up step.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch

from ..graph.training import autocast
from ..memory import LiveBytes

__all__ = ["PlainStep", "measure_plain_step"]


@dataclass
class PlainStep:
    peak_bytes: int  # peak live tensor bytes during a steady-state step
    state_bytes: int  # params + buffers + optimizer state + batch before the step
    step_time_s: float  # median wall time of a whole step (forward+backward+optimizer)
    losses: list[float]


def measure_plain_step(spec: Any, batch_size: int, *, repeats: int = 3, seed: int = 0,
                       dtype: str = "fp32") -> PlainStep:
    """Train ``1 + repeats`` plain steps on real tensors; the first is a warm-up.

    ``dtype="bf16"`` runs the forward under CPU autocast (mixed precision)."""
    torch.manual_seed(seed)
    model = spec.build()
    model.train()
    batch = spec.batch(batch_size)
    opt = spec.make_optimizer([p for p in model.parameters() if p.requires_grad])
    losses = []

    def step():
        with autocast(dtype):
            loss = spec.loss(model, batch)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))

    step()
    state = list(model.parameters()) + list(model.buffers())
    for s in opt.state.values():
        state.extend(v for v in s.values() if isinstance(v, torch.Tensor))
    state.extend(t for t in torch.utils._pytree.tree_leaves(batch) if isinstance(t, torch.Tensor))
    live = LiveBytes()
    live.track(state)
    state_bytes = live.live
    with live:
        step()
    times = []
    for _ in range(max(0, repeats - 1)):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return PlainStep(peak_bytes=live.peak, state_bytes=state_bytes,
                     step_time_s=statistics.median(times) if times else float("nan"), losses=losses)
