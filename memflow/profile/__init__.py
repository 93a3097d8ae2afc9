"""Costs per node: memory by tracing, time measured here or predicted by roofline.

:func:`profile_model` is the one entry point: it returns the TaskGraph of a
model file's training step with every node's memory and time costed for a
device — measured on this host when the device is ``cpu`` (real tensors,
wall time), predicted from FLOPs and bytes under fake tensors for a named GPU.
Results are cached on disk by model file content, batch, precision, node
granularity and device.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import torch

from ..graph.build import capture_graph
from ..graph.record import TaskGraph
from .cache import ProfileCache
from .roofline import predict_times

__all__ = ["profile_model", "cache_key", "ProfileCache"]


def cache_key(spec: Any, batch_size: int, dtype: str, granularity: Any, device_name: str,
              measure: bool) -> str | None:
    """The cache key of a profile, or None when the model has no file to hash (an in-memory module)."""
    if not Path(spec.path).is_file():
        return None
    h = hashlib.sha256()
    h.update(Path(spec.path).read_bytes())
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("MEMFLOW_") and k != "MEMFLOW_CACHE_DIR")
    h.update(repr((batch_size, dtype, str(granularity), device_name, measure, torch.__version__,
                   torch.get_num_threads(), env)).encode())
    return f"{spec.name}-b{batch_size}-{dtype}-{device_name}-{h.hexdigest()[:16]}"


def profile_model(spec: Any, batch_size: int | None = None, *, device: Any = "cpu", dtype: str = "fp32",
                  granularity: str | int = "auto", measure: bool | None = None,
                  cache: ProfileCache | bool = True) -> TaskGraph:
    """The costed TaskGraph of ``spec``'s step at ``batch_size`` for ``device``.

    ``device``: a DeviceSpec or a device name (``configs/devices``). On a
    ``cpu`` device costs are measured by default (``measure=True``: real
    tensors on this host); otherwise memory comes from a fake-tensor trace
    and times from the roofline model. ``measure=False`` on ``cpu`` predicts
    CPU times by roofline instead.
    """
    from ..devices import load_device

    dev = load_device(device) if isinstance(device, str) else device
    batch_size = batch_size or spec.batch_size
    if measure is None:
        measure = dev.kind == "cpu"
    store = cache if isinstance(cache, ProfileCache) else (ProfileCache() if cache else None)
    key = cache_key(spec, batch_size, dtype, granularity, dev.name, measure)

    def compute() -> TaskGraph:
        g = capture_graph(spec, batch_size, dtype=dtype, granularity=granularity, measure=measure,
                          accounted=measure and dev.kind == "cpu")
        if not measure:
            g = predict_times(g, dev, dtype)
        return g

    return store.get_or_compute(key, compute) if store and key else compute()
