"""The optimizer step on the host: what a stage whose optimizer (or parameters) live in host memory
pays on the CPU.

torch's optimizers step CPU tensors one at a time (``foreach`` is CUDA-only by default): Adam runs
about ten element-wise ops per tensor, each a pass over memory. So the step costs a fixed time per
tensor (the ops' dispatch) plus its state's bytes at the rate the host streams them:

    seconds = tensors × HOST_TENSOR_S + (parameter + gradient + state bytes) / HOST_MEM_BANDWIDTH

Both figures are measured (``python -m bench hostopt``, BENCHMARKS.md *The optimizer step on the
host*): the per-tensor time on this project's 2-core host, the bandwidth from the optimizer-on-host
rows of the lent H200 machine's run (16 cores), where the steps streamed 11–13 GB/s of that
accounting (an earlier figure, 20 GB/s, was a guess: it made a host step look cheaper than the
GPU's own for GPT-2 at tiny scale, so the plan offloaded for nothing).
"""
from __future__ import annotations

__all__ = ["HOST_MEM_BANDWIDTH", "HOST_TENSOR_S", "host_step_s"]

#: bytes/s of parameters, gradients and optimizer state a host optimizer step streams through
HOST_MEM_BANDWIDTH = 12e9
#: seconds per tensor the host optimizer steps, beside its bytes (torch's CPU Adam, tensor by tensor)
HOST_TENSOR_S = 20e-6


def host_step_s(tensors: int, state_bytes: float, bandwidth: float = HOST_MEM_BANDWIDTH,
                per_tensor_s: float = HOST_TENSOR_S) -> float:
    """Seconds of a host optimizer step over ``tensors`` tensors holding ``state_bytes`` bytes of
    parameters, gradients and optimizer state."""
    return tensors * per_tensor_s + state_bytes / bandwidth
