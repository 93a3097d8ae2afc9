"""``memflow report PLAN.yaml -o report.html``: one self-contained page for a plan."""
from __future__ import annotations

import argparse

from ..planfile import load_plan
from ..planner import simulate_plan
from ..report import write_report
from .outputs import checked_output
from .progress import reporter

__all__ = ["main"]


def main(a: argparse.Namespace) -> int:
    out_path = checked_output(a.output, "-o")
    plan = load_plan(a.plan)
    out = write_report(plan, simulate_plan(plan, progress=reporter(a.quiet)), out_path)
    print(f"report written to {out}")
    return 0
