"""Measure each node's forward and backward time on this host.

The split step runs node by node (``StepProgram.run_step``) on real tensors
with no dispatch mode in the way; the time between consecutive phase starts
is that phase's time. Medians over repeats, after warm-up. On CUDA the
phases are bracketed with CUDA events instead of wall time.
"""
from __future__ import annotations

import contextlib
import statistics
import time
from typing import Any

import torch

from ..graph.actions import HostSwap, make_wrap
from ..graph.program import StepProgram
from ..graph.record import TaskGraph
from ..kinds import SWAP
from ..memory import LiveBytes
from .trace import state_tensors

__all__ = ["measure_phase_times", "apply_measured_times"]


def measure_phase_times(program: StepProgram, inputs: list[torch.Tensor], optimizer: torch.optim.Optimizer,
                        repeats: int = 5, warmup: int = 1, accounted: bool = False,
                        swap_all: bool = False) -> list[float]:
    """Median seconds of each of the 2n+1 phases (forwards, backwards, optimizer).

    ``accounted``: run under the live-bytes counter, as the CPU executor does
    (its per-op cost is then part of every phase, as it is in a planned run).
    ``swap_all`` (CPU): every node swapped as the CPU executor swaps (saved tensors
    copied to host memory as they are saved and back as the backward asks for
    them), under the counter: what a swapped node's phases cost there."""
    n = program.n
    wrap_for = None
    if swap_all:
        state_ptrs = {t.untyped_storage().data_ptr() for t in state_tensors(program, optimizer)}

        def wrap_for(live):
            return make_wrap([SWAP] * n, HostSwap(live, state_ptrs))
    cuda = any(t.is_cuda for t in inputs if isinstance(t, torch.Tensor))
    samples: list[list[float]] = [[] for _ in range(2 * n + 1)]
    for r in range(warmup + repeats):
        marks: list[Any] = []

        def on_phase(p: int) -> None:
            if cuda:
                ev = torch.cuda.Event(enable_timing=True)
                ev.record()
                marks.append((p, ev))
            else:
                marks.append((p, time.perf_counter()))

        live = LiveBytes() if (accounted or swap_all) else None
        with live if live is not None else contextlib.nullcontext():
            program.run_step(inputs, on_phase=on_phase, wrap=wrap_for(live) if wrap_for else None)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            on_phase(2 * n + 1)
        if r < warmup:
            continue
        if cuda:
            torch.cuda.synchronize()
        for (p, a), (_, b) in zip(marks, marks[1:]):
            if p > 2 * n:
                continue
            dt = a.elapsed_time(b) / 1e3 if cuda else b - a
            samples[p].append(dt)
    return [statistics.median(s) if s else 0.0 for s in samples]


def apply_measured_times(graph: TaskGraph, phase_times: list[float], device: str,
                         swap_times: list[float] | None = None) -> TaskGraph:
    """Set the graph's times from measured phase times (``swap_times``: the same with every
    node swapped, :func:`measure_phase_times` ``swap_all``)."""
    n = graph.n
    for nd in graph.nodes:
        nd.fwd_time_s = phase_times[nd.index]
        nd.bwd_time_s = phase_times[2 * n - 1 - nd.index]
        if swap_times is not None:
            nd.cpu_swap_fwd_time_s = swap_times[nd.index]
            nd.cpu_swap_bwd_time_s = swap_times[2 * n - 1 - nd.index]
    graph.opt_time_s = phase_times[2 * n]
    graph.device = device
    graph.time_source = "measured"
    return graph
