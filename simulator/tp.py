"""Tensor parallelism in the simulator: the group's collectives in node times, figures per rank.

A graph captured for ``tp`` > 1 (:mod:`memflow.graph.tp`) is one rank's share of the
step: its memory and compute figures are per rank already. The simulator runs it on
the grouped cluster (:meth:`memflow.cluster.Cluster.grouped`: a device per
tensor-parallel group, every group inside one machine) and adds each node's
collectives to its times: Megatron's all-reduces block the compute stream (the
next op reads their result), so they are not overlapped. Each is a ring all-reduce
on the machine's device link: ``2 (tp-1)/tp · bytes / β + 2 (tp-1) α``. A recompute
replays the forward, collectives included (the node's forward time is what a
replay costs); a selective node's replay runs them again as well.
"""
from __future__ import annotations

import copy
import dataclasses

from memflow.graph.record import TaskGraph

__all__ = ["with_tp_comm", "allreduce_s", "expand_devices"]


def allreduce_s(nbytes: float, calls: int, tp: int, bandwidth: float, latency: float) -> float:
    """Seconds of ``calls`` ring all-reduces moving ``nbytes`` in all over ``tp`` ranks."""
    if tp <= 1 or calls <= 0:
        return 0.0
    return 2 * (tp - 1) / tp * nbytes / bandwidth + 2 * (tp - 1) * latency * calls


def with_tp_comm(graph: TaskGraph, link) -> TaskGraph:
    """A copy of ``graph`` whose node times include their tensor-parallel collectives on ``link``."""
    tp = graph.tp
    g = copy.copy(graph)
    nodes = []
    for nd in graph.nodes:
        f = allreduce_s(nd.tp_fwd_bytes, nd.tp_fwd_collectives, tp, link.bandwidth, link.latency)
        b = allreduce_s(nd.tp_bwd_bytes, nd.tp_bwd_collectives, tp, link.bandwidth, link.latency)
        if not (f or b):
            nodes.append(nd)
            continue
        ch = dict(fwd_time_s=nd.fwd_time_s + f, bwd_time_s=nd.bwd_time_s + b)
        if nd.cpu_swap_fwd_time_s >= 0:
            ch.update(cpu_swap_fwd_time_s=nd.cpu_swap_fwd_time_s + f, cpu_swap_bwd_time_s=nd.cpu_swap_bwd_time_s + b)
        if nd.sel_replay_time_s >= 0:
            ch.update(sel_replay_time_s=nd.sel_replay_time_s + f)
        nodes.append(dataclasses.replace(nd, **ch))
    g.nodes = nodes
    return g


def expand_devices(values: list, tp: int) -> list:
    """Per grouped device -> per real device (each group's ``tp`` ranks alike)."""
    return [v for v in values for _ in range(tp)]
