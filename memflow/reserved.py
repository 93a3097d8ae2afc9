"""A GPU's reserved memory for a plan, from a fake run of its step replayed through the allocator model.

The simulator predicts live tensor bytes per phase; the caching allocator's reserved memory also
depends on the order and sizes of every allocation (:mod:`memflow.cuda_alloc`). For a single-stage
plan without swap, offload or sharding (keep, recompute, selective, micro-batches), this runs the
step's node program on fake tensors as the executor runs it on one GPU (CUDA's autocast,
:func:`memflow.graph.training.gpu_semantics`; the plan's per-node actions; ``steps`` steps with the
optimizer; each micro-batch's forward under autocast, its backward outside, as the executor),
records every storage allocated and freed on the device in order, adds the two cuBLAS workspaces where the first matmul of the forward's thread and of the backward's thread allocate them
(:mod:`memflow.gpumem`), and replays that through the allocator model.

What it cannot see is what CUDA kernels allocate inside themselves: measured on the H200, CUDA's
fp32 attention backward allocates blocks the CPU's does not (48, 132 and 132.75 MiB per GPT-2 block
at batch 8 × 1024), which the fake sequence lacks; that is why recompute-all's replay lands under its
measured reserved memory (``python -m bench.bench_gpu --replay``). Swap's copies depend on timing
and are left out.
"""
from __future__ import annotations

import contextlib
from typing import Any

from .cuda_alloc import replay
from .gpumem import cublas_workspace_bytes
from .memory import LiveBytes

__all__ = ["step_events", "fake_reserved"]

_MATMULS = frozenset({"mm", "addmm", "bmm", "baddbmm", "linear", "_scaled_mm"})


class _Sequence(LiveBytes):
    """LiveBytes that also lists device allocations and frees in order, as allocator events."""

    def __init__(self, workspace: int):
        super().__init__()
        self.alloc_events: list = []
        self._tok: dict[int, int] = {}
        self._n = 0
        self.backward = False
        self._workspace = workspace
        self._has_ws = [False, False]  # (the forward's thread, autograd's)

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

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self._workspace and func.overloadpacket.__name__ in _MATMULS and not self._has_ws[self.backward]:
            self._has_ws[self.backward] = True
            self._emit(self._workspace)
        return super().__torch_dispatch__(func, types, args, kwargs)


def step_events(spec: Any, microbatch: int, actions: list[str] | str, *, microbatches: int = 1,
                dtype: str = "fp32", steps: int = 3, workspace: int | None = None) -> list:
    """The device's allocator events (``[action, token, bytes, stream]``) of ``steps`` training steps of a
    single-stage plan, run on fake tensors as a GPU runs them (see the module's docstring), and the run's
    peak of live tensor bytes."""
    import torch

    from .graph.actions import make_wrap
    from .graph.build import capture_program
    from .graph.gpu_autocast import CudaAutocast
    from .graph.training import casts, gpu_semantics, opt_params

    ws = cublas_workspace_bytes() if workspace is None else workspace
    low = casts(dtype)
    with gpu_semantics(True):
        captured, program, mode, model = capture_program(spec, microbatch, fake=True, dtype=dtype)
    n = program.n
    acts = [actions] * n if isinstance(actions, str) else list(actions)
    live = _Sequence(ws)
    # as the executor steps: each micro-batch's forward under autocast (its cast cache dies with it), the
    # backward and the optimizer outside it; a recompute's replay restores autocast itself, and CUDA's
    # rules apply wherever autocast is on
    rules = CudaAutocast(torch.bfloat16) if low else contextlib.nullcontext()
    with mode, rules:
        params = opt_params(model, captured.split)
        live.track(params + list(captured.split.buffers()), kind="state")
        opt = spec.make_optimizer(params)
        wrap = make_wrap(acts, None, preserve_rng_state=False)
        for _ in range(steps):
            with live:
                # every micro-batch's data loaded as the step starts, each dropped after its backward
                data = [[t.clone() if isinstance(t, torch.Tensor) else t for t in captured.flat_inputs]
                        for _m in range(microbatches)]
                opt.zero_grad(set_to_none=True)
                for i in range(microbatches):
                    live.backward = False
                    with (torch.autocast("cpu", dtype=torch.bfloat16) if low else contextlib.nullcontext()):
                        env = program.initial_env(data[i])
                        states = []
                        for k in range(n):
                            states.append(program.forward_node(k, env, wrap=wrap))
                            program.drop_dead(env, k)
                    live.backward = True
                    grads: dict = {}
                    for k in range(n - 1, -1, -1):
                        program.backward_node(k, states[k], grads)
                        states[k] = None
                    del env, grads
                    data[i] = None
                live.backward = False
                opt.step()
    return live.alloc_events, live.peak


def fake_reserved(spec: Any, microbatch: int, actions: list[str] | str, **kw) -> dict:
    """:func:`memflow.cuda_alloc.replay` of :func:`step_events`: the reserved and allocated peaks (blocks
    rounded as the allocator rounds them, the workspaces included), and ``peak_live``: the fake run's peak
    of live tensor bytes (what the simulator predicts)."""
    events, peak = step_events(spec, microbatch, actions, **kw)
    return dict(replay(events), peak_live=peak)
