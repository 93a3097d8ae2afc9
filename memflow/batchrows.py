"""A batch that does not split by rows is trained whole: one data-parallel rank, one micro-batch.

Data parallelism and micro-batches take a step's batch by rows: each flat input whose leading dimension
is the batch is cut into equal contiguous pieces, every other input is read whole by each piece
(``memflow.executor.worker``). A graph batch written as PyTorch Geometric does it (node features of every
graph stacked, ``edge_index`` ``(2, E)`` numbering the nodes of the whole batch, a node-to-graph map of
``N·B`` entries) grows with the batch along no leading batch dimension: split by rows, each piece read the
whole batch's edges against its own nodes (a GNN's run stopped on "IndexError: index out of range" on a
plan with micro-batches). :func:`unsplit_inputs` finds such inputs by building the example batch at two
sizes in fake mode (no memory), or, where it reads values fake tensors do not have (a watch history's
ids flattened for ``EmbeddingBag``, as many as ``int(lengths.sum())``), with real tensors at two small
sizes: a tensor whose shape changes with the batch other than as its leading dimension. :func:`whole_batch`
then bounds the search to dp 1 and one micro-batch (warned once), and a request for more is one clear error.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import keystr, tree_flatten_with_path

from .errors import ConfigError
from .inflight import warn_once

__all__ = ["unsplit_inputs", "whole_batch", "check_split"]


def unsplit_inputs(spec: Any, batch_size: int) -> list[str]:
    """The batch's inputs that grow with the batch but not by rows, each as ``name (shape at
    batch_size, shape at half of it)``; empty where every input splits (or the batch cannot be built at
    all: then nothing is known and nothing is bounded)."""
    if batch_size < 2:
        return []
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            big, small = (tree_flatten_with_path(spec.batch(b))[0] for b in (batch_size, batch_size // 2))
    except Exception:  # noqa: BLE001 - an example_batch that reads values (numpy, .item()): real, small
        batch_size = min(batch_size, 4)
        try:
            big, small = (tree_flatten_with_path(spec.batch(b))[0] for b in (batch_size, batch_size // 2))
        except Exception:  # noqa: BLE001 - the model file's own error is met where the batch is built
            return []
    if len(big) != len(small):
        return []
    out = []
    for (path, a), (_, b) in zip(big, small):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape == b.shape:
            continue
        if a.dim() > 0 and a.shape[0] == batch_size and b.dim() == a.dim() and b.shape[0] == batch_size // 2 \
                and a.shape[1:] == b.shape[1:]:
            continue
        out.append(f"{keystr(path).strip('[]') or 'the batch'} {tuple(a.shape)} at batch {batch_size}, "
                   f"{tuple(b.shape)} at {batch_size // 2}")
    return out


def _why(bad: list[str]) -> str:
    what = " and ".join(bad[:2]) + (f" and {len(bad) - 2} more" if len(bad) > 2 else "")
    many = len(bad) > 1
    return (f"batch input{'s' if many else ''} {what} grow{'' if many else 's'} with the batch but not by rows "
            "(the leading dimension), so the batch cannot be split among data-parallel ranks or micro-batches")


def whole_batch(spec: Any, batch_size: int, limits: Any) -> Any:
    """``limits`` (a MeshLimits) bounded to dp 1 and one micro-batch where the batch does not split by
    rows (module docstring), warned once; a fixed dp or micro-batch count above one is a ConfigError."""
    bad = unsplit_inputs(spec, batch_size)
    if not bad:
        return limits
    if (limits.dp or 1) > 1 or (limits.microbatches or 1) > 1:
        raise ConfigError(f"{spec.name}'s {_why(bad)}; plan it with dp 1 and one micro-batch (or give every "
                          "input the batch as its leading dimension)")
    warn_once(spec.name, f"{_why(bad)}: planned with dp 1 and one micro-batch per step")
    return dataclasses.replace(limits, dp=1, max_microbatches=1)


def check_split(spec: Any, batch_size: int, dp: int, microbatches: int) -> None:
    """A ConfigError where a plan splits the batch (dp or micro-batches above one) and it does not split by
    rows: the executor's check before its first step (a plan written by hand, or for another batch; each
    piece would read the whole batch's edges against its own nodes)."""
    if dp * microbatches > 1:
        bad = unsplit_inputs(spec, batch_size)
        if bad:
            raise ConfigError(f"{spec.name}'s {_why(bad)}, and the plan has dp {dp} and {microbatches} "
                              "micro-batch(es); run it with dp 1 and one micro-batch (memflow plan bounds its "
                              "search so), or give every input the batch as its leading dimension")
