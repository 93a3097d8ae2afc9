"""CUDA's autocast, as a fake trace on the CPU must see it to predict a GPU's memory.

Autocast casts per op, from a list per device, and the CPU's lists are not CUDA's. Under CUDA's
autocast an op of its *fp32* list (``pow``, ``exp``, ``rsqrt``, ``layer_norm``, ``group_norm``,
losses, ...) casts a bf16 input up to fp32, and an op of its *fp32_set_opt_dtype* list (``softmax``,
``log_softmax``, ``sum``, ``cumsum``, ``prod``, norms) computes in fp32; CPU autocast runs most of
them in bf16. So GPT-2's GELU (``pow(x, 3)`` on the bf16 output of a linear) keeps fp32 tensors for
its backward on a GPU and bf16 ones on the CPU: a bf16 plan for an H200 predicted from a CPU-semantics
trace was 15.4% under its measured peak (``python -m bench gpu``).

CUDA autocast cannot run here (its casts need a CUDA build), so while :class:`CudaAutocast` is on,
the CPU's autocast casts as CUDA's does: kernels registered on the dispatcher's ``AutocastCPU`` key
(where autocast's own kernels sit, above autograd, so every cast is recorded and the backward saves
what CUDA's saves) for each op CUDA lists and the CPU does not: the fp32 list
(``AT_FORALL_FP32`` in PyTorch's ``aten/src/ATen/autocast_mode.h``), the set-dtype list
(``AT_FORALL_FP32_SET_OPT_DTYPE``) and the lower-precision ops the CPU lacks. Being dispatcher
kernels they apply wherever autocast is on: inside composite ops, custom autograd functions and a
checkpoint's replay in the backward, as CUDA's do. While it is off (everywhere but a trace for a GPU)
and while ``torch.export`` captures (the program must not bake a cast in), they pass every call
through unchanged. Ops the CPU's own lists cast that CUDA does not (3-D pooling and padding, grid
sampling, ``cross_entropy_loss``) keep the CPU's kernels: for the last, CUDA decomposes into
``log_softmax`` and ``nll_loss``, both fp32 there too; the others over-count a bf16 3-D CNN's memory
(an over-prediction).
"""
from __future__ import annotations

import threading

import torch

__all__ = ["CudaAutocast", "FP32", "SET_DTYPE", "LOWER_ONLY", "registered"]

# CUDA's fp32 policy: (op, overload) pairs, eligible inputs cast to fp32 ("" = the default overload)
FP32 = tuple([(n, "") for n in """acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan softplus
layer_norm native_layer_norm group_norm nuclear_norm cosine_similarity poisson_nll_loss cosine_embedding_loss nll_loss
nll_loss2d hinge_embedding_loss kl_div l1_loss smooth_l1_loss huber_loss mse_loss margin_ranking_loss
multilabel_margin_loss soft_margin_loss triplet_margin_loss multi_margin_loss binary_cross_entropy_with_logits dist pdist
cdist renorm logsumexp upsample_nearest1d _upsample_nearest_exact1d upsample_nearest2d _upsample_nearest_exact2d
upsample_nearest3d _upsample_nearest_exact3d upsample_linear1d upsample_bilinear2d _upsample_bilinear2d_aa
upsample_trilinear3d upsample_bicubic2d _upsample_bicubic2d_aa""".split()]
             + [("pow", "Tensor_Scalar"), ("pow", "Tensor_Tensor"), ("pow", "Scalar"), ("frobenius_norm", "dim"),
                ("nuclear_norm", "dim"),
                # (fp32_append_dtype: the norm computed in fp32, as for an input cast to it)
                ("norm", "Scalar"), ("norm", "ScalarOpt_dim")])
# CUDA's fp32_set_opt_dtype policy: computed in fp32 (the op's dtype argument) when the call gives none
SET_DTYPE = (("prod", ""), ("prod", "dim_int"), ("softmax", "int"), ("log_softmax", "int"), ("cumprod", ""),
             ("cumsum", ""), ("linalg_vector_norm", ""), ("linalg_matrix_norm", ""), ("linalg_matrix_norm", "str_ord"),
             ("sum", ""), ("sum", "dim_IntList"))
# CUDA's lower-precision ops that CPU autocast does not list (and that do not decompose into ops it lists)
LOWER_ONLY = tuple((n, "") for n in """addmv addr mv chain_matmul linalg_multi_dot lstm_cell gru_cell rnn_tanh_cell
rnn_relu_cell _thnn_fused_lstm_cell _thnn_fused_gru_cell""".split())

_LOW = (torch.bfloat16, torch.float16)
_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)
_state = threading.local()
_LIB = None  # the registrations (kept alive for the process)
registered: list[str] = []  # the op overloads given a kernel


def _on() -> bool:
    return getattr(_state, "depth", 0) > 0 and not torch.compiler.is_exporting()


def _map(x, fn):
    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_map(y, fn) for y in x)
    return x


def _eligible(t: torch.Tensor) -> bool:
    return t.is_floating_point() and t.dtype != torch.float64


def _up(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float32) if _eligible(t) and t.dtype in _LOW else t


def _kernel(op, policy: str):
    dtype_at = next((i for i, a in enumerate(op._schema.arguments) if a.name == "dtype"), None)

    def run(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_KEYS):
            if _on():
                if policy == "fp32":
                    args, kwargs = _map(args, _up), _map(kwargs, _up)
                elif policy == "lower":
                    low = torch.get_autocast_dtype("cpu")
                    args = _map(args, lambda t: t.to(low) if _eligible(t) and t.dtype != low else t)
                elif dtype_at is not None and args and isinstance(args[0], torch.Tensor) and _eligible(args[0]):
                    given = args[dtype_at] if len(args) > dtype_at else kwargs.get("dtype")
                    if given is None:
                        if len(args) > dtype_at:
                            args = args[:dtype_at] + (torch.float32,) + args[dtype_at + 1:]
                        else:
                            kwargs = dict(kwargs, dtype=torch.float32)
            return op(*args, **kwargs)

    return run


def _register() -> None:
    global _LIB
    if _LIB is not None:
        return
    lib = torch.library.Library("aten", "IMPL")
    for policy, ops in (("fp32", FP32), ("set_dtype", SET_DTYPE), ("lower", LOWER_ONLY)):
        for name, overload in ops:
            packet = getattr(torch.ops.aten, name, None)
            op = getattr(packet, overload or "default", None) if packet is not None else None
            if op is None:
                continue
            full = f"aten::{name}" + (f".{overload}" if overload else "")
            if torch._C._dispatch_has_kernel_for_dispatch_key(full, "AutocastCPU"):
                continue  # the CPU's own autocast casts it already
            lib.impl(f"{name}.{overload}" if overload else name, _kernel(op, policy), "AutocastCPU")
            registered.append(full)
    _LIB = lib


class CudaAutocast:
    """Within (and the CPU's autocast on): CUDA's autocast policy on the CPU (a re-entrant switch for this
    thread; :func:`memflow.graph.training.autocast` turns it on for a trace that stands for a GPU)."""

    def __enter__(self):
        _register()
        _state.depth = getattr(_state, "depth", 0) + 1
        return self

    def __exit__(self, *exc):
        _state.depth -= 1
        return False
