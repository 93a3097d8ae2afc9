"""A GPU's reserved memory for a plan, from a fake run of its step replayed through the allocator model.

The simulator predicts live tensor bytes per phase; the caching allocator's reserved memory also
depends on the order and sizes of every allocation (:mod:`memflow.cuda_alloc`). For a one-device plan
(keep, recompute, selective, swap, micro-batches, the optimizer on the host: its state and step in host
memory; the parameters on the host: ZeRO-3's streaming of each node's in and out), this runs the
step's node program on fake tensors as the executor runs it on one GPU (CUDA's autocast,
:func:`memflow.graph.training.gpu_semantics`; the plan's per-node actions; ``steps`` steps with the
optimizer; each micro-batch's forward under autocast, its backward outside, as the executor),
records every storage allocated and freed on the device in order, adds the two cuBLAS workspaces
where the first matmul of the forward's thread and of the backward's thread allocate them
(:mod:`memflow.gpumem`), and replays that through the allocator model.

CUDA kernels also allocate through the caching allocator inside themselves. The reductions' global
staging buffers are added where a ``sum``/``mean`` runs, sized as PyTorch's ``setReduceConfig`` sizes
them (:func:`reduce_buffers`; GPT-2's bias gradients: 48, 132 and 132.75 MiB per block at batch
8 × 1024, as the H200's trace shows); the fused attention backward's buffers
(:func:`attention_backward_buffers`) and ``embedding_dense_backward``'s partial sums
(:func:`embedding_backward_buffers`) as the H200's traces show them; and the cuBLAS workspace after the
output of the first matmul of each thread, as cuBLAS allocates it at the kernel's launch. With those,
the replays of GPT-2's keep, recompute-all and two-micro-batch steps come within 0.2% of the H200's
``max_memory_reserved`` (tests/test_cuda_alloc.py). The placement is chaotic: in that recompute run two
attention-mask tensors are 1 MiB blocks in the GPU's trace (made at [1, 1, S, S]; the GPU ran torch
2.11) and 8 MiB ones here ([B, 1, S, S]); dropping them from this run moves its peak by 20 MiB, and
before the three rules above it was 500 MiB (7%) under. A swap's frees depend on when its copies to
the host end: the fake run (:mod:`memflow.fakeswap`, the CUDA path's calls) frees each swapped node's
saved tensors in the phase the simulator's timeline of the copies frees them in (``swap_leave``); letting
them go at the next node instead (copies keeping up) had put swap-all GPT-2's live peak at 6.2 GiB where
that timeline says 11.1. So, swapping every other node replays to 12,728 MiB reserved against the H200's
12,128 (+4.9%), its live peak the simulator's to the byte. The optimizer on the host adds nothing on the
device: 13,948 MiB replayed against the H200's 13,930. With the parameters on the host the fake run makes
the executor's own calls (:class:`~memflow.executor.zero3.Zero3Sync` at one rank: each node's flat buffer
resized and filled before its pass, the next node's one pass ahead, freed after it; its gradients' flat
copy made after its backward and copied out to the host): 13,488 MiB replayed against the H200's 13,488
(to the byte) in fp32, and 12,268 against 12,288 (-0.16%) in bf16, whose gathers leave 1 GiB of holes.
"""
from __future__ import annotations

import contextlib
from typing import Any

import torch

from .cuda_alloc import replay
from .executor.optim import StageOptimizer
from .executor.stage import owned_params, stage_state
from .executor.zero3 import Zero3Sync, unit_params
from .graph.actions import make_wrap
from .graph.aliases import escaping_params, replay_unsafe_nodes
from .graph.build import capture_program
from .graph.casts import cast_only, low_reads, param_readers
from .graph.gpu_autocast import CudaAutocast
from .graph.training import casts, gpu_semantics, in_model_order, opt_params
from .fakeswap import FakeGpuSwap
from .gpumem import cublas_workspace_bytes
from .kinds import SWAP, replay_safe
from .memory import LiveBytes

__all__ = ["step_events", "fake_reserved", "reduce_buffers", "attention_backward_buffers",
           "embedding_backward_buffers", "SMS", "SM_MAJOR", "gpu_figures", "not_covered", "plan_reserved"]

