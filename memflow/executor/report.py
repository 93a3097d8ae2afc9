"""Measured vs predicted, as a table."""
from __future__ import annotations

from typing import Any

__all__ = ["format_report"]


def _gib(b: Any) -> str:
    return "-" if b is None else f"{b / 2**20:.2f} MiB"


def _err(measured: Any, predicted: Any) -> str:
    if measured is None or not predicted:
        return "-"
    return f"{100.0 * (predicted - measured) / measured:+.1f}%" if measured else "-"


def format_report(result: dict[str, Any]) -> str:
    """A table: rank, stage, dp rank, measured vs predicted peak and step time, error %."""
    head = ["rank", "stage", "dp", "peak measured", "peak predicted", "err", "time measured", "time predicted", "err"]
    rows = []
    for r in result.get("ranks", []):
        mt, pt = r.get("measured_step_time_s"), r.get("predicted_step_time_s")
        rows.append([
            str(r["rank"]), str(r["stage"]), str(r["dp_rank"]),
            _gib(r.get("measured_peak_bytes")), _gib(r.get("predicted_peak_bytes")),
            _err(r.get("measured_peak_bytes"), r.get("predicted_peak_bytes")),
            "-" if mt is None else f"{mt * 1e3:.1f} ms", "-" if pt is None else f"{pt * 1e3:.1f} ms",
            _err(mt, pt),
        ])
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in rows]
    losses = result.get("losses") or []
    if losses:
        lines.append("losses: " + ", ".join(f"{x:.6f}" for x in losses))
    return "\n".join(lines)
