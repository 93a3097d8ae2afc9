"""Build the profiled TaskGraph of a model file's training step.

``capture_graph`` captures the step under ``FakeTensorMode`` (no real memory:
a 7B-parameter model is costed on a laptop) and traces the memory and FLOPs
of every node. ``capture_graphs`` gives the same graphs for several batch
sizes at once, from one model and (where it can) one export. Times are filled
in by :mod:`memflow.profile.timing` (measured on this host) or
:mod:`memflow.profile.roofline` (predicted for a named GPU).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sysconfig
import traceback
from typing import Any, Callable

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ..errors import CaptureError, MemflowError
from ..forking import ForkedJobs
from ..gcfreeze import freeze, long_lived, paused_collection
from ..graph.build import capture_program, fingerprint, model_signature, program_of
from ..graph.capture import Captured, split_step
from ..graph.fakebuild import build_fake
from ..graph.program import StepProgram
from ..graph.tp import record_tp
from ..graph.record import TaskGraph
from ..graph.training import autocast, casts, dense_grad, grad_meta, opt_params, unique_params
from ..model_file import flatten, import_export_modules
from . import handoff
from .timing import apply_measured_times, measure_phase_times
from .trace import trace_step

__all__ = ["capture_graph", "capture_graphs", "SharedCapture"]


def capture_graph(spec: Any, batch_size: int | None = None, *, dtype: str = "fp32",
                  granularity: str | int = "auto", measure: bool = False, repeats: int = 5,
                  seed: int = 0, accounted: bool = False, device: Any = None) -> TaskGraph:
    """The TaskGraph of one training step of ``spec``'s model at ``batch_size``.

    ``measure=False`` (default): everything runs under ``FakeTensorMode``; no
    real parameter or activation memory is allocated; nodes carry memory,
    FLOPs and bytes but no times (see :mod:`memflow.profile.roofline`).
    ``measure=True``: the step runs on real tensors on this host; memory is
    the accounted live bytes of that run and every node's forward/backward
    time is measured (median of ``repeats``), on ``device`` when given (``"cuda"``:
    the GPU at hand, timed with CUDA events; memory is its live tensor bytes).
    """
    batch_size = batch_size or spec.batch_size
    if batch_size < 1:
        raise CaptureError(f"batch size must be >= 1, got {batch_size}")
    captured, program, mode, model = capture_program(spec, batch_size, granularity=granularity, dtype=dtype,
                                                     fake=not measure, seed=seed, device=device if measure else None)
    ctx = mode if mode is not None else contextlib.nullcontext()
    try:
        with ctx:
            opt = spec.make_optimizer(opt_params(model, captured.split))
            with autocast(dtype, torch.device(device).type if device is not None and measure else "cpu"):
                graph = trace_step(program, captured.flat_inputs, opt, captured.names, captured.module_paths,
                                   model_name=spec.name, batch_size=batch_size, dtype=dtype,
                                   cpu_swap=measure and (device is None or torch.device(device).type == "cpu"))
                if measure and repeats > 0:
                    times = measure_phase_times(program, captured.flat_inputs, opt, repeats=repeats,
                                               accounted=accounted)
                    on_cpu = device is None or torch.device(device).type == "cpu"
                    swapped = (measure_phase_times(program, captured.flat_inputs, opt, repeats=repeats,
                                                   swap_all=True) if on_cpu and accounted else None)
                    sel = (measure_phase_times(program, captured.flat_inputs, opt, repeats=repeats,
                                               selective_all=True) if on_cpu and accounted else None)
                    apply_measured_times(graph, times, device=torch.device(device or "cpu").type,
                                         swap_times=swapped, selective_times=sel)
    except MemflowError:
        raise
    except Exception as e:  # noqa: BLE001
        raise trace_failed(spec.path, e, dtype) from None
    record_tp(graph, program)
    graph.fingerprint = fingerprint(model, captured, batch_size, dtype, granularity, spec.tp)
    graph.meta["model_signature"] = model_signature(model)
    graph.meta["granularity"] = str(granularity)
    graph.meta["memory_source"] = "measured" if measure else "fake"
    graph.meta["accounted_times"] = bool(measure and accounted)
    return graph


def trace_failed(path: Any, e: Exception, dtype: str) -> CaptureError:
    """The one-line error for a training step that raised while traced: the node traced then (the trace's
    ``memflow_phase``) and the last line of code outside torch and memflow it ran (the model's, or its
    library's: a custom autograd Function's backward); under bf16, a CPU kernel that oneDNN lacks on this
    machine (bf16 LSTMs with AVX2 alone) is named as such: plain training fails too; under fake tensors, a
    number read from a tensor (``.tolist()``: a mixture of experts splitting its tokens by their counts)
    says how to plan such a model."""
    first = (str(e).strip().splitlines() or [""])[0]
    hint = ""
    if dtype == "bf16" and "primitive descriptor" in first:
        hint = " (this CPU has no bf16 kernel for an op of the model, so plain training fails too: use --dtype fp32)"
        first = first.split(". ")[0]
    if type(e).__name__ == "DataDependentOutputException":
        hint = (" (a prediction with fake tensors has no values: the model reads a number from a tensor, .item() or "
                ".tolist(), to size what follows, as a mixture of experts splitting its tokens by their counts does; "
                "profile it with real tensors: on a GPU of that kind (--measure) or for this host's CPU (--gpu-type "
                "cpu); or size it without reading a tensor: every expert on every token, or a fixed capacity per "
                "expert)")
    node = getattr(e, "memflow_phase", None)
    where = (f" in {node}" if node else "") + _code_line(e)
    return CaptureError(f"{path}: tracing the training step failed{where}: {type(e).__name__}: {first[:300]}{hint}")


_OWN = (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(os.path.dirname(__file__)) + os.sep,
        sysconfig.get_paths()["stdlib"] + os.sep)


def _code_line(e: BaseException) -> str:
    """`` at file.py:line (`code`)``: the last frame of ``e``'s traceback outside torch, memflow and the
    standard library (the model's code or its library's), or ""."""
    for f in reversed(traceback.extract_tb(e.__traceback__)):
        if not f.filename.startswith(_OWN) and not f.filename.startswith("<"):
            code = (f.line or "").strip()
            return f" at {os.path.basename(f.filename)}:{f.lineno}" + (f" (`{code[:80]}`)" if code else "")
    return ""


def _batch_dims(batches: dict[int, list]) -> list[bool] | None:
    """Per flat input, whether its leading dimension is the batch dimension, when the
    batches at these sizes differ only there (every input a tensor; the rest of
    each shape and every dtype the same); otherwise None."""
    sizes = list(batches)
    first = batches[sizes[0]]
    if not first or any(len(batches[b]) != len(first) for b in sizes):
        return None
    dims = []
    for i, t0 in enumerate(first):
        ts = [batches[b][i] for b in sizes]
        if not all(isinstance(t, torch.Tensor) and t.dtype == t0.dtype and t.dim() == t0.dim() for t in ts):
            return None
        if all(t.shape == t0.shape for t in ts):
            dims.append(False)
        elif t0.dim() > 0 and all(t.shape[0] == b and t.shape[1:] == t0.shape[1:] for t, b in zip(ts, sizes)):
            dims.append(True)
        else:
            return None
    return dims if any(dims) else None


def capture_graphs(spec: Any, sizes: list[int], *, dtype: str = "fp32", granularity: str | int = "auto",
                   seed: int = 0, processes: int = 1, on_built: Callable[[], None] | None = None
                   ) -> dict[int, TaskGraph]:
    """``{b: capture_graph(spec, b, dtype=dtype, granularity=granularity)}`` for every size, faster.

    The graphs are the same ones (fake mode, no times); what is shared is the work
    that does not depend on the batch size: the model is built once, one export
    with a symbolic batch dimension serves every size >= 2 (a size-1 batch gets
    its own export: torch specialises size-1 dimensions, so the general program
    need not be the one exported at size 1; a batch whose shapes do not scale
    along the leading dimension gets one export per size), and one optimizer
    state serves every size, so no size runs a warm-up step (the traced steps
    are steady-state steps either way, and meet a warm fake-tensor cache; see
    :func:`memflow.profile.trace.trace_step`; under autocast each size still
    warms up, forward and backward, for autocast's cache of parameter casts). The state is made before any
    export by one optimizer step on gradients of the parameters' own layouts
    (:meth:`SharedCapture.make_state`); a traced backward whose gradients differ
    from those has its size traced again after a real warm-up step. Where the
    symbolic export or a trace through it fails, those sizes are captured one by
    one as before.

    ``processes`` > 1 (and ``fork`` available): the fixed-size exports run in a
    forked process beside the symbolic export, and the symbolic program's sizes
    are shared with up to ``processes`` more forked after it. The first of these makes the
    optimizer state and records the optimizer phase of a steady-state step on its
    own (:func:`memflow.profile.trace.opt_phase_alone`: the phase does not depend
    on the batch), and sends both here before its export; this process rebuilds
    the state from that description, and no size steps the optimizer, here or
    there (without them the state is made here and the first symbolic size steps
    in full). Results come back pickled; a process that fails has its sizes
    captured here, one by one. ``on_built()`` is called here once the model is built (side work
    that may fork then; not when a single size is captured).
    """
    sizes = list(dict.fromkeys(sizes))
    for b in sizes:
        if b < 1:
            raise CaptureError(f"batch size must be >= 1, got {b}")
    if len(sizes) < 2:
        return {b: capture_graph(spec, b, dtype=dtype, granularity=granularity, seed=seed) for b in sizes}
    # the model and the programs outlive every traced step; the steps' garbage is freed by
    # reference counting (fake tensors: nothing real waits on a collection)
    with long_lived(), paused_collection():
        return _capture_graphs(spec, sizes, dtype=dtype, granularity=granularity, seed=seed, processes=processes,
                               on_built=on_built)


def _capture_graphs(spec: Any, sizes: list[int], *, dtype: str, granularity: str | int, seed: int,
                    processes: int, on_built: Callable[[], None] | None) -> dict[int, TaskGraph]:
    shared = SharedCapture(spec, sizes, dtype=dtype, granularity=granularity, seed=seed)
    if on_built is not None:
        on_built()
    general = [b for b in sizes if b >= 2]
    dims = _batch_dims({b: shared.batches[b] for b in general}) if len(general) >= 2 else None
    symbolic = general if dims is not None else []
    fixed = [b for b in sizes if b not in symbolic]

    if processes > 1:  # (imported once here, not in each process forked below as it exports)
        import_export_modules()
    forked: list[tuple[list[int], ForkedJobs]] = []
    taking = None  # (connection, gradient layouts): the fixed-size process makes the state and sends it
    state = None
    if processes > 1 and fixed and symbolic:
        # the process forked for the fixed sizes makes the optimizer state, records the optimizer
        # phase on its own and sends both here before its first export; this process goes
        # straight to the symbolic export and takes them after it (neither steps an optimizer here)
        layouts = handoff.grad_layouts(shared)
        ends = handoff.pipe() if layouts is not None else None
        if ends is not None:
            theirs, tx = fixed, ends[1]
            h = ForkedJobs(lambda t=theirs: shared.trace_fixed(t, shared.make_state(), early=tx)[0])
            tx.close()  # the child holds the sending end now: its exit ends the wait for it
            if h.running:
                forked.append((theirs, h))
                fixed = []
                taking = (ends[0], layouts)
            else:
                ends[0].close()
    if taking is None:
        state = shared.make_state()
        freeze()
        if processes > 1 and fixed and (symbolic or len(fixed) > 1):
            theirs = fixed if symbolic else fixed[len(fixed) // 2:]
            forked.append((theirs, ForkedJobs(lambda t=theirs, st=state: shared.trace_fixed(t, st)[0])))
            if forked[-1][1].running:
                fixed = [b for b in fixed if b not in theirs]
            else:
                forked.pop()
    graphs: dict[int, TaskGraph] = {}
    if symbolic:
        prog = shared.symbolic_program(max(symbolic), dims)
        if taking is not None:
            state = handoff.take(shared, *taking, prog[1] if prog is not None else None)
        freeze()
        if prog is None:  # not exportable with a symbolic batch: one export per size
            fixed = [b for b in sizes if b in fixed or b in symbolic]
        else:
            # the first size is traced in full here; the process forked after it starts with its
            # optimizer phase, which the later sizes take instead of stepping (OptPhase). With
            # that phase in hand already (sent by the size-1 process), no size steps: fork at once
            first, rest = symbolic[:1], symbolic[1:]
            if shared.opt_phase is not None and shared.opt_phase[0] is prog[1]:
                first, rest = [], symbolic
            got, state = shared.trace(prog, first, state) if first else ({}, state)
            mine = rest
            if got is not None and processes > 1 and len(rest) >= 2:
                # the sizes in up to `processes` + 1 parts, this process's the largest (a forked
                # process starts slower), one forked process for each other: the fixed-size
                # process is through its own export by now, so three traces take two cores
                parts = min(len(rest), processes + 1)
                groups, i = [], 0
                for k in range(parts):
                    n = len(rest) // parts + (k < len(rest) % parts)
                    groups.append(rest[i:i + n])
                    i += n
                for theirs in groups[1:]:
                    h = ForkedJobs(lambda t=theirs, st=state: shared.trace(prog, t, st)[0])
                    if h.running:
                        forked.append((theirs, h))
                        mine = [b for b in mine if b not in theirs]
            if got is not None:
                more, state = shared.trace(prog, mine, state)
                got = None if more is None else {**got, **more}
            if got is None:  # the symbolic program could not run: the model is left mid-step, so
                # everything left here is captured one by one, each on a fresh model
                got = {b: capture_graph(spec, b, dtype=dtype, granularity=granularity, seed=seed)
                       for b in sizes if b in first or b in mine or b in fixed}
                fixed = []
            graphs.update(got)
    graphs.update(shared.trace_fixed(fixed, state)[0])
    for theirs, h in forked:
        got = h.result()
        if got is None:
            got = {b: capture_graph(spec, b, dtype=dtype, granularity=granularity, seed=seed) for b in theirs}
        graphs.update(got)
    return {b: graphs[b] for b in sizes}


class SharedCapture:
    """One fake model and its batches at several sizes; programs exported from it and traced."""

    def __init__(self, spec: Any, sizes: list[int], *, dtype: str, granularity: Any, seed: int):
        self.spec, self.dtype, self.granularity = spec, dtype, granularity
        self.made_grads: dict | None = None  # gradient layouts make_state assumed, until a trace confirms them
        self.opt_phase: tuple | None = None  # (program, OptPhase) of a full traced step: later sizes reuse it
        self.mode = FakeTensorMode(allow_non_fake_inputs=True)
        torch.manual_seed(seed)
        self.model = build_fake(spec, self.mode)
        self.model.train()
        rng = torch.get_rng_state()
        self.made: dict[int, Any] = {}
        self.batches: dict[int, list] = {}  # flat inputs
        for b in sizes:
            torch.set_rng_state(rng)  # each batch made as if right after the build, as capture_program does
            with self.mode:
                self.made[b] = spec.batch(b)
            self.batches[b] = flatten(self.made[b])[0]

    def make_state(self) -> dict | None:
        """The optimizer state a first step makes, without running the step (None if the
        optimizer cannot step this way).

        Every trainable parameter gets a gradient of its own layout (shape, strides,
        dtype: what autograd gives a dense parameter) and the optimizer steps once.
        Fake tensors hold no values, so an optimizer sees nothing of a gradient but
        that layout: this is the state a warm-up step makes whenever the traced
        backward gives every such parameter, and only those, a gradient of that
        layout. :meth:`trace` checks that it does, and otherwise traces that size
        again after a warm-up step."""
        if casts(self.dtype):  # under autocast every size warms up anyway (see trace_step)
            return None
        params = [p for p in unique_params(self.model) if p.requires_grad]
        try:
            with self.mode:
                opt = self.spec.make_optimizer(params)
                for p in params:
                    p.grad = dense_grad(p)
                self.made_grads = {p: grad_meta(p.grad) for p in params}
                with autocast(self.dtype):
                    opt.step()
                opt.zero_grad(set_to_none=True)
        except Exception:  # noqa: BLE001 - any optimizer that will not: the first size's warm-up makes it
            for p in params:
                p.grad = None
            self.made_grads = None
            return None
        return opt.state

    def symbolic_program(self, b: int, dims: list[bool]) -> tuple[Captured, StepProgram] | None:
        """The step exported at size ``b`` with a symbolic batch dimension (None if torch cannot)."""
        try:
            with autocast(self.dtype):
                captured = split_step(self.spec, self.model, self.made[b], self.granularity, batch_dims=dims)
            with self.mode:
                program = program_of(captured, self.spec.tp, 0, self.spec.sequence)
        except Exception:  # noqa: BLE001
            return None
        return (captured, program) if captured.symbolic_batch else None

    def trace_fixed(self, sizes: list[int], state: Any, early: Any = None) -> tuple[dict[int, TaskGraph], Any]:
        """Each size exported at that size and traced (errors as :func:`capture_graph` raises them).

        ``early``: a connection that first gets the state's description and the optimizer phase
        recorded on its own, for the process tracing the symbolic program
        (:mod:`memflow.profile.handoff`); the sizes here take that optimizer phase too."""
        loose = handoff.send(self, state, early) if early is not None else None
        graphs: dict[int, TaskGraph] = {}
        for b in sizes:
            with autocast(self.dtype):
                captured = split_step(self.spec, self.model, self.made[b], self.granularity)
            with self.mode:
                program = program_of(captured, self.spec.tp, 0, self.spec.sequence)
            if loose is not None:
                handoff.adopt(self, loose, program)
                loose = None
            got, state = self.trace((captured, program), [b], state, fixed=True)
            graphs.update(got)
        return graphs, state

    def trace(self, prog: tuple[Captured, StepProgram], sizes: list[int], state: Any,
              fixed: bool = False) -> tuple[dict[int, TaskGraph] | None, Any]:
        """Trace ``prog`` at each size. ``state``: optimizer state (by parameter) from an earlier
        traced size or :meth:`make_state`, or None (the first size's warm-up makes it). Returns
        (graphs, state); a failure is raised on a fixed-size program and gives (None, None) on a
        symbolic one."""
        graphs: dict[int, TaskGraph] = {}
        for b in sizes:
            try:
                graph, opt = self._trace_one(prog, b, state)
            except MemflowError:
                raise
            except Exception as e:  # noqa: BLE001
                if not fixed:
                    return None, None
                raise trace_failed(self.spec.path, e, self.dtype) from None
            state = opt.state
            graphs[b] = graph
        return graphs, state

    def _trace_one(self, prog: tuple[Captured, StepProgram], b: int, state: Any) -> tuple[TaskGraph, Any]:
        spec, dtype = self.spec, self.dtype
        captured, program = prog
        inputs = self.batches[b]
        # the optimizer phase does not depend on the batch: once a step of this program has
        # been traced in full, later sizes skip the optimizer step and take that phase from it
        reuse = self.opt_phase[1] if (self.opt_phase is not None and self.opt_phase[0] is program
                                      and state is not None) else None
        got: list = []
        with self.mode:
            params = unique_params(captured.split)
            check = state is not None and self.made_grads is not None
            seen: dict | None = {} if check else None
            stepped = opt_params(self.model, captured.split)
            opt = spec.make_optimizer(stepped)
            if state is not None:
                for prm in params:
                    if prm in state:
                        opt.state[prm] = state[prm]
            with autocast(dtype):
                graph = trace_step(program, inputs, opt, captured.names, captured.module_paths,
                                   model_name=spec.name, batch_size=b, dtype=dtype,
                                   state_ready=state is not None, warm_up=casts(dtype), grads=seen,
                                   opt_phase=reuse, opt_out=got)
            if check:
                made = self.made_grads
                if any(seen.get(p) != made.get(p) for p in params if p.requires_grad or p in seen):
                    # the state made without a step is not the one a warm-up makes here: warm up
                    self.made_grads = None
                    self.opt_phase = None
                    got = []
                    opt = spec.make_optimizer(stepped)
                    with autocast(dtype):
                        graph = trace_step(program, inputs, opt, captured.names, captured.module_paths,
                                           model_name=spec.name, batch_size=b, dtype=dtype)
                else:
                    self.made_grads = None  # confirmed: the state is a warm-up's from here on
            if got:
                self.opt_phase = (program, got[0])
        record_tp(graph, program)
        graph.fingerprint = fingerprint(self.model, dataclasses.replace(captured, flat_inputs=inputs), b,
                                        dtype, self.granularity, spec.tp)
        graph.meta["model_signature"] = model_signature(self.model)
        graph.meta["granularity"] = str(self.granularity)
        graph.meta["memory_source"] = "fake"
        graph.meta["accounted_times"] = False
        return graph, opt
