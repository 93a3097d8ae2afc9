"""Fake-tensor kernels torch lacks for ops users train with; registered on import (by ``capture``).

``F.ctc_loss`` (every CTC speech model: wav2vec2 / HuBERT fine-tuning, a conv + LSTM recogniser) is tagged
``dynamic_output_shape`` and has no fake kernel in torch 2.13: ``torch.export`` refused it
("DynamicOutputShapeException: aten._ctc_loss.Tensor"), so no model with it could be planned. Its outputs
are the per-sample loss ``(B,)`` and ``log_alpha``, ``(B, T, 2 L + 1)`` with ``L`` the longest target,
which the backward reads (saved). With targets padded to ``(B, S)`` (the usual form) ``L <= S``: the fake
``log_alpha`` is ``(B, T, 2 S + 1)``, exact where a batch's longest target fills the padding and an upper
bound otherwise (the prediction errs high, never low). Concatenated 1-D targets give ``L`` no bound but
their sum (a ``log_alpha`` batch-size times too large): refused in one line saying to pad them.
The backward's gradient is the log-probabilities' shape. Real tensors run torch's own kernels.
"""
from __future__ import annotations

import torch

__all__: list[str] = []


def _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    if log_probs.dim() == 2:  # one unbatched sample: its targets (S,)
        return log_probs.new_empty(()), log_probs.new_empty((1, log_probs.shape[0], 2 * targets.shape[-1] + 1))
    t, b = log_probs.shape[0], log_probs.shape[1]
    if targets.dim() != 2:
        raise ValueError("F.ctc_loss with the targets concatenated in one 1-D tensor: its memory depends on the "
                         "longest target, a value no plan can know; pass them padded to (batch, longest target) "
                         "with target_lengths")
    longest = targets.shape[1]
    return log_probs.new_empty((b,)), log_probs.new_empty((b, t, 2 * longest + 1))


def _ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood, log_alpha,
                       blank, zero_infinity=False):
    return torch.empty_like(log_probs)


def _register() -> None:
    for name, fn in (("_ctc_loss", _ctc_loss), ("_ctc_loss_backward", _ctc_loss_backward)):
        for overload in ("", ".Tensor"):
            op = f"aten::{name}{overload}"
            if torch._library.simple_registry.singleton.find(op).fake_impl.kernel:
                continue
            try:
                torch.library.register_fake(op, fn)
            except RuntimeError:  # a torch whose own Meta kernel covers it (2.11's CUDA build): keep torch's
                continue


_register()
