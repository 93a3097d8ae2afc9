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

from collections import defaultdict

import torch
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

try:  # torch >= 2.13: SAC calls the policy after each op, with its output, and keys its cache by op count
    from torch.utils.checkpoint import _RECOMPUTE
except ImportError:  # older (the GPU machines' 2.11): before each op, no output; a saved op's cache entry
    _RECOMPUTE = None  # is appended after it runs and the replay pops them in order (_before_op_context)

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


def _written(op, args, kwargs) -> list:
    """The tensors ``op`` writes in place (its schema's mutable arguments: ``add_``'s self, an ``out=``)."""
    schema = getattr(op, "_schema", None)
    if schema is None or not schema.is_mutable:
        return []
    out = []
    for i, a in enumerate(schema.arguments):
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        v = args[i] if i < len(args) else kwargs.get(a.name)
        out += [t for t in (v if isinstance(v, (list, tuple)) else [v]) if isinstance(t, torch.Tensor)]
    return out


def _storage_key(t: torch.Tensor):
    """The storage behind ``t`` (its views' too, fake tensors' too), or None."""
    try:
        st = t.untyped_storage()
        return st._cdata if st.nbytes() else None
    except (RuntimeError, NotImplementedError):  # (no storage: a tensor subclass)
        return None


def selective_context():
    """``context_fn`` for non-reentrant ``checkpoint``: a fresh pair of SAC contexts per call, with
    :func:`policy`, except that an expensive op's saved output that a later op of the node writes in place
    is recomputed in the replay instead. SAC's cache holds the output itself (a detached alias), so the
    replay would read it as the write left it and write it again: the GRU's CPU kernels add into and
    squash their gates' matmul outputs in place through ``unsafe_split`` pieces, which share no version
    counter with the output, and the gradients came out silently wrong (37% off; torch issue #119590:
    SAC and in-place ops in eager); a ``sigmoid_`` straight on a linear's output stopped the backward
    ("Tensor cached during selective activation checkpoint has been mutated"). The policy is called after
    each op with its output (torch 2.13): it records where the saved outputs live and, seeing a write into
    one, marks that op's cache entry to be recomputed (SAC's own ``_RECOMPUTE`` entry; the same op
    count SAC keys its entries by)."""
    saved: dict[int, list[tuple]] = {}  # storage -> (op, its invocation index) of saved outputs
    count: dict = defaultdict(int)
    holder: list = []  # SAC's cache of this call

    def pol(ctx, op, *args, **kwargs) -> CheckpointPolicy:
        idx = count[op]
        count[op] += 1
        for t in _written(op, args, kwargs):
            for key, i in saved.pop(_storage_key(t), ()):
                holder[0][key][i] = _RECOMPUTE
        choice = policy(ctx, op, *args, **kwargs)
        if choice == CheckpointPolicy.MUST_SAVE:
            outs = ctx.op_output if isinstance(ctx.op_output, (list, tuple)) else [ctx.op_output]
            for t in outs:
                if isinstance(t, torch.Tensor) and _storage_key(t) is not None:
                    saved.setdefault(_storage_key(t), []).append((op, idx))
        return choice

    if _RECOMPUTE is None:
        return _before_op_context()
    fwd, replay = create_selective_checkpoint_contexts(pol)
    holder.append(fwd.storage)  # (the cache, not its context: the context holds this policy, and a cycle
    return fwd, replay  # would keep the cached outputs until the garbage collector ran: +3% peak measured)


def _before_op_context():
    """:func:`selective_context` for a torch whose SAC calls the policy before each op (no output in its
    context) and asks it again in the replay: a saved op's output is found in SAC's cache at the next call
    (appended there after the op ran), and a write into it drops that entry from the cache and has the
    replay's policy recompute the op (the entries are popped in order, so the rest stay aligned)."""
    saved: dict[int, list[tuple]] = {}  # storage -> (op, its invocation index, its cache entry)
    count: dict = defaultdict(int)
    again: dict = defaultdict(int)  # the replay's invocation counts
    dropped: set = set()
    pending: list = []  # the last saved op, its output not yet looked at
    holder: list = []

    def note_pending() -> None:
        while pending:
            op, idx = pending.pop()
            entries = holder[0].get(op) or []
            if not entries:
                continue
            entry = entries[-1]
            for w in torch.utils._pytree.tree_leaves(entry):
                t = getattr(w, "val", None)
                if isinstance(t, torch.Tensor) and _storage_key(t) is not None:
                    saved.setdefault(_storage_key(t), []).append((op, idx, entry))

    def pol(ctx, op, *args, **kwargs) -> CheckpointPolicy:
        if ctx.is_recompute:
            idx = again[op]
            again[op] += 1
            return CheckpointPolicy.PREFER_RECOMPUTE if (op, idx) in dropped else policy(ctx, op, *args, **kwargs)
        note_pending()
        idx = count[op]
        count[op] += 1
        for t in _written(op, args, kwargs):
            for key, i, entry in saved.pop(_storage_key(t), ()):
                if (key, i) not in dropped:
                    dropped.add((key, i))
                    lst = holder[0][key]
                    lst.pop(next(k for k, e in enumerate(lst) if e is entry))
        choice = policy(ctx, op, *args, **kwargs)
        if choice == CheckpointPolicy.MUST_SAVE:
            pending.append((op, idx))
        return choice

    fwd, replay = create_selective_checkpoint_contexts(pol)
    holder.append(fwd.storage)
    return fwd, replay
