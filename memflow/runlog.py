"""An append-only log of executed runs: each rank's prediction beside its measurement.

When ``$MEMFLOW_RUN_LOG`` names a file, every run the executor completes
(:func:`memflow.executor.run_plan`, so ``memflow run`` and the benchmarks too)
appends one JSON line: when, the model file and the ``MEMFLOW_*`` settings it
was built under, batch, strategy, precision, steps, and per rank the measured
and predicted peak bytes and step time (predicted figures are ``null`` where
the run was launched without a plan's prediction). ``$MEMFLOW_RUN_LOG_SOURCE``
labels the lines (the benchmarks name themselves). ``python -m bench
prediction`` gathers these logs into one prediction-vs-execution table.

A log that cannot be written warns and never fails the run it describes.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import warnings
from pathlib import Path
from typing import Any

from .modelenv import model_env

__all__ = ["record", "read"]


def record(config: Any, report: Any) -> None:
    """Append ``report`` (a finished run of ``config``: a RunConfig and its RunReport) to
    ``$MEMFLOW_RUN_LOG``, if set."""
    path = os.environ.get("MEMFLOW_RUN_LOG")
    if not path or not report.ranks:
        return
    line = {
        "at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "source": os.environ.get("MEMFLOW_RUN_LOG_SOURCE", ""),
        "model_file": str(config.model_file),
        "env": model_env(),
        "batch_size": config.batch_size,
        "strategy": config.strategy.to_dict(),
        "dtype": config.dtype,
        "granularity": config.granularity,
        "steps": config.steps,
        "warmup": config.warmup,
        "ranks": [{k: getattr(r, k) for k in ("rank", "measured_peak_bytes", "predicted_peak_bytes",
                                              "measured_step_time_s", "predicted_step_time_s")}
                  for r in report.ranks],
    }
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
    except OSError as e:
        warnings.warn(f"could not append to the run log {path}: {e}", stacklevel=2)


def read(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of a run log (a missing file has none; a torn last line is skipped)."""
    out = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return out
    for ln in text.splitlines():
        try:
            out.append(json.loads(ln))
        except ValueError:
            continue
    return out
