"""``memflow report PLAN.yaml -o report.html``: one self-contained page for a plan."""
from __future__ import annotations

from ..planfile import load_plan
from .main import ArgParser

__all__ = ["main"]


def main(argv: list[str]) -> int:
    from ..planner import simulate_plan
    from ..report import write_report

    p = ArgParser(prog="memflow report", description=__doc__)
    p.add_argument("plan")
    p.add_argument("-o", "--output", default="report.html")
    a = p.parse_args(argv)
    plan = load_plan(a.plan)
    out = write_report(plan, simulate_plan(plan), a.output)
    print(f"report written to {out}")
    return 0
