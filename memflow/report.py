"""A self-contained HTML report of a plan: summary, memory curves, Pareto front, baselines.

Charts are inline SVG drawn here (no JavaScript, no external files), so the
page opens anywhere and can be mailed around.
"""
from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

from .fileio import atomic_write_text
from .planfile import Plan
from .summary import summary
from .units import format_bytes, format_time

__all__ = ["render_report", "write_report"]

_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def _unit(values: list[float], kind: str) -> tuple[float, str]:
    """A divisor and unit name that keep ``values`` readable (bytes or seconds)."""
    top = max([abs(v) for v in values] or [1.0]) or 1.0
    table = ([(2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B")] if kind == "bytes"
             else [(1.0, "s"), (1e-3, "ms"), (1e-6, "us")])
    for div, name in table:
        if top >= div:
            return div, name
    return table[-1]


def _scaled(series, xkind: str, ykind: str):
    xd, xu = _unit([x for _, sx, _ in series for x in sx], xkind)
    yd, yu = _unit([y for _, _, sy in series for y in sy], ykind)
    return [(n, [x / xd for x in sx], [y / yd for y in sy]) for n, sx, sy in series], xd, xu, yd, yu


def _polyline_chart(series: list[tuple[str, list[float], list[float]]], *, width=720, height=300,
                    hline: float | None = None, xlabel="time (s)", ylabel="GiB", points=False,
                    hline_label="capacity") -> str:
    xs = [x for _, sx, _ in series for x in sx] or [0.0, 1.0]
    ys = [y for _, _, sy in series for y in sy] or [0.0, 1.0]
    if hline and hline > 3 * max(ys):  # far off scale: say so instead of squashing the curves
        ylabel += f" ({hline_label} off scale)"
        hline = None
    ys = ys + ([hline] if hline else [])
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = 0.0, max(ys) * 1.08 if max(ys) > 0 else 1.0
    L, R, T, B = 60, 160, 15, 40
    W, H = width - L - R, height - T - B

    def px(x):
        return L + (x - x0) / (x1 - x0) * W

    def py(y):
        return T + H - (y - y0) / (y1 - y0) * H

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" class="chart">',
           f'<rect x="{L}" y="{T}" width="{W}" height="{H}" fill="#fafafa" stroke="#999"/>']
    for i in range(5):
        yv = y0 + (y1 - y0) * i / 4
        out.append(f'<text x="{L - 5}" y="{py(yv) + 4:.1f}" text-anchor="end" font-size="11">{yv:.3g}</text>')
        xv = x0 + (x1 - x0) * i / 4
        out.append(f'<text x="{px(xv):.1f}" y="{T + H + 15}" text-anchor="middle" font-size="11">{xv:.3g}</text>')
    out.append(f'<text x="{L + W / 2}" y="{height - 5}" text-anchor="middle" font-size="12">{html.escape(xlabel)}</text>')
    out.append(f'<text x="12" y="{T + H / 2}" font-size="12" transform="rotate(-90 12 {T + H / 2})">'
               f'{html.escape(ylabel)}</text>')
    if hline:
        out.append(f'<line x1="{L}" x2="{L + W}" y1="{py(hline):.1f}" y2="{py(hline):.1f}" stroke="#000" '
                   f'stroke-dasharray="5,4"/><text x="{L + W + 4}" y="{py(hline) + 4:.1f}" font-size="11">capacity</text>')
    for i, (name, sx, sy) in enumerate(series):
        c = _COLORS[i % len(_COLORS)]
        if points:
            for x, y in zip(sx, sy):
                out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{c}"/>')
        else:
            pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(sx, sy))
            out.append(f'<polyline class="curve" points="{pts}" fill="none" stroke="{c}" stroke-width="1.8"/>')
        out.append(f'<text x="{L + W + 8}" y="{T + 14 + 15 * i}" font-size="11" fill="{c}">{html.escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def render_report(plan: Plan, sim: Any) -> str:
    """The report page as an HTML string. ``sim`` is the plan's SimResult (detail)."""
    series = []
    for d, curve in enumerate(sim.memory_curve):
        times, bytes_ = curve
        series.append((f"device {d}", [float(t) for t in times], [float(b) for b in bytes_]))
    series, xd, xu, yd, yu = _scaled(series, "time", "bytes")
    cap = max(sim.capacity_bytes) / yd if sim.capacity_bytes else None
    mem_svg = _polyline_chart(series, hline=cap, xlabel=f"time ({xu})", ylabel=yu)
    pareto = plan.pareto or []
    par_svg = "<p>none</p>"
    if pareto:
        pser, _, pxu, _, pyu = _scaled(
            [("Pareto front", [p.max_peak_bytes for p in pareto], [p.step_time_s for p in pareto])],
            "bytes", "time")
        par_svg = _polyline_chart(pser, xlabel=f"max peak memory per device ({pxu})", ylabel=f"step time ({pyu})",
                                  points=True)
    rows = []
    for name, b in plan.baselines.items():
        rows.append(f"<tr><td>{html.escape(name)}</td><td>{'yes' if b.fits else 'no (OOM)'}</td>"
                    f"<td>{format_time(b.step_time_s)}</td><td>{format_bytes(b.max_peak_bytes)}</td></tr>")
    title = f"MemFlow plan: {html.escape(plan.model_name)}"
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;max-width:960px;margin:2em auto;color:#222}}
pre{{background:#f4f4f4;padding:1em;overflow-x:auto}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 10px;text-align:right}} td:first-child{{text-align:left}}</style>
</head><body>
<h1>{title}</h1>
<h2>Plan</h2>
<pre>{html.escape(summary(plan))}</pre>
<h2>Memory per device over one step (simulated)</h2>
{mem_svg}
<p>binding constraint: {html.escape(sim.binding)}</p>
<h2>Pareto front: what each extra GiB buys</h2>
{par_svg}
<h2>Baselines</h2>
<table><tr><th>strategy</th><th>fits</th><th>step time</th><th>max peak</th></tr>
{''.join(rows)}</table>
</body></html>
"""


def write_report(plan: Plan, sim: Any, path: str | os.PathLike) -> Path:
    path = Path(path)
    atomic_write_text(path, render_report(plan, sim))
    return path
