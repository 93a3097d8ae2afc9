"""``memflow simulate PLAN.yaml``: the simulator's step time and memory for a plan."""
from __future__ import annotations

import json

from ..planfile import load_plan
from ..units import format_bytes, format_time
from .main import ArgParser

__all__ = ["main"]


def build_parser() -> ArgParser:
    p = ArgParser(prog="memflow simulate", description=__doc__)
    p.add_argument("plan", help="plan file written by `memflow plan`")
    p.add_argument("--trace", default=None, help="write a Chrome trace JSON (open in Perfetto)")
    p.add_argument("--plot", default=None, help="write the memory curves as a PNG (needs matplotlib)")
    p.add_argument("--json", action="store_true")
    return p


def main(argv: list[str]) -> int:
    from ..planner import simulate_plan

    a = build_parser().parse_args(argv)
    plan = load_plan(a.plan)
    res = simulate_plan(plan)
    if a.trace:
        res.to_chrome_trace(a.trace)
    if a.plot:
        res.plot_memory(a.plot)
    if a.json:
        print(json.dumps({"fits": res.fits, "step_time_s": res.step_time_s, "peak_bytes": list(map(int, res.peak_bytes)),
                          "capacity_bytes": list(map(int, res.capacity_bytes)), "binding": res.binding,
                          "busy": res.busy, "bubble_fraction": res.bubble_fraction}, default=float))
        return 0
    print(f"step {format_time(res.step_time_s)} ({'fits' if res.fits else 'DOES NOT FIT'}); binding: {res.binding}")
    for d, (pk, cap) in enumerate(zip(res.peak_bytes, res.capacity_bytes)):
        busy = res.busy[d] if d < len(res.busy) else {}
        b = ", ".join(f"{k} {format_time(v)}" for k, v in busy.items())
        print(f"  device {d}: peak {format_bytes(pk)} / {format_bytes(cap)}; busy: {b}")
    if a.trace:
        print(f"trace written to {a.trace}")
    if a.plot:
        print(f"memory plot written to {a.plot}")
    return 0
