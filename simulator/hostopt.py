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
GPU's own for GPT-2 at tiny scale, so the plan offloaded for nothing). A cluster states its own
(``host_optimizer: {bandwidth: 4.5GB/s, per_tensor: 25us}`` in its YAML: this host's figures): hosts
differ threefold.
"""
from __future__ import annotations

from memflow.cluster import HOST_STEP

__all__ = ["HOST_MEM_BANDWIDTH", "HOST_TENSOR_S", "host_step_s"]

#: bytes/s of parameters, gradients and optimizer state a host optimizer step streams through (the
#: default; a cluster's ``host_optimizer`` sets its own: :class:`memflow.cluster.HostStep`)
HOST_MEM_BANDWIDTH = HOST_STEP.bandwidth
#: seconds per tensor the host optimizer steps, beside its bytes (torch's CPU Adam, tensor by tensor)
HOST_TENSOR_S = HOST_STEP.per_tensor_s


def host_step_s(tensors: int, state_bytes: float, bandwidth: float = HOST_MEM_BANDWIDTH,
                per_tensor_s: float = HOST_TENSOR_S) -> float:
    """Seconds of a host optimizer step over ``tensors`` tensors holding ``state_bytes`` bytes of
    parameters, gradients and optimizer state."""
    return tensors * per_tensor_s + state_bytes / bandwidth
