"""CUDA's autocast, as a fake trace on the CPU must see it to predict a GPU's memory.

Autocast casts per op, from a list per device, and the CPU's lists are not CUDA's. Under CUDA's
autocast an op of its *fp32* list (``pow``, ``exp``, ``rsqrt``, ``layer_norm``, ``group_norm``,
losses, ...) casts a bf16 input up to fp32, and an op of its *fp32_set_opt_dtype* list (``softmax``,
``log_softmax``, ``sum``, ``cumsum``, ``prod``, norms) computes in fp32; CPU autocast runs most of
them in bf16. So GPT-2's GELU (``pow(x, 3)`` on the bf16 output of a linear) keeps fp32 tensors for
its backward on a GPU and bf16 ones on the CPU: a bf16 plan for an H200 predicted from a CPU-semantics
trace was 15.4% under its measured peak (``python -m bench gpu``). CUDA autocast cannot run here
(its casts need a CUDA build), so :class:`CudaAutocast` runs the CPU's autocast with a torch-function
mode that makes each op CUDA's: the fp32 and set-dtype lists applied as CUDA applies them, CUDA's
lower-precision ops the CPU does not list cast to bf16, and the CPU-only fp32 ops that compute on
their own (3-D pooling, padding, grid sampling) run with the CPU's autocast off, as CUDA runs them in
their input's dtype. The lists are PyTorch's (``aten/src/ATen/autocast_mode.h``:
``AT_FORALL_FP32``, ``AT_FORALL_FP32_SET_OPT_DTYPE``, ``AT_FORALL_LOWER_PRECISION_FP``;
``autocast_mode.cpp`` for the CPU's). Ops the CPU's lists cast that CUDA decomposes into listed ops
(``cross_entropy_loss``: ``log_softmax`` and ``nll_loss``, both fp32 on CUDA too) are left as the
CPU casts them: the same dtypes are saved.
"""
from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["CudaAutocast", "FP32", "SET_DTYPE", "LOWER_ONLY", "UNCAST"]

# CUDA's fp32 policy (AT_FORALL_FP32): eligible inputs cast to fp32
FP32 = frozenset("""acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan pow softplus
layer_norm native_layer_norm group_norm frobenius_norm nuclear_norm cosine_similarity poisson_nll_loss
cosine_embedding_loss nll_loss nll_loss2d hinge_embedding_loss kl_div l1_loss smooth_l1_loss huber_loss mse_loss
margin_ranking_loss multilabel_margin_loss soft_margin_loss triplet_margin_loss multi_margin_loss
binary_cross_entropy_with_logits dist pdist cdist renorm logsumexp upsample_nearest1d _upsample_nearest_exact1d
upsample_nearest2d _upsample_nearest_exact2d upsample_nearest3d _upsample_nearest_exact3d upsample_linear1d
upsample_bilinear2d _upsample_bilinear2d_aa upsample_trilinear3d upsample_bicubic2d _upsample_bicubic2d_aa
norm""".split())
# CUDA's fp32_set_opt_dtype policy: computed in fp32 (the op's dtype argument set) when not given
SET_DTYPE = frozenset("prod softmax log_softmax cumprod cumsum linalg_vector_norm linalg_matrix_norm sum".split())
# CUDA's lower-precision ops that CPU autocast does not list (and that do not decompose into ops it lists)
LOWER_ONLY = frozenset("""addmv addr mv chain_matmul linalg_multi_dot lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell
_thnn_fused_lstm_cell _thnn_fused_gru_cell""".split())
# CPU autocast's fp32 ops that compute on their own and that CUDA's autocast leaves in their input's dtype
UNCAST = frozenset("""avg_pool3d max_pool3d max_pool3d_with_indices adaptive_avg_pool3d adaptive_max_pool3d
fractional_max_pool2d fractional_max_pool3d max_unpool2d max_unpool3d reflection_pad1d reflection_pad2d
replication_pad1d replication_pad2d replication_pad3d grid_sampler binary_cross_entropy polar trace""".split())
_LOW = (torch.bfloat16, torch.float16)


def _name(func) -> str:
    packet = getattr(func, "overloadpacket", None)  # an OpOverload (an exported program's call)
    if packet is not None:
        return packet.__name__
    return getattr(func, "__name__", "")  # torch.pow, Tensor.softmax, F.layer_norm


def _map(x, fn):
    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_map(y, fn) for y in x)
    return x


def _eligible(t: torch.Tensor) -> bool:
    return t.is_floating_point() and t.dtype != torch.float64


class CudaAutocast(TorchFunctionMode):
    """CUDA autocast's op policy over the CPU's autocast (entered together by
    :func:`memflow.graph.training.autocast` when the trace is for a GPU)."""

    def __init__(self, low: torch.dtype = torch.bfloat16):
        super().__init__()
        self.low = low

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        policy = _POLICY.get(func)
        if policy is None:
            policy = _POLICY[func] = _policy_of(_name(func))
        # autocast off: as CUDA's would be; an export (the capture's): autocast's casts are not baked into
        # the program (the executor's program, captured on the GPU, has none), only traced through it
        if not policy or not torch.is_autocast_enabled("cpu") or torch.compiler.is_exporting():
            return func(*args, **kwargs)
        if policy == "fp32":
            args, kwargs = _map(args, self._up), _map(kwargs, self._up)
        elif policy == "set_dtype":
            first = args[0] if args else kwargs.get("input", kwargs.get("self"))
            if isinstance(first, torch.Tensor) and _eligible(first) and kwargs.get("dtype") is None \
                    and not _positional_dtype(args):
                kwargs = dict(kwargs, dtype=torch.float32)
        elif policy == "lower":
            args, kwargs = _map(args, self._down), _map(kwargs, self._down)
        else:  # "uncast"
            with torch.autocast("cpu", enabled=False):
                return func(*args, **kwargs)
        return func(*args, **kwargs)

    @staticmethod
    def _up(t: torch.Tensor) -> torch.Tensor:
        return t.to(torch.float32) if _eligible(t) and t.dtype in _LOW else t

    def _down(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(self.low) if _eligible(t) and t.dtype != self.low else t


_POLICY: dict = {}  # func -> its policy ("" for none), decided once per function object


def _policy_of(name: str) -> str:
    if name in FP32:
        return "fp32"
    if name in SET_DTYPE:
        return "set_dtype"
    if name in LOWER_ONLY:
        return "lower"
    return "uncast" if name in UNCAST else ""


def _positional_dtype(args: tuple) -> bool:
    """Whether the call already passes a dtype positionally (``softmax(x, dim, dtype)``; aten's
    ``sum.default(x, dtype)``)."""
    return any(isinstance(a, torch.dtype) for a in args[1:])
