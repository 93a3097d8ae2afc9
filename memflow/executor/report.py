"""What a run reports: per rank, measured beside predicted (records and a table).

The workers gather one :class:`RankReport` per rank; rank 0 writes the
:class:`RunReport` as JSON (``to_data``) and the launcher reads it back
(``from_data``, every field's type checked). ``memflow run --json`` prints it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..typed import from_data

__all__ = ["RankReport", "RunReport", "format_report", "read_report"]


@dataclass
class RankReport:
    """One rank's run: its memory and time, measured and as the plan predicted them (None: no prediction)."""

    rank: int
    stage: int
    dp_rank: int
    nodes: list[int]  # [first, last + 1) of the stage's nodes
    measured_peak_bytes: int
    peak_at: str  # where in the step the measured peak was reached
    host_peak_bytes: int  # host copies (swap, a host optimizer) at their peak
    predicted_peak_bytes: int | None
    measured_step_time_s: float | None  # median after the warm-up steps
    predicted_step_time_s: float | None
    step_times_s: list[float] = field(default_factory=list)  # every step, warm-up included
    losses: list[float] = field(default_factory=list)  # the last stage's per-step losses
    measured_parts_s: dict[str, float] = field(default_factory=dict)  # forward, backward, grad_sync, optimizer
    cuda_peak_allocated_bytes: int | None = None  # the caching allocator's view (CUDA runs)
    cuda_peak_reserved_bytes: int | None = None
    cuda_alloc_conf: str | None = None  # PYTORCH_CUDA_ALLOC_CONF as the rank ran
    cuda_predicted_reserved_bytes: int | None = None  # the plan's (memflow.reserved), else gpumem.reserved_bytes
    tp_rank: int = 0  # its index in its tensor-parallel group
    # the peak bytes at each place of the measured steps (after the warm-up), by where (as peak_at names it:
    # "forward of node 3 (h.0), micro-batch 0"): checkable against the plan's per-phase figures
    # (simulator.core.Simulator.phase_bytes)
    phase_peaks: dict[str, int] = field(default_factory=dict)


@dataclass
class RunReport:
    """A completed run (rank 0's gathered report)."""

    model_file: str
    batch_size: int
    microbatch_size: int
    world_size: int
    strategy: dict[str, Any]
    node_names: list[str]
    first_step: int
    steps: list[int]
    losses: list[float]  # per step, averaged over the last stage's data-parallel ranks
    backend: str  # gloo | nccl
    capacity_bytes: int | None
    measured_step_time_s: float  # the slowest rank's
    predicted_step_time_s: float | None
    ranks: list[RankReport]
    teardown_failure: str = ""  # a process that died after the report was written


def read_report(data: Any, source: str = "run report") -> RunReport:
    """A RunReport from its JSON data (every field checked)."""
    return from_data(RunReport, data, source)


def _mib(b: Any) -> str:
    return "-" if b is None else f"{b / 2**20:.2f} MiB"


def _err(measured: Any, predicted: Any) -> str:
    if measured is None or not predicted:
        return "-"
    return f"{100.0 * (predicted - measured) / measured:+.1f}%" if measured else "-"


def format_report(result: RunReport) -> str:
    """A table: rank, stage, dp rank, measured vs predicted peak and step time, error %."""
    tp = any(r.tp_rank for r in result.ranks)
    head = ["rank", "stage", "dp"] + ["tp"] * tp + ["peak measured", "peak predicted", "err", "time measured",
                                                   "time predicted", "err"]
    rows = []
    cuda = any(r.cuda_peak_reserved_bytes is not None for r in result.ranks)
    if cuda:  # the caching allocator's view: what the GPU holds for the tensors
        head += ["allocated", "reserved", "reserved predicted", "err"]
    for r in result.ranks:
        mt, pt = r.measured_step_time_s, r.predicted_step_time_s
        rows.append([
            str(r.rank), str(r.stage), str(r.dp_rank)] + [str(r.tp_rank)] * tp + [
            _mib(r.measured_peak_bytes), _mib(r.predicted_peak_bytes),
            _err(r.measured_peak_bytes, r.predicted_peak_bytes),
            "-" if mt is None else f"{mt * 1e3:.1f} ms", "-" if pt is None else f"{pt * 1e3:.1f} ms",
            _err(mt, pt),
        ] + ([_mib(r.cuda_peak_allocated_bytes), _mib(r.cuda_peak_reserved_bytes),
              _mib(r.cuda_predicted_reserved_bytes), _err(r.cuda_peak_reserved_bytes, r.cuda_predicted_reserved_bytes)]
             if cuda else []))
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in rows]
    if result.losses:
        lines.append("losses: " + ", ".join(f"{x:.6f}" for x in result.losses))
    return "\n".join(lines)
