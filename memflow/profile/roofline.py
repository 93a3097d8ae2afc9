"""Predict node times on a device one does not have: a two-class roofline.

A phase's compute-bound part (ops with a FLOP formula: matmuls, convolutions,
attention) runs at ``peak_flops(dtype) × compute_efficiency``; its
memory-bound part (the bytes every other op reads and writes) at
``mem_bandwidth × memory_efficiency``; each op also pays a kernel-launch
overhead. The optimizer step is memory-bound: it reads and writes parameters,
gradients and optimizer state. The efficiencies are stated in each device
spec (``configs/devices/NAME.yaml``), so every prediction is checkable.
"""
from __future__ import annotations

import copy

from ..graph.record import TaskGraph

__all__ = ["predict_times", "phase_time", "replay_share", "LAUNCH_OVERHEAD_S", "CPU_FLOPS_PER_BYTE"]

#: seconds per kernel launch on a GPU (a typical CUDA launch + framework overhead)
LAUNCH_OVERHEAD_S = 4e-6
#: a CPU's FLOP/s over its memory bandwidth (bytes/s): what a measured forward's time is split by
CPU_FLOPS_PER_BYTE = 10.0


def phase_time(flops: float, mem_bytes: float, ops: int, device, dtype: str = "fp32") -> float:
    """Seconds for a phase with ``flops`` compute-bound FLOPs and ``mem_bytes`` memory-bound bytes."""
    launch = LAUNCH_OVERHEAD_S if device.kind == "gpu" else 0.0
    return flops / device.effective_flops(dtype) + mem_bytes / device.effective_mem_bandwidth + ops * launch


def predict_times(graph: TaskGraph, device, dtype: str | None = None) -> TaskGraph:
    """A copy of ``graph`` whose node times are predicted for ``device`` (a DeviceSpec)."""
    dtype = dtype or graph.dtype
    g = copy.deepcopy(graph)
    for nd in g.nodes:
        nd.fwd_time_s = phase_time(nd.fwd_flops, nd.fwd_bytes_accessed, nd.op_count, device, dtype)
        # backward runs about twice the ops of forward
        nd.bwd_time_s = phase_time(nd.bwd_flops, nd.bwd_bytes_accessed, 2 * nd.op_count, device, dtype)
        if nd.sel_saved_bytes >= 0:  # a selective node's replay: its cheap ops' forward again
            nd.sel_replay_time_s = phase_time(nd.sel_replay_flops, nd.sel_replay_bytes_accessed, nd.sel_replay_ops,
                                              device, dtype)
    state = sum(nd.param_bytes + nd.grad_bytes + 2 * nd.optimizer_bytes for nd in g.nodes)
    n_params = sum(len(nd.param_names) for nd in g.nodes)
    g.opt_time_s = phase_time(0.0, float(state), n_params, device, dtype)
    g.device = device.name
    g.time_source = "predicted"
    return g


def replay_share(nd) -> float:
    """The share of node ``nd``'s forward time its ``selective`` replay takes (its cheap ops run
    again), where the forward's time was measured as a whole: each part costed as a CPU runs it
    (FLOPs, and bytes moved at :data:`CPU_FLOPS_PER_BYTE`)."""
    whole = nd.fwd_flops + CPU_FLOPS_PER_BYTE * nd.fwd_bytes_accessed
    part = nd.sel_replay_flops + CPU_FLOPS_PER_BYTE * nd.sel_replay_bytes_accessed
    return min(1.0, part / whole) if whole > 0 else 1.0
