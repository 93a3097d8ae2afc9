"""The ``selective`` memory action's policy: which ops of a node keep their outputs.

Under ``selective`` a node runs inside torch's non-reentrant ``checkpoint`` with a
selective-checkpointing context (``torch.utils.checkpoint.create_selective_checkpoint_contexts``,
PyTorch's SAC): the outputs of the *expensive* ops — matrix products, convolutions,
fused attention kernels and native RNN kernels, whose FLOPs grow faster than their
outputs' bytes — are saved (held on the device until the node's backward); every other
op (norms, activations, softmax, dropout, adds, views, copies) is run again right before
the backward, from the saved outputs and the node's inputs (which the checkpoint holds).
It is Megatron's selective recomputation turned the PyTorch way round: most of full
recomputation's memory saving for the cheap, memory-bound part of the forward, without
running the matmuls twice.

:func:`is_expensive` is the one classification (the profiler uses it to cost the replay,
the executor to run it); :func:`selective_context` is the ``context_fn`` for ``checkpoint``.
"""
from __future__ import annotations

import functools

import torch
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

__all__ = ["is_expensive", "policy", "selective_context", "EXPENSIVE_OPS"]

#: ATen op packets (``torch.ops.aten.NAME``) whose outputs a ``selective`` node saves.
EXPENSIVE_OPS: frozenset[str] = frozenset({
    "mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_addmm_activation", "addbmm", "dot", "vdot", "mv",
    "einsum", "_scaled_mm", "_int_mm",
    "convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "mkldnn_convolution", "cudnn_convolution", "cudnn_convolution_transpose",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_fused_attention_overrideable", "_flash_attention_forward", "_efficient_attention_forward",
    "lstm", "gru", "rnn_tanh", "rnn_relu", "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "mkldnn_rnn_layer",
    "_cudnn_rnn", "miopen_rnn",
})


def is_expensive(op) -> bool:
    """Whether ATen op ``op`` (an ``OpOverload``) is one whose outputs ``selective`` saves."""
    packet = getattr(op, "overloadpacket", op)
    return getattr(packet, "__name__", "") in EXPENSIVE_OPS


def policy(ctx, op, *args, **kwargs) -> CheckpointPolicy:
    """The selective-checkpointing policy: save the expensive ops' outputs, recompute the rest."""
    return CheckpointPolicy.MUST_SAVE if is_expensive(op) else CheckpointPolicy.PREFER_RECOMPUTE


#: ``context_fn`` for non-reentrant ``checkpoint``: a fresh pair of SAC contexts per call.
selective_context = functools.partial(create_selective_checkpoint_contexts, policy)
