"""Data-parallel gradient buckets: one rule for the executor and the simulator.

During the last micro-batch's backward a stage all-reduces its parameters' gradients over its
data-parallel group in buckets (what ``DistributedDataParallel`` does internally). The executor
(:class:`memflow.executor.grads.BucketedAllReduce`) forms them by :func:`grad_buckets`, and the
simulator times and sizes them by it, so the two agree on every bucket:

* a parameter's gradient is final once the backward of the first node that reads it has run
  (its *owner*); the parameters are taken in backward order — owners from the stage's last node
  to its first, each owner's in the order it reads them;
* a gradient of at least ``cap`` bytes is a bucket of its own; the others fill a bucket until
  the next one would take it over ``cap`` or is of another dtype (both tell the dtypes apart by
  :func:`dtype_kind`, the simulator from the parameter table's fifth field: a Fourier operator's
  complex weights beside real ones, bucketed as one, moved the ZeRO-2 syncs to other nodes, 608
  bytes under);
* a bucket of several gradients is flattened into one new tensor and all-reduced; the gradients
  become views of it (the originals die), so the copy costs its bytes only while it is made,
  beside the gradients. A bucket of one gradient is all-reduced in place: no copy;
* a bucket is all-reduced once the backward of the node that makes its last gradient final has
  run, i.e. between two nodes' backwards, or after the stage's backward for its first node.

The copies are what gradient sync adds to a stage's memory: at most one bucket's (≤ ``cap``)
beside what is live between two backwards, and after the backward beside the gradients.
"""
from __future__ import annotations

import zlib
from collections.abc import Hashable, Sequence

__all__ = ["grad_buckets", "dtype_kind", "element_size"]

#: the dtypes :func:`dtype_kind` numbers (a parameter table's fifth field); any other gets a number past them
_KINDS = ("float32", "bfloat16", "float16", "float64", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2")
_SIZES = (4, 2, 2, 8, 8, 16, 1, 1)  # bytes per element of each of _KINDS


def dtype_kind(dtype) -> int:
    """A number for ``dtype`` (a ``torch.dtype`` or its name) the same in every process: a gradient bucket
    holds one kind."""
    name = str(dtype).removeprefix("torch.")
    return _KINDS.index(name) if name in _KINDS else len(_KINDS) + zlib.crc32(name.encode())


def element_size(kind: int) -> int:
    """Bytes per element of the dtype :func:`dtype_kind` numbered ``kind`` (4 for one it does not name): what
    a ZeRO-2 bucket or a ZeRO-3 unit is padded in (to a multiple of ``dp`` elements)."""
    return _SIZES[kind] if 0 <= kind < len(_SIZES) else 4


def grad_buckets(grads: Sequence[Sequence[tuple[int, Hashable]]], cap: int) -> list[tuple[int, list[tuple[int, int]]]]:
    """The buckets of a stage whose local node ``x`` owns the gradients ``grads[x]``, each as
    ``(bytes, kind)`` (gradients of different kinds never share a bucket: the executor's dtypes).
    Returns ``[(x, members), ...]`` in the order they are all-reduced: ``x`` the local node after
    whose backward the bucket is all-reduced, ``members`` its gradients as ``(owner, index into
    grads[owner])``."""
    out: list[tuple[int, list[tuple[int, int]]]] = []
    cur: list[tuple[int, int]] = []
    acc, kind = 0, None
    for x in range(len(grads) - 1, -1, -1):
        for i, (nb, k) in enumerate(grads[x]):
            if nb >= cap:
                out.append((x, [(x, i)]))
                continue
            if cur and (acc + nb > cap or k != kind):
                out.append((cur[-1][0], cur))
                cur, acc = [], 0
            cur.append((x, i))
            acc += nb
            kind = k
    if cur:
        out.append((cur[-1][0], cur))
    out.sort(key=lambda b: -b[0])  # (stable) a bucket closed late is ready when its last gradient is
    return out
