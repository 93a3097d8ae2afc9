"""SimResult: the simulator's prediction for one strategy, with exports."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["SimResult", "Evaluation"]

STREAMS = ("compute", "comm", "host")


@dataclass
class Evaluation:
    """The lightweight answer the search uses (``Simulator.evaluate(detail=False)``)."""

    step_time_s: float
    peak_bytes: list  # per device
    fits: bool
    capacity_bytes: int
    host_fits: bool = True

    @property
    def max_peak_bytes(self) -> int:
        return max(self.peak_bytes)


@dataclass
class SimResult:
    """Predicted step of one strategy on one cluster (bytes, seconds).

    ``breakdown[d]`` splits device ``d``'s peak into params, grads, optimizer,
    activations (this micro-batch's live buffers + the batch input),
    inflight_microbatches (other micro-batches' retained activations),
    swap_buffers (prefetched swapped buffers), transient; they sum to the peak.
    ``memory_curve[d]`` is ``(times, bytes)`` arrays; ``busy[d]`` maps stream
    (compute, comm, host) to busy seconds.
    """

    step_time_s: float
    peak_bytes: list
    capacity_bytes: list
    fits: bool
    breakdown: list = field(default_factory=list)
    memory_curve: list = field(default_factory=list)
    busy: list = field(default_factory=list)
    binding: str = ""
    host_bytes: list = field(default_factory=list)  # per machine
    host_capacity_bytes: int = 0
    pipeline_time_s: float = 0.0  # end of the last forward/backward op (before all-reduce / optimizer)
    end_s: list = field(default_factory=list)  # per device: when its own step ends (the step is the max)
    bubble_fraction: float = 0.0  # 1 - compute busy in the pipeline / (pp × pipeline_time_s)
    events: list = field(default_factory=list)  # (device, stream, name, start, dur)
    strategy: Any = None

    @property
    def max_peak_bytes(self) -> int:
        return max(self.peak_bytes)

    def to_chrome_trace(self, path: str) -> None:
        """Write a Chrome trace JSON (open in https://ui.perfetto.dev)."""
        ev: list[dict] = []
        for d in range(len(self.peak_bytes)):
            ev.append({"ph": "M", "name": "process_name", "pid": d, "tid": 0, "args": {"name": f"device {d}"}})
            for tid, sname in enumerate(STREAMS):
                ev.append({"ph": "M", "name": "thread_name", "pid": d, "tid": tid, "args": {"name": sname}})
        for d, stream, name, start, dur in self.events:
            ev.append({"ph": "X", "name": name, "pid": d, "tid": STREAMS.index(stream), "ts": start * 1e6,
                       "dur": max(dur, 0.0) * 1e6, "cat": stream})
        for d, (times, nbytes) in enumerate(self.memory_curve):
            for t, b in zip(times.tolist(), nbytes.tolist()):
                ev.append({"ph": "C", "name": "memory", "pid": d, "ts": t * 1e6, "args": {"MiB": b / 2**20}})
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"traceEvents": ev, "displayTimeUnit": "ms"}, f)

    def summary(self) -> str:
        gib = 2**30
        lines = [f"step {self.step_time_s * 1e3:.3f} ms, fits {self.fits}; binding: {self.binding}"]
        for d, p in enumerate(self.peak_bytes):
            lines.append(f"  device {d}: peak {p / gib:.3f} / {self.capacity_bytes[d] / gib:.3f} GiB")
        return "\n".join(lines)


def curve_arrays(points: list) -> tuple[np.ndarray, np.ndarray]:
    if not points:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    points.sort(key=lambda x: x[0])
    t = np.array([p[0] for p in points], dtype=float)
    b = np.array([p[1] for p in points], dtype=np.int64)
    return t, b
