"""The CUDA caching allocator's own event trace of a run, for modelling reserved memory.

With ``MEMFLOW_CUDA_ALLOC_TRACE=DIR`` set, each CUDA rank records the allocator's history
(``torch.cuda.memory._record_memory_history``, no stack frames) from before its model is built to
the end of its steps and writes ``DIR/rank{N}.json.gz``: every event as ``[action, addr, size,
stream]`` (actions ``alloc``, ``free_requested``, ``free_completed``, ``segment_map``,
``segment_unmap``, ``segment_alloc``, ``segment_free``, ``oom``), the index of the first event of the
timed steps (where the peaks were reset), and the allocator's peaks. ``python -m bench gpu`` sets it
per plan; what the trace is for is in :mod:`memflow.gpumem`. Without CUDA, or unset, nothing happens.
"""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import torch

__all__ = ["ENV", "AllocTrace"]

ENV = "MEMFLOW_CUDA_ALLOC_TRACE"
MAX_EVENTS = 3_000_000


class AllocTrace:
    """One rank's recording (a no-op unless the variable is set and the device is CUDA)."""

    def __init__(self, device: torch.device, rank: int):
        self.dir = os.environ.get(ENV) if device.type == "cuda" else None
        self.device, self.rank, self.timed_from = device, rank, None
        if self.dir:  # pragma: no cover - needs a GPU
            torch.cuda.memory._record_memory_history("all", context=None, stacks="python", max_entries=MAX_EVENTS,
                                                     device=device)

    def _events(self) -> list:  # pragma: no cover - needs a GPU
        snap = torch.cuda.memory._snapshot(self.device)
        traces = snap.get("device_traces") or []
        return traces[self.device.index or 0] if len(traces) > (self.device.index or 0) else []

    def mark_timed(self) -> None:
        """The timed steps start here (called where the peaks are reset)."""
        if self.dir:  # pragma: no cover - needs a GPU
            self.timed_from = len(self._events())

    def dump(self) -> None:
        if not self.dir:
            return
        try:  # pragma: no cover - needs a GPU
            ev = [[e.get("action"), int(e.get("addr", 0)), int(e.get("size", 0)), int(e.get("stream", 0))]
                  for e in self._events()]
            torch.cuda.memory._record_memory_history(None)
            out = Path(self.dir)
            out.mkdir(parents=True, exist_ok=True)
            data = dict(rank=self.rank, timed_from=self.timed_from, events=ev,
                        alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                        peak_allocated=int(torch.cuda.max_memory_allocated(self.device)),
                        peak_reserved=int(torch.cuda.max_memory_reserved(self.device)),
                        stats={k: int(v) for k, v in torch.cuda.memory_stats(self.device).items()
                               if isinstance(v, (int, float)) and ("all" in k or "." not in k)})
            with gzip.open(out / f"rank{self.rank}.json.gz", "wt") as f:
                json.dump(data, f)
        except Exception as e:  # noqa: BLE001 - a diagnostic must not fail the run
            print(f"memflow: the allocator trace was not written ({' '.join(str(e).split())[:200]})", flush=True)