_MATMULS = frozenset({"mm", "addmm", "bmm", "baddbmm", "linear", "_scaled_mm"})
_ATTENTION_BWD = "_scaled_dot_product_flash_attention_for_cpu_backward"  # (the fake run's stand-in for CUDA's)
_REDUCTIONS = frozenset({"sum", "mean"})  # (TensorIterator reductions whose accumulator is fp32 here)
# (multiprocessors, threads per multiprocessor) per GPU (the default: the H100's and H200's)
SMS = {"h100": (132, 2048), "h200": (132, 2048), "a100": (108, 2048), "v100": (80, 2048), "l4": (58, 1536),
       "rtx-4090": (128, 1536), "titan-x": (24, 2048)}
SM_MAJOR = {"h100": 9, "h200": 9, "a100": 8, "v100": 7, "l4": 8, "rtx-4090": 8, "titan-x": 5}


def _last_pow2(n: int) -> int:
    return 1 << (max(1, int(n)).bit_length() - 1)


def reduce_buffers(shape: list[int], strides: list[int], dims: list[int], elem: int, acc: int = 4,
                   sms: tuple[int, int] = (132, 2048)) -> tuple[int, int]:
    """The bytes CUDA's TensorIterator reduction kernel allocates for a reduction over ``dims`` of a
    tensor (``strides`` in elements): its global staging buffer and its semaphores, zero when the kernel
    reduces within blocks. PyTorch's ``setReduceConfig`` / ``ReduceConfig`` (``aten/src/ATen/native/cuda/
    Reduce.cuh``) for one operand, 32-bit indexing, an aligned output: the bias gradients of GPT-2's
    linears at batch 8 × 1024 (a sum over 8,192 rows) come to the 48, 132 and 132.75 MiB blocks (24, 96
    and 72 bytes of semaphores) the H200's allocator trace shows."""
    dims = sorted(d % len(shape) for d in dims) if dims else list(range(len(shape)))
    red = sorted(((strides[d], shape[d]) for d in dims if shape[d] > 1))
    out = sorted(((strides[d], shape[d]) for d in range(len(shape)) if d not in dims and shape[d] > 1))

    def coalesce(ds):
        merged: list = []
        for st, n in ds:
            if merged and merged[-1][0] * merged[-1][1] == st:
                merged[-1] = (merged[-1][0], merged[-1][1] * n)
            else:
                merged.append((st, n))
        return merged

    red, out = coalesce(red), coalesce(out)
    num_out = 1
    for _, n in out:
        num_out *= n
    per_out = 1
    for _, n in red:
        per_out *= n
    if per_out <= 1:
        return 0, 0
    ndim = len(red) + len(out)
    fastest = not out or red[0][0] < out[0][0]
    if fastest:
        dim0, dim1, moving = per_out, num_out, red[0][0]
    else:
        dim0, dim1, moving = num_out, per_out, out[0][0]
    out_vec = 1
    if moving == 1:
        if fastest and dim0 > 128 and len(red) == 1:
            dim0 //= 4  # (vectorised along the input)
        elif not fastest:
            out_vec = 4
            for n in [out[0][1]] + [st for st, _ in red] + [st for st, _ in out[1:]]:
                while n % out_vec:
                    out_vec //= 2
            dim0 //= out_vec
    max_threads = 512 // out_vec
    d0 = _last_pow2(dim0) if dim0 < max_threads else max_threads
    d1 = _last_pow2(dim1) if dim1 < max_threads else max_threads
    width = min(d0, 32)
    height = min(d1, max_threads // width)
    width = min(d0, max_threads // height)
    threads = width * height
    step_in = step_out = 1
    in_mult = [0, 0, 0]
    if ndim == 0 or fastest:
        in_mult[0], step_in = step_in, step_in * width
    else:
        step_out *= width

    def per_thread() -> int:
        return -(-per_out // step_in)

    if per_thread() >= height * 16 or per_thread() >= 256:
        in_mult[1], step_in = step_in, step_in * height
    else:
        step_out *= height
    target = sms[0] * (sms[1] // threads)
    grid = -(-(num_out // out_vec) // step_out)
    ctas = 1
    if in_mult[1] and per_thread() >= 256 and grid <= target:
        ctas = max(min(-(-target // grid), -(-per_thread() // 16)), -(-per_thread() // 256))
    if ctas <= 1:
        return 0, 0
    size = acc * num_out * ctas
    if not in_mult[0]:
        size *= width * out_vec
    return size, 4 * grid


def attention_backward_buffers(shape: list[int], elem: int) -> list[tuple[str, int, int]]:
    """What CUDA's fused attention backward allocates inside itself beside its three gradients, for a
    ``[B, H, S, D]`` query of ``elem``-byte elements: ``(action, buffer, bytes)`` in the order the H200's
    allocator traces show them (GPT-2, S 1024, D 64). fp32 runs the memory-efficient kernel: a
    ``[B, H, S, D]`` and two ``[B, H, S]`` fp32 buffers, then a ``[B, H, S + 1, D]`` fp32 one. bf16 and
    fp16: one block of an fp32 ``[B, H, S, D]``, an fp32 ``[B, H, S]`` and 256 bytes (a ``dq`` accumulator
    and row sums; which kernel, FlashAttention's or cuDNN's, the trace does not say). Freed as the kernel
    is launched. Other sequence lengths and head sizes round as those kernels do (to their tiles); that
    rounding is not modelled."""
    b, h, s, d = (int(x) for x in shape[-4:])
    if elem >= 4:
        return [("alloc", 0, 4 * b * h * s * d), ("alloc", 1, 4 * b * h * s), ("alloc", 2, 4 * b * h * s),
                ("free", 1, 0), ("free", 0, 0), ("alloc", 3, 4 * b * h * (s + 1) * d), ("free", 2, 0),
                ("free", 3, 0)]
    return [("alloc", 0, 4 * b * h * s * d + 4 * b * h * s + 256), ("free", 0, 0)]


def embedding_backward_buffers(indices: int, dim: int) -> list[tuple[str, int, int]]:
    """What CUDA's ``embedding_dense_backward`` allocates inside itself for ``indices`` looked-up rows of
    ``dim`` elements, beyond its output and the sort's small index buffers: the per-segment partial sums
    (fp32, one row per possible partial segment, ``indices + indices // 10``, PyTorch's
    ``NROWS_PER_THREAD`` of 10) and their offsets (int64), in the H200's order (GPT-2's ``wte`` at 8 × 1024
    tokens: 27,681,792 and 72,088 bytes)."""
    segs = indices + indices // 10
    return [("alloc", 0, 8 * segs), ("alloc", 1, 4 * segs * dim), ("free", 1, 0), ("free", 0, 0)]


class _Sequence(LiveBytes):
    """LiveBytes that also lists device allocations and frees in order, as allocator events."""

    def __init__(self, workspace: int, sms: tuple[int, int] | None = None):
        super().__init__()
        self.alloc_events: list = []
        self._tok: dict[int, int] = {}
        self._n = 0
        self.backward = False
        self._workspace = workspace
        self._has_ws = [False, False]  # (the forward's thread, autograd's)
        self._sms = sms

    def _emit(self, nbytes: int) -> int:
        self._n += 1
        self.alloc_events.append(["alloc", self._n, int(nbytes), 0])
        return self._n

    def _add(self, st, kind: str, check: bool = True, record: bool = True, cast: str = "") -> None:
        key = id(st)
        had = key in self._refs and self._refs[key][0]() is st
        before = self.live
        super()._add(st, kind, check, False, cast)
        if not had and self.live > before:
            self._tok[key] = self._emit(st.nbytes())

    def _on_free(self, key: int, _ref=None) -> None:
        entry = self._refs.get(key)
        super()._on_free(key, _ref)
        tok = self._tok.pop(key, None)
        if entry is not None and tok is not None:
            self.alloc_events.append(["free_completed", tok, int(entry[1]), 0])

    def resized(self, t: torch.Tensor) -> None:
        # (ZeRO-3's gathered parameters and reduced flat copies: a storage resized to its bytes is an
        # allocation, to zero a free, as CUDA's storage resize allocates a new block and frees the old one)
        st = t.untyped_storage()
        key = id(st)
        ent = self._refs.get(key)
        known = ent is not None and ent[0]() is st
        super().resized(t)
        if not known or ent[3]:  # (new: counted by _add; host bytes: no device event)
            return
        tok = self._tok.pop(key, None)
        if tok is not None:
            self.alloc_events.append(["free_completed", tok, int(ent[1]), 0])
        if st.nbytes():
            self._tok[key] = self._emit(st.nbytes())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if self._workspace and name in _MATMULS and not self._has_ws[self.backward]:
            self._has_ws[self.backward] = True  # (cuBLAS allocates it as the kernel launches: after the output)
            self._emit(self._workspace)
        if self._sms and name in _REDUCTIONS and args and isinstance(args[0], torch.Tensor) \
                and args[0].is_floating_point():
            x = args[0]
            dims = args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else kwargs.get("dim") if kwargs else None
            buf, sem = reduce_buffers(list(x.shape), list(x.stride()), list(dims or []), x.element_size(),
                                      sms=self._sms)
            if buf:  # allocated after the output, freed as the kernel is launched (semaphores first)
                b, m = self._emit(buf), self._emit(sem)
                self.alloc_events += [["free_completed", m, sem, 0], ["free_completed", b, buf, 0]]
        bufs = []
        if self._sms and name == _ATTENTION_BWD:
            bufs = attention_backward_buffers(list(args[1].shape), args[1].element_size())
        elif self._sms and name == "embedding_dense_backward":
            bufs = embedding_backward_buffers(args[1].numel(), args[0].shape[-1])
        if bufs:
            toks: dict = {}
            for act, k, nbytes in bufs:
                if act == "alloc":
                    toks[k] = (self._emit(nbytes), nbytes)
                else:
                    self.alloc_events.append(["free_completed", *toks.pop(k), 0])
        return out


def step_events(spec: Any, microbatch: int, actions: list[str] | str, *, microbatches: int = 1,
                dtype: str = "fp32", steps: int = 3, workspace: int | None = None,
                sms: tuple[int, int] | None = SMS["h100"], granularity: str | int = "auto",
                optimizer_on_host: bool = False, swap_leave: dict[int, int] | None = None,
                prefetch: int = 1, params_on_host: bool = False) -> tuple[list, int, dict[int, int]]:
    """The device's allocator events (``[action, token, bytes, stream]``) of ``steps`` training steps of a
    single-stage plan, run on fake tensors as a GPU runs them (see the module's docstring), the run's
    peak of live tensor bytes, and its peak per phase (the simulator's: node ``k``'s forward ``k``, its
    backward ``2n - 1 - k``, the optimizer step ``2n``; the most over the steps and micro-batches).
    ``optimizer_on_host``: the optimizer's state and step in host memory (the executor steps pinned host
    copies of the parameters: nothing of it on the device). Swapped nodes as the
    executor's CUDA swap allocates (:mod:`memflow.fakeswap`): each node's saved tensors leave the device
    in the phase ``swap_leave`` gives (the simulator's timeline of the copies; default: the phase after
    its forward) and come back ``prefetch`` nodes ahead of its backward. ``params_on_host`` (ZeRO-3 with
    offload ``optimizer+parameters`` on one device, the optimizer on the host with it): the executor's own
    :class:`~memflow.executor.zero3.Zero3Sync` and :class:`~memflow.executor.optim.StageOptimizer` on the
    fake tensors, each node's parameters copied in from their host shards around its passes (the next
    node's one node ahead), its gradients' flat copy made after its backward and copied out."""
    ws = cublas_workspace_bytes() if workspace is None else workspace
    low = casts(dtype)
    with gpu_semantics(True):
        captured, program, mode, model = capture_program(spec, microbatch, fake=True, dtype=dtype,
                                                         granularity=granularity)
    n = program.n
    acts = [actions] * n if isinstance(actions, str) else list(actions)
    live = _Sequence(ws, sms)
    # as the executor steps: each micro-batch's forward under autocast (its cast cache dies with it), the
    # backward and the optimizer outside it; a recompute's replay restores autocast itself, and CUDA's
    # rules apply wherever autocast is on
    rules = CudaAutocast() if low else contextlib.nullcontext()
    with mode, rules:
        params = opt_params(model, captured.split)
        z3 = None
        if params_on_host:
            z3, opt, state = _streamed(spec, program, model, captured.flat_inputs, dtype, live)
        else:
            state = params + list(captured.split.buffers())
            opt = spec.make_optimizer(params)
        live.track(state, kind="state")
        # (never swapped: the parameters, and ZeRO-3's gathered buffers, which the bf16 parameters alias)
        swapper = FakeGpuSwap(live, params + (z3.fulls() if z3 is not None else []), swap_leave or {}) \
            if SWAP in acts else None
        wrap = make_wrap(replay_safe(acts, set(replay_unsafe_nodes(program))), swapper, preserve_rng_state=False)
        if z3 is not None and any(pt.low for pt in z3.buckets):  # (inside the action: a replay re-reads)
            acted = wrap
            wrap = lambda k, fn: acted(k, z3.bind(k, fn))  # noqa: E731
        read = {a for call in program.calls for a in call.arg_names}
        reads = [p in read for p in program.placeholders]  # (the inputs no node reads stay on the host)
        for _ in range(steps):
            with live:
                opt.zero_grad()
                for _m in range(microbatches):
                    # each micro-batch's data copied to the device as its forward starts and held by the step
                    # alone (the executor's _to_device): an input dies with its last reader's forward, or with
                    # the backward of a node that saved it
                    data = [t.clone() if isinstance(t, torch.Tensor) and r else (t if not r else None)
                            for t, r in zip(captured.flat_inputs, reads)]
                    live.backward = False
                    if swapper is not None:
                        swapper.batch_inputs(data)
                    with (torch.autocast("cpu", dtype=torch.bfloat16) if low else contextlib.nullcontext()):
                        env = program.initial_env(data)
                        data = None
                        states = []
                        for k in range(n):
                            if swapper is not None:
                                swapper.key = (_m, k)
                                swapper.at_phase(k)
                            live.set_phase(k)
                            if z3 is not None:
                                z3.before_forward(k)
                            states.append(program.forward_node(k, env, wrap=wrap))
                            if z3 is not None:
                                z3.after_forward(k)
                            program.drop_dead(env, k)
                    live.backward = True
                    grads: dict = {}
                    if swapper is not None:  # (as the stage's backward: the last nodes' copies back first)
                        swapper.at_phase(n)
                        live.set_phase(n)
                        for k in range(n - 1, max(n - 1 - prefetch, -1), -1):
                            swapper.prefetch(_m, k)
                    if z3 is not None and _m == microbatches - 1:
                        z3.start_last_microbatch()
                    for k in range(n - 1, -1, -1):
                        if swapper is not None:
                            swapper.at_phase(2 * n - 1 - k)
                        live.set_phase(2 * n - 1 - k)  # (the copies back it starts belong to it)
                        if swapper is not None and k - prefetch >= 0:
                            swapper.prefetch(_m, k - prefetch)
                        if z3 is not None:
                            z3.before_backward(k)
                        program.backward_node(k, states[k], grads)
                        if z3 is not None:
                            z3.after_backward(k)
                        states[k] = None
                        if k == n - 1:  # (the loss goes with its node's backward, as the executor's)
                            env.pop(program.loss_name, None)
                    if z3 is not None:
                        z3.end_backward()
                    if swapper is not None:
                        swapper.drop(_m)
                    del env, grads, data
                live.backward = False
                live.set_phase(2 * n)
                if z3 is not None:  # (its optimizer steps the host shards inside live.host() itself)
                    z3.finish()
                    opt.step()
                else:
                    with (live.host() if optimizer_on_host else contextlib.nullcontext()):
                        opt.step()
    return live.alloc_events, live.peak, dict(live.phase_peak)


def _streamed(spec: Any, program: Any, model: Any, inputs: list, dtype: str, live: LiveBytes) -> tuple:
    """A one-device stage's ZeRO-3 with its parameters on the host, as the executor builds it
    (:class:`memflow.executor.stage.Stage`, the worker): the :class:`Zero3Sync` (the parameters autocast
    only casts gathered in bf16), the :class:`StageOptimizer` stepping the host shards, and the model
    state left on the device (what several nodes read, the buffers)."""
    tensors, first = stage_state(program, 0, program.n)
    trainable = [t for t in tensors if isinstance(t, torch.nn.Parameter) and t.requires_grad]
    low = cast_only(program, inputs, dtype)  # (under the run's fake mode and CUDA's autocast rules)
    readers = {i: {k if k >= 0 else -1 - k for k in ks} for i, ks in param_readers(program).items()}
    units, rest = unit_params(owned_params(trainable, first, 0, program.n), readers, escaping_params(program))
    reads = low_reads(program, low)
    with live.host():  # (the units' shards are made in host memory)
        z3 = Zero3Sync(units, rest, None, 1, 0, 0, host=True, low={i for r in reads.values() for _, i in r},
                       reads=reads)
    z3.live = live
    with live.host():
        live.track(z3.host_pieces(), kind="state")
    opt = StageOptimizer(spec, in_model_order(model, trainable), shard=True, on_host=True, dp_group=None,
                         device=torch.device("cpu"), sliced=z3)
    opt.live = live
    sharded = {id(p) for ps in units for p in ps}
    return z3, opt, [t for t in tensors if id(t) not in sharded]


def fake_reserved(spec: Any, microbatch: int, actions: list[str] | str, **kw) -> dict:
    """:func:`memflow.cuda_alloc.replay` of :func:`step_events`: the reserved and allocated peaks (blocks
    rounded as the allocator rounds them, the workspaces included), ``peak_live``: the fake run's peak
    of live tensor bytes (what the simulator predicts), and ``phase_peaks`` (:func:`step_events`)."""
    events, peak, phases = step_events(spec, microbatch, actions, **kw)
    return dict(replay(events), peak_live=peak, phase_peaks=phases)


def not_covered(strategy: Any) -> str:
    """Why :func:`plan_reserved` cannot stand for a GPU running ``strategy`` ("" where it can): it runs
    one device's step (its swaps freed on the simulator's timeline of the copies, the optimizer stepped in
    host memory, parameters streamed from the host as ZeRO-3 offload streams them), not the flat buffers
    and collectives of several devices' data parallelism, sharding or pipeline."""
    return "more than one device" if strategy.num_devices != 1 else ""


def gpu_figures(name: str) -> tuple[int, tuple[int, int]]:
    """(compute capability's major, (multiprocessors, threads per multiprocessor)) of a GPU by its preset's
    or its own name ("a100-40gb", "NVIDIA H200"; a whole word of it: an L40S is not an L4); an H100's where
    the name has none of them."""
    norm = "-" + name.lower().replace(" ", "-").replace("_", "-") + "-"
    key = next((k for k in SMS if f"-{k}-" in norm), "h100")
    return SM_MAJOR[key], SMS[key]


def plan_reserved(spec: Any, strategy: Any, batch_size: int, *, device_name: str, dtype: str = "fp32",
                  granularity: str | int = "auto", steps: int = 2, swap_leave: dict[int, int] | None = None,
                  live_peak: int = 0) -> int:
    """The caching allocator's reserved peak (expandable segments) on a ``device_name`` GPU running a plan
    :func:`not_covered` covers: :func:`fake_reserved` of its step (two steps: the second runs over the
    first's layout, as every timed step does). A plan that swaps needs ``swap_leave``, the simulator's
    phases its swapped nodes' buffers leave the device in (:func:`memflow.planner.swap_leave`): the fake
    run frees them in that order. Where ``live_peak`` (the simulator's) is above the fake run's live peak,
    the difference is added."""
    st = strategy
    if SWAP in st.actions and swap_leave is None:
        raise ValueError("a swapped plan's reserved peak follows the simulator's timeline of its copies: "
                         "pass swap_leave")
    sm, sms = gpu_figures(device_name)
    r = fake_reserved(spec, st.microbatch_size(batch_size), list(st.actions), microbatches=st.microbatches,
                      dtype=dtype, steps=steps, workspace=cublas_workspace_bytes(sm), sms=sms,
                      granularity=granularity, optimizer_on_host=bool(st.optimizer_on_host[0]),
                      swap_leave=swap_leave, prefetch=st.prefetch, params_on_host=st.params_host(0))
    return int(r["peak_reserved"]) + max(0, int(live_peak) - int(r["peak_live"]))
