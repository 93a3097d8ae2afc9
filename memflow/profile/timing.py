"""Measure each node's forward and backward time on this host.

The split step runs node by node (``StepProgram.run_step``) on real tensors
with no dispatch mode in the way; the time between consecutive phase starts
is that phase's time. Medians over repeats, after warm-up. On CUDA the
phases are bracketed with CUDA events instead of wall time.

A host busy with other work (another plan profiling beside this one) slows
the steps down while it lasts, and a cached cost outlives the moment. The
repeats run in rounds (:func:`steady_times`); contention only ever slows a
step, so the measurement is steady when its fastest round is confirmed by
another within :data:`STEADY_TOLERANCE`. Otherwise a bounded number of
rounds more are taken, and a measurement still unsteady is used for this
plan but marked (``graph.meta["steady_times"]``) and warned about, and the
profile cache does not keep it.
"""
from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from typing import Any, Callable

import torch

from ..graph.actions import HostSwap, make_wrap
from ..graph.program import StepProgram
from ..graph.record import TaskGraph
from ..kinds import SELECTIVE, SWAP
from ..memory import LiveBytes
from ..progress import detail
from ..settings import timing_repeats_cap
from .roofline import replay_share
from .trace import state_tensors

__all__ = ["measure_phase_times", "apply_measured_times", "steady_times", "over_processes", "PhaseTimes",
           "STEADY_TOLERANCE", "MAX_ROUNDS", "timed_repeats"]

STEADY_TOLERANCE = 0.25  # the fastest round's median step time and another's may differ by this fraction
MAX_ROUNDS = 4  # the two rounds the repeats make, and at most two more where they disagree


def timed_repeats(repeats: int) -> int:
    """``repeats``, at most ``MEMFLOW_TIMING_REPEATS`` where that is set (:mod:`memflow.settings`)."""
    cap = timing_repeats_cap()
    return repeats if cap is None else min(repeats, cap)


class PhaseTimes(list):
    """Median seconds of each phase (a list, as before), and whether the rounds that measured them
    agreed (``steady``; ``rounds_s``: each round's median step time)."""

    def __init__(self, values=(), steady: bool = True, rounds_s: list[float] | None = None):
        super().__init__(values)
        self.steady = steady
        self.rounds_s = list(rounds_s or [])


def _medians(rows: list[list[float]], width: int) -> list[float]:
    return [statistics.median(r[i] for r in rows) if rows else 0.0 for i in range(width)]


