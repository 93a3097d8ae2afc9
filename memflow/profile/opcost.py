"""Per-phase FLOPs and bytes accessed, counted op by op under a dispatch mode.

FLOPs come from PyTorch's own formulas (``torch.utils.flop_counter``); bytes
accessed are the bytes of an op's tensor inputs plus outputs (views and
metadata-only ops move nothing). Both feed the roofline model that predicts a
node's time on a GPU one does not have.
"""
from __future__ import annotations

from collections import defaultdict

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry, sdpa_backward_flop_count, sdpa_flop_count

from ..memory import tensors_in

__all__ = ["OpCost"]

_FREE = {"detach", "alias", "_unsafe_view", "lift_fresh", "_assert_tensor_metadata", "sym_size", "sym_stride"}


def _cpu_flash_fwd(q, k, v, *args, **kwargs) -> int:
    return sdpa_flop_count(q.shape, k.shape, v.shape)


def _cpu_flash_bwd(grad_out, q, k, v, *args, **kwargs) -> int:
    return sdpa_backward_flop_count(grad_out.shape, q.shape, k.shape, v.shape)


# CPU attention kernels PyTorch's registry does not cover (same math as the CUDA ones)
_EXTRA = {
    "_scaled_dot_product_flash_attention_for_cpu": _cpu_flash_fwd,
    "_scaled_dot_product_flash_attention_for_cpu_backward": _cpu_flash_bwd,
}


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class OpCost(TorchDispatchMode):
    """Accumulate FLOPs, memory-bound bytes and op counts per phase (``self.phase``).

    ``bytes`` counts the tensor bytes read and written by ops that have no FLOP
    formula (elementwise, reductions, copies, embedding lookups): the
    memory-bound part of a phase. Ops with a FLOP formula (matmuls,
    convolutions, attention) count as compute-bound.
    """

    def __init__(self):
        super().__init__()
        self.phase = 0
        self.flops: dict[int, float] = defaultdict(float)
        self.bytes: dict[int, float] = defaultdict(float)
        self.ops: dict[int, int] = defaultdict(int)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.count(func, args, kwargs, out)
        return out

    def count(self, func, args, kwargs, out) -> None:
        """Count one op that returned ``out`` (also usable as ``LiveBytes(after=...)``)."""
        packet = func._overloadpacket
        if func.is_view or packet.__name__ in _FREE:
            return
        p = self.phase
        self.ops[p] += 1
        fn = flop_registry.get(packet)
        extra = _EXTRA.get(packet.__name__)
        try:
            if fn is not None:
                self.flops[p] += float(fn(*args, **kwargs, out_val=out))
                return
            if extra is not None:
                self.flops[p] += float(extra(*args, **kwargs))
                return
        except Exception:  # noqa: BLE001 - a formula that cannot handle an overload: count bytes
            pass
        outs = tensors_in(out)
        if not outs:  # metadata queries (prim.device, sizes) move nothing
            self.ops[p] -= 1
            return
        moved = 0
        for t in tensors_in((args, kwargs)):
            moved += _nbytes(t)
        for t in outs:
            moved += _nbytes(t)
        self.bytes[p] += moved
