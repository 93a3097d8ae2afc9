"""How a value crosses a pipeline cut: the layout it travels in, and the copy that costs.

One rule for the executor (:mod:`memflow.executor.comm`, which sends) and the profiler
(:mod:`memflow.profile.sendcopy`, which records what each cut's sends copy, for the simulator):

* a contiguous tensor travels as it is;
* a dense tensor whose strides are a permutation of a contiguous layout (a transposed view) travels
  as its memory, in memory order: no copy;
* a broadcast (``expand``: stride 0, its storage smaller than its elements) that needs no gradient
  travels as its storage: no copy;
* a value that is the very tensor an earlier value of the same send is (autograd's add hands both
  its inputs one gradient) travels once, and arrives as one tensor under both names: sent twice, a
  stage received two tensors where the step held one (a wav2vec2 stage, 40,448 bytes under its plan);
  a gradient that is the same elements of the same storage in another dense layout (the add's one
  gradient, transposed for a value sent before the transpose) travels once too, and arrives as a view
  of that one in its own layout (a Data2VecAudio stage whose positional convolution's output is sent
  beside the hidden states it is added to: 40,704 bytes under per micro-batch);
* anything else, a view of part of a storage (a slice of the last dimension, one piece of a
  concatenation's gradient), travels as a contiguous copy of its own elements: a buffer beside the
  storage, held until the send completes (a forward's: until the micro-batch's backward starts; a
  gradient's: until the stage's next pass starts).
"""
from __future__ import annotations

import torch

__all__ = ["memory_order", "broadcast_storage", "send_copy_bytes", "aliases"]


def memory_order(t: torch.Tensor) -> tuple[int, ...] | None:
    """The permutation of ``t``'s dimensions that makes it contiguous without a copy (its memory
    order), or None where no permutation does (a view of part of a storage, overlapping strides)."""
    size, stride = t.shape, t.stride()
    perm = tuple(sorted(range(t.dim()), key=lambda d: (-stride[d], d)))
    # (from the sizes and strides alone: no op runs, so a profiler's dispatch mode sees no read of ``t``)
    step = 1
    for d in reversed(perm):
        if size[d] != 1 and stride[d] != step:
            return None
        step *= size[d]
    return perm


def broadcast_storage(t: torch.Tensor) -> int | None:
    """Elements of ``t``'s storage where ``t`` is a broadcast over it (fewer than its own elements:
    it travels as that storage when it needs no gradient), else None."""
    numel = t.untyped_storage().nbytes() // t.element_size()
    return numel if numel < t.numel() else None


def send_copy_bytes(t, requires_grad: bool) -> int:
    """Bytes of the contiguous copy a send of ``t`` makes (0: it travels as it is). ``requires_grad``:
    whether a gradient comes back for it (a broadcast that needs one is sent as a copy of its elements)."""
    if not isinstance(t, torch.Tensor) or t.is_contiguous() or memory_order(t) is not None:
        return 0
    if not requires_grad and broadcast_storage(t) is not None:
        return 0
    return t.numel() * t.element_size()


def aliases(values: list, views: bool = False) -> list:
    """Per value, the index of an earlier one that is the same tensor (the same elements of the same
    storage, laid out alike), else None: it travels once (see the module docstring). ``views`` (the
    gradients sent back): also one whose elements are the same in another dense layout, as
    ``[index, strides]``: received as a view of that one with those strides."""
    out: list = []
    seen: dict[tuple, int] = {}
    dense: dict[tuple, int] = {}
    for i, t in enumerate(values):
        key = None
        if isinstance(t, torch.Tensor) and t.numel():
            ptr = t.untyped_storage().data_ptr()
            key = (ptr, t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
            if key not in seen and views and memory_order(t) is not None:
                same = dense.get((ptr, t.storage_offset(), t.numel(), t.dtype))
                if same is not None:
                    out.append([same, list(t.stride())])
                    continue
        out.append(seen.get(key) if key is not None else None)
        if key is not None and key not in seen:
            seen[key] = i
            if views and memory_order(t) is not None:
                dense.setdefault((ptr, t.storage_offset(), t.numel(), t.dtype), i)
    return out
