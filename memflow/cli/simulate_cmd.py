"""``memflow simulate PLAN.yaml``: the simulator's step time and memory for a plan."""
from __future__ import annotations

import argparse
import json

from ..planfile import load_plan
from ..planner import simulate_plan
from ..plot import plot_memory
from ..units import format_bytes, format_time
from .outputs import checked_output
from .progress import reporter

__all__ = ["main"]


def main(a: argparse.Namespace) -> int:
    trace = checked_output(a.trace, "--trace") if a.trace else None
    plot = checked_output(a.plot, "--plot") if a.plot else None
    plan = load_plan(a.plan)
    res = simulate_plan(plan, progress=reporter(a.quiet or a.json))
    if trace:
        res.to_chrome_trace(trace)
    if plot:
        plot_memory(res, plot)
    if a.json:
        print(json.dumps({"fits": res.fits, "step_time_s": res.step_time_s, "peak_bytes": list(map(int, res.peak_bytes)),
                          "capacity_bytes": list(map(int, res.capacity_bytes)), "binding": res.binding,
                          "busy": res.busy, "bubble_fraction": res.bubble_fraction}, default=float))
        return 0
    print(f"step {format_time(res.step_time_s)} ({'fits' if res.fits else 'DOES NOT FIT'}); binding: {res.binding}")
    for d, (pk, cap) in enumerate(zip(res.peak_bytes, res.capacity_bytes)):
        busy = res.busy[d] if d < len(res.busy) else {}
        b = ", ".join(f"{k} {format_time(v)}" for k, v in busy.items())
        print(f"  device {d}: peak {format_bytes(pk)} / {format_bytes(cap)} usable; busy: {b}")
    if trace:
        print(f"trace written to {trace}")
    if plot:
        print(f"memory plot written to {plot}")
    return 0
