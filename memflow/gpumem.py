"""GPU memory as the caching allocator reserves it, from the simulator's live tensor bytes.

The simulator predicts a step's peak of *live tensor bytes* (what :class:`memflow.memory.LiveBytes`
counts). On a GPU the device holds more, in three parts, each from PyTorch's documented allocator
rules (``CUDACachingAllocator``; "CUDA semantics: memory management") and measured by ``python -m
bench gpu``:

* **cuBLAS workspaces**, inside the allocator and never freed: one per (cuBLAS handle, stream), and
  a training step has two handles on the compute stream, the Python thread's (forward, optimizer)
  and autograd's device thread's (backward). Each is ``CUBLAS_WORKSPACE_CONFIG``'s size: PyTorch's
  default ``:4096:8`` (32 MiB) on Hopper (sm90), ``:4096:2:16:8`` (8 MiB + 128 KiB) elsewhere.
* **Pages**: with expandable segments (the executor's default, :func:`memflow.executor.launch.cuda_alloc_conf`)
  a stream's pool maps 20 MiB pages for blocks over 1 MiB and 2 MiB pages for the small ones, so
  reserved memory is the high-water mark of live bytes (workspaces included) rounded up to pages,
  plus the holes between live blocks that a large request does not fit (replayed exactly from a
  run's allocator events by :mod:`memflow.cuda_alloc`; not predicted from a plan here). Without
  expandable segments each allocation over 10 MiB gets a segment of its own size (rounded to 2 MiB)
  that is cached whole after the free, and reserved memory can sit far above the live peak.
  Measured on the H200 (GPT-2 small, batch 8 × 1024): reserved over allocated 0.5–1.3% with
  expandable segments for keep, micro-batching and both offloads (the prediction within 2.5%), 10.1%
  for recompute-all, 5.5% swap-all, 9.0% swapping every other node, 8.9% FSDP units in bf16: in each,
  the LM head's 1.5 GiB logits requested while the free space lay in smaller pieces; torch's default
  allocator 4.6–31%.
* **Outside the allocator**: the CUDA context, the libraries' kernels, NCCL's buffers: not in
  ``max_memory_reserved`` but in the device's capacity (:data:`CONTEXT_BYTES`, measured).
"""
from __future__ import annotations

__all__ = ["LARGE_PAGE", "SMALL_PAGE", "CUBLAS_HANDLES", "CONTEXT_BYTES", "FRAGMENTATION", "cublas_workspace_bytes",
           "reserved_bytes", "device_bytes", "fragmented_device_bytes"]

MIB = 2**20
LARGE_PAGE = 20 * MIB  # kLargeBuffer: an expandable segment's page for blocks over 1 MiB
SMALL_PAGE = 2 * MIB  # kSmallBuffer: the small pool's page (blocks of 1 MiB or less)
CUBLAS_HANDLES = 2  # the forward's thread and autograd's backward thread, one handle each
# outside the allocator: a fresh process's CUDA context with cuBLAS loaded, measured on the H200
# (CUDA 13.0, driver 580, torch 2.11: 748.8 MiB); NCCL's buffers come on top with several ranks
CONTEXT_BYTES = 785_186_816
# the largest reserved memory measured over a plan's predicted live peak on the H200 (python -m bench gpu,
# 2026-11-28): recompute-all, 7,208 MiB reserved over 6,480 predicted, holes a 1.5 GiB block found no room
# in (memflow.cuda_alloc). Swap-all's 19.9% that run came from a tensor held twice, fixed since (not
# re-measured); every other plan 0.9-9.6%. Not a bound: the holes depend on the order of allocations.
FRAGMENTATION = 0.112


def cublas_workspace_bytes(sm_major: int | None = 9) -> int:
    """PyTorch's default cuBLAS workspace of one handle on one stream (``CUBLAS_WORKSPACE_CONFIG`` unset)."""
    return 4096 * 8 * 1024 if sm_major == 9 else 4096 * 1024 * 2 + 16 * 1024 * 8


def _up(n: int, page: int) -> int:
    return -(-n // page) * page


def reserved_bytes(live_peak_bytes: int, workspace_bytes: int | None = None) -> int:
    """The allocator's reserved peak predicted for a step whose live tensor bytes peak at ``live_peak_bytes``,
    with expandable segments: the workspaces beside the tensors, rounded up to the large pool's pages, and
    one page of the small pool."""
    ws = cublas_workspace_bytes() if workspace_bytes is None else workspace_bytes
    return _up(int(live_peak_bytes) + CUBLAS_HANDLES * ws, LARGE_PAGE) + SMALL_PAGE


def device_bytes(live_peak_bytes: int, workspace_bytes: int | None = None) -> int:
    """What the device must hold for the step: the allocator's reserved peak and the CUDA context."""
    return reserved_bytes(live_peak_bytes, workspace_bytes) + CONTEXT_BYTES


def fragmented_device_bytes(live_peak_bytes: int) -> int:
    """:func:`device_bytes` with the allocator's holes as large as the worst measured (:data:`FRAGMENTATION`
    of the live peak): what a plan should leave room for on a real GPU."""
    return _up(int(live_peak_bytes * (1 + FRAGMENTATION)), LARGE_PAGE) + SMALL_PAGE + CONTEXT_BYTES