def steady_times(step: Callable[[], list[float]], repeats: int, width: int, *,
                 tolerance: float = STEADY_TOLERANCE, max_rounds: int = MAX_ROUNDS) -> PhaseTimes:
    """Per-phase medians of ``repeats`` calls of ``step`` (each: one step's ``width`` phase times),
    checked against a loaded host.

    The repeats run as two rounds (⌈r/2⌉ and ⌊r/2⌋). The measurement is steady when the fastest
    round's median step time is within ``tolerance`` of another round's (contention only ever slows
    a step down: the fastest round is the one to confirm); the medians are then over those two
    rounds. Otherwise another round of ⌈r/2⌉ is taken, up to ``max_rounds`` in all; a measurement
    still unsteady gives the fastest round's medians, ``steady=False``. Fewer than 2 repeats:
    nothing to compare (steady)."""
    if repeats < 2:
        rows = [step() for _ in range(repeats)]
        return PhaseTimes(_medians(rows, width), rounds_s=[statistics.median(sum(r) for r in rows)] if rows else [])
    rounds = [[step() for _ in range((repeats + 1) // 2)], [step() for _ in range(repeats // 2)]]
    while True:
        totals = [statistics.median(sum(r) for r in rnd) for rnd in rounds]
        fast = min(range(len(rounds)), key=totals.__getitem__)
        near = [i for i in range(len(rounds)) if i != fast and totals[i] <= totals[fast] * (1 + tolerance)]
        if near:
            other = min(near, key=totals.__getitem__)
            return PhaseTimes(_medians(rounds[fast] + rounds[other], width), rounds_s=totals)
        if len(rounds) >= max_rounds:  # the least contended round is the best guess there is
            return PhaseTimes(_medians(rounds[fast], width), steady=False, rounds_s=totals)
        rounds.append([step() for _ in range((repeats + 1) // 2)])


def over_processes(per: list[list[float]], steady: list[bool]) -> PhaseTimes:
    """Each phase's median over processes timing it at once (``per``: one list of phase times per
    process), steady where every process's own rounds agreed."""
    return PhaseTimes(_medians(per, len(per[0])), steady=all(steady))


def measure_phase_times(program: StepProgram, inputs: list[torch.Tensor], optimizer: torch.optim.Optimizer,
                        repeats: int = 5, warmup: int = 1, accounted: bool = False,
                        swap_all: bool = False, selective_all: bool = False) -> list[float]:
    """Median seconds of each of the 2n+1 phases (forwards, backwards, optimizer), checked for a
    loaded host by :func:`steady_times`.

    ``accounted``: run under the live-bytes counter, as the CPU executor does
    (its per-op cost is then part of every phase, as it is in a planned run).
    ``swap_all`` (CPU): every node swapped as the CPU executor swaps (saved tensors
    copied to host memory as they are saved and back as the backward asks for
    them), under the counter: what a swapped node's phases cost there. ``selective_all``: every
    node ``selective`` (memflow.graph.selective), under the counter: the policy's dispatch modes
    in the forward and the replay in the backward."""
    n = program.n
    wrap_for = None
    if selective_all:
        def wrap_for(live):
            return make_wrap([SELECTIVE] * n, None)
    elif swap_all:
        state_ptrs = {t.untyped_storage().data_ptr() for t in state_tensors(program, optimizer)}

        def wrap_for(live):
            swap = HostSwap(live, state_ptrs)
            swap.batch_inputs(inputs)  # (as the executor: the batch stays on the device)
            return make_wrap([SWAP] * n, swap)
    cuda = any(t.is_cuda for t in inputs if isinstance(t, torch.Tensor))

    done = [0]

    def step() -> list[float]:
        done[0] += 1
        detail(f"timing step {done[0]}{' (every node swapped)' if swap_all else ' (every node selective)' if selective_all else ''}")
        marks: list[Any] = []

        def on_phase(p: int) -> None:
            if cuda:
                ev = torch.cuda.Event(enable_timing=True)
                ev.record()
                marks.append((p, ev))
            else:
                marks.append((p, time.perf_counter()))

        live = LiveBytes() if (accounted or swap_all or selective_all) else None
        with live if live is not None else contextlib.nullcontext():
            program.run_step(inputs, on_phase=on_phase, wrap=wrap_for(live) if wrap_for else None)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            on_phase(2 * n + 1)
        if cuda:
            torch.cuda.synchronize()
        row = [0.0] * (2 * n + 1)
        for (p, a), (_, b) in zip(marks, marks[1:]):
            if p <= 2 * n:
                row[p] += a.elapsed_time(b) / 1e3 if cuda else b - a
        return row

    for _ in range(warmup):
        step()
    return steady_times(step, timed_repeats(repeats), 2 * n + 1)


def apply_measured_times(graph: TaskGraph, phase_times: list[float], device: str,
                         swap_times: list[float] | None = None,
                         selective_times: list[float] | None = None) -> TaskGraph:
    """Set the graph's times from measured phase times (``swap_times``: the same with every
    node swapped, :func:`measure_phase_times` ``swap_all``; ``selective_times``: with every node
    selective, ``selective_all``). Swapping a node does its work and copies besides: a swapped
    phase measured faster than the kept one is timing noise, and is taken as the kept time (else
    a plan with memory to spare swaps for a noise-sized gain). A selective node's replay time is
    what its forward and backward took above the kept ones (charged to its backward), where
    measured, and at least its forward's time times the replay's share of its cost
    (:func:`memflow.profile.roofline.replay_share`): a replay measured cheaper is timing noise."""
    n = graph.n
    for nd in graph.nodes:
        nd.fwd_time_s = phase_times[nd.index]
        nd.bwd_time_s = phase_times[2 * n - 1 - nd.index]
        if nd.sel_saved_bytes >= 0:
            nd.sel_replay_time_s = nd.fwd_time_s * replay_share(nd)
            if selective_times is not None:  # (never below the cheap ops' share: timing noise)
                nd.sel_replay_time_s = max(nd.sel_replay_time_s, selective_times[nd.index] - nd.fwd_time_s
                                           + selective_times[2 * n - 1 - nd.index] - nd.bwd_time_s)
        if swap_times is not None:
            nd.cpu_swap_fwd_time_s = max(swap_times[nd.index], nd.fwd_time_s)
            nd.cpu_swap_bwd_time_s = max(swap_times[2 * n - 1 - nd.index], nd.bwd_time_s)
    graph.opt_time_s = phase_times[2 * n]
    graph.device = device
    graph.time_source = "measured"
    unsteady = [t for t in (phase_times, swap_times, selective_times)
                if t is not None and not getattr(t, "steady", True)]
    graph.meta["steady_times"] = not unsteady
    if unsteady:
        rounds = ", ".join(f"{x * 1e3:,.1f}" for x in getattr(unsteady[0], "rounds_s", []))
        load = f"; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores" if hasattr(os, "getloadavg") else ""
        print(f"memflow: warning: {graph.model_name} at micro-batch {graph.batch_size}: repeated timings disagree"
              f"{f' (step medians {rounds} ms)' if rounds else ''}{load}: the host looks busy; these costs are used "
              "for this plan and not cached", file=sys.stderr, flush=True)
    return graph
