"""Costs per node: memory by tracing, time measured here or predicted by roofline.

:func:`profile_model` is the entry point: it returns the TaskGraph of a
model file's training step with every node's memory and time costed for a
device — measured on this host when the device is ``cpu`` (real tensors,
wall time), predicted from FLOPs and bytes under fake tensors for a named GPU.
Results are cached on disk by model file content, batch, precision, node
granularity, device (its figures, where times are predicted) and the
profiling code itself, and reused only while what the model file's build read
(its helper modules, data files and environment variables) is unchanged.
:func:`profile_models` gives the same graphs for several batch sizes, sharing
the work that does not depend on the batch size.
"""
from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import Any

import torch

from ..devices import load_device
from ..errors import ConfigError
from ..graph.record import TaskGraph
from ..graph.training import gpu_semantics
from .build import capture_graph, capture_graphs
from .cache import ProfileCache, ProfileKey
from .roofline import predict_times

__all__ = ["profile_model", "profile_models", "cache_key", "code_hash", "ProfileCache", "ProfileKey"]


_CODE_DIRS = ("graph", "profile")  # the packages whose code makes a costed graph
# and the modules outside them that it runs: the live-bytes counter, the model-file loader, the
# named choices (the swap hooks the CPU executor uses are memflow/graph/actions.py)
_CODE_FILES = ("memory.py", "model_file.py", "kinds.py")


@functools.lru_cache(maxsize=1)
def code_hash() -> str:
    """A hash of the source that captures and costs graphs: a cached profile made by other code
    (an older memflow) is not reused."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent
    files = [f for d in _CODE_DIRS for f in sorted((root / d).glob("*.py"))] + [root / f for f in _CODE_FILES]
    for f in files:
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def device_signature(dev: Any) -> str:
    """What a predicted graph's times depend on: the device's figures (not its memory size)."""
    if dev is None:
        return ""
    return repr((dev.kind, sorted(dev.peak_flops.items()), dev.mem_bandwidth, dev.compute_efficiency,
                 dev.memory_efficiency, dev.host_link_bandwidth))


def cache_key(spec: Any, batch_size: int, dtype: str, granularity: Any, device_name: str,
              measure: bool, device: Any = None) -> ProfileKey | None:
    """The cache key of a profile, or None when the model has no file to hash (an in-memory module).

    It covers the model file, the settings, torch, the ``MEMFLOW_*`` environment, the code that
    captures and costs graphs (:func:`code_hash`) and, for predicted costs, the device's figures.
    What else the model file's build reads (helper modules, data files, its own environment
    variables) is recorded beside each entry and checked before it is reused (:class:`ProfileKey`,
    :mod:`memflow.profile.deps`)."""
    if not Path(spec.path).is_file():
        return None
    h = hashlib.sha256()
    h.update(Path(spec.path).read_bytes())
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("MEMFLOW_") and k != "MEMFLOW_CACHE_DIR")
    h.update(repr((batch_size, dtype, str(granularity), spec.tp, spec.sequence, device_name, measure,
                   torch.__version__, torch.get_num_threads(), env, code_hash(),
                   "" if measure else device_signature(device))).encode())
    tp = f"-tp{spec.tp}{'' if spec.sequence else '-nosp'}" if spec.tp > 1 else ""
    return ProfileKey(f"{spec.name}-b{batch_size}{tp}-{dtype}-{device_name}-{h.hexdigest()[:16]}", str(spec.path),
                      batch_size)


def profile_model(spec: Any, batch_size: int | None = None, *, device: Any = "cpu", dtype: str = "fp32",
                  granularity: str | int = "auto", measure: bool | None = None,
                  cache: ProfileCache | bool = True) -> TaskGraph:
    """The costed TaskGraph of ``spec``'s step at ``batch_size`` for ``device``.

    ``device``: a DeviceSpec or a device name (``configs/devices``). On a
    ``cpu`` device costs are measured by default (``measure=True``: real
    tensors on this host); otherwise memory comes from a fake-tensor trace
    and times from the roofline model. ``measure=False`` on ``cpu`` predicts
    CPU times by roofline instead. ``measure=True`` on a GPU device measures on
    this host's GPU (CUDA events; memory as its live tensor bytes).
    """
    dev = load_device(device) if isinstance(device, str) else device
    batch_size = batch_size or spec.batch_size
    if measure is None:
        measure = dev.kind == "cpu"
    run_on = None
    if measure and dev.kind == "gpu":
        if not torch.cuda.is_available():
            raise ConfigError(f"measuring costs for {dev.name} needs a CUDA GPU on this host, and torch sees none; "
                              "drop --measure to predict them from FLOPs and bytes")
        run_on = "cuda"
    store = cache if isinstance(cache, ProfileCache) else (ProfileCache() if cache else None)
    key = cache_key(spec, batch_size, dtype, granularity, dev.name, measure, dev)

    def compute() -> TaskGraph:
        with gpu_semantics(dev.kind == "gpu" and not measure):  # a GPU's autocast, traced on the CPU
            g = capture_graph(spec, batch_size, dtype=dtype, granularity=granularity, measure=measure,
                              accounted=measure and dev.kind == "cpu", device=run_on)
        if not measure:
            g = predict_times(g, dev, dtype)
        return g

    return store.get_or_compute(key, compute) if store and key else compute()


def profile_models(spec: Any, batch_sizes: list[int], *, device: Any = "cpu", dtype: str = "fp32",
                   granularity: str | int = "auto", measure: bool | None = None,
                   cache: ProfileCache | bool = True, processes: int = 1) -> dict[int, TaskGraph]:
    """``{b: profile_model(spec, b, ...)}`` for every size, with the same cache entries.

    Sizes that are not cached are captured together in fake mode
    (:func:`memflow.profile.build.capture_graphs`: one model, one symbolic-batch
    export for every size >= 2, in up to ``processes`` forked processes) when
    costs are predicted; measured costs (``cpu``) are profiled one size at a
    time as by :func:`profile_model`.
    """
    dev = load_device(device) if isinstance(device, str) else device
    if measure is None:
        measure = dev.kind == "cpu"
    store = cache if isinstance(cache, ProfileCache) else (ProfileCache() if cache else None)
    sizes = list(dict.fromkeys(batch_sizes))
    if measure:
        return {b: profile_model(spec, b, device=dev, dtype=dtype, granularity=granularity, measure=True,
                                 cache=store if store else False) for b in sizes}
    keys = {b: cache_key(spec, b, dtype, granularity, dev.name, False, dev) for b in sizes}
    out: dict[int, TaskGraph] = {}
    for b in sizes:
        g = store.get(keys[b]) if store and keys[b] else None
        if g is not None:
            out[b] = g
    todo = [b for b in sizes if b not in out]
    if todo:
        first = keys[todo[0]] if store else None
        # what the model file's build reads is recorded beside the profiling, once the model is built
        on_built = (lambda: store.prepare(first)) if first else None
        with gpu_semantics(dev.kind == "gpu"):
            made = capture_graphs(spec, todo, dtype=dtype, granularity=granularity, processes=processes,
                                  on_built=on_built)
        for b, g in made.items():
            out[b] = predict_times(g, dev, dtype)
            if store and keys[b]:
                store.put(keys[b], out[b])
    return {b: out[b] for b in sizes}
