"""Orchestration: a PlanRequest → profiled graphs → search → Plan.

This is the one place that imports the stages (graph, profile, simulator,
search) and puts them together; the CLI, the experiment files and
:func:`memflow.plan` call it with a :class:`~memflow.request.PlanRequest`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from pathlib import Path
from typing import Any, Callable

import torch

from .cluster import Cluster, Link
from .devices import measure_cuda_host_link
from .errors import ConfigError, ModelLoadError, PlanMismatchError
from .gcfreeze import freeze, long_lived, paused_collection
from .gpumem import CONTEXT_BYTES
from .batchrows import whole_batch
from .inflight import carried_state, one_in_flight, routed_sizes
from .graph.build import capture_program, fingerprint
from .graph.record import TaskGraph
from .graph.tp import MEGATRON_SP, REPLICATED, SEQUENCE, uses_sequence
from .kinds import SELECTIVE, SWAP, replay_safe
from .model_file import DEFAULT_BATCH_SIZE, ModelSpec, load_model_file
from .modelenv import applied, file_sha256, model_env
from .planfile import Plan
from .profile import ProfileCache, cache_key, profile_model, profile_models
from .profile.build import capture_graph
from .profile.concurrent import concurrent_phase_times
from .profile.timing import apply_measured_times
from .progress import SILENT, Progress, as_progress, reporting
from .records import BaselineResult, MemoryBreakdown, ParetoPoint, PlanSettings, Prediction
from .request import PlanRequest
from .reserved import not_covered, plan_reserved
from .search import MeshLimits, SearchContext, default_iterations, mesh_choices, search, solve_exact
from .simulator import SimResult, Simulator
from .sizes import profile_sizes
from .simulator.tp import allreduce_s
from .strategy import Strategy
from .units import format_bytes, parse_bytes

__all__ = ["plan", "plan_request", "swap_leave", "resolve_spec", "resolve_cluster", "micro_batch_sizes", "GraphSource",
           "baseline_result", "plan_graph", "simulate_plan", "search_problem", "check_model", "prove_no_fit",
           "plan_environment", "prediction", "usable_cluster", "current_prediction"]


def resolve_spec(model: Any, example_batch: Callable | None = None, batch_size: int | None = None,
                 loss_fn: Callable | None = None) -> ModelSpec:
    """A ModelSpec from a model file path, a ModelSpec, or a module + example_batch (+ loss_fn)."""
    if isinstance(model, ModelSpec):
        return dataclasses.replace(model, loss_fn=loss_fn) if loss_fn is not None else model
    if isinstance(model, (str, os.PathLike)):
        spec = load_model_file(model)
        return dataclasses.replace(spec, loss_fn=loss_fn) if loss_fn is not None else spec
    if isinstance(model, torch.nn.Module):
        if example_batch is None:
            raise ModelLoadError("planning a module needs example_batch: a function batch_size -> batch "
                                 "(a dict of tensors, or an (inputs, target) pair with loss_fn)")
        module = model
        return ModelSpec(path=Path("<module>"), name=type(model).__name__, build_model=lambda: module,
                         example_batch=example_batch, loss_fn=loss_fn,
                         batch_size=batch_size or DEFAULT_BATCH_SIZE)
    raise ModelLoadError(f"model must be a model file path, a ModelSpec or an nn.Module, got {type(model).__name__}")


def resolve_cluster(cluster: Any = None, *, gpus: int | None = None, gpu_type: str | None = None,
                    gpu_memory: Any = None) -> Cluster:
    """A Cluster from a preset name / YAML path / Cluster, or from gpus / gpu_type / gpu_memory."""
    mem = parse_bytes(gpu_memory, name="--gpu-memory", allow_zero=False) if gpu_memory is not None else None
    if cluster is not None:
        c = cluster if isinstance(cluster, Cluster) else Cluster.load(cluster)
        if gpus is not None and gpus != c.num_devices:
            c = c.with_devices(gpus)
    else:
        c = Cluster.for_gpus(1 if gpus is None else gpus, gpu_type or "v100-16gb")
    if mem is not None:
        c = c.with_memory(mem)
    return c


MAX_MICROBATCHES = 32  # the most micro-batches a plan may use (profiled sizes and the search agree on it)


def micro_batch_sizes(batch_size: int, num_devices: int, limits: MeshLimits | None = None) -> list[int]:
    """Every micro-batch size B // (dp × m) a strategy on ``num_devices`` devices can use within ``limits``
    (at most :data:`MAX_MICROBATCHES` micro-batches unless they say fewer)."""
    choices = mesh_choices(num_devices, batch_size, mesh_limits(limits))
    return sorted({batch_size // (d * m) for d, ms in choices.items() for m in ms}, reverse=True)


def mesh_limits(limits: MeshLimits | None) -> MeshLimits:
    """``limits`` with the planner's bound on micro-batches where they set none."""
    limits = limits or MeshLimits()
    return limits if limits.max_microbatches else dataclasses.replace(limits, max_microbatches=MAX_MICROBATCHES)


def request_limits(req: PlanRequest) -> MeshLimits:
    return mesh_limits(MeshLimits(dp=req.dp, pp=req.pp, microbatches=req.microbatches,
                                  max_microbatches=req.max_microbatches, sharding=req.sharding,
                                  offload=req.offload))


@contextlib.contextmanager
def _threads(n: int):
    old = torch.get_num_threads()
    torch.set_num_threads(max(1, n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


class GraphSource:
    """Costed task graphs per micro-batch size for one model, precision and device (cached)."""

    def __init__(self, spec: ModelSpec, cluster: Cluster, *, dtype: str = "fp32", granularity: Any = "auto",
                 progress: Progress = SILENT, cache: bool = True, measure: bool | None = None, tp: int = 1,
                 sequence: bool = True):
        # tp > 1: every graph is one tensor-parallel rank's share of the step (memflow.graph.tp), with
        # sequence parallelism or without
        if (tp, sequence) != (spec.tp, spec.sequence):
            spec = dataclasses.replace(spec, tp=tp, sequence=sequence)
        self.spec, self.cluster, self.dtype, self.granularity = spec, cluster, dtype, granularity
        self.progress, self.cache = progress, cache
        # None: measured on cpu-N, predicted for a named GPU; True: measured on this host's GPU too
        self.measure = measure
        self.graphs: dict[int, TaskGraph] = {}
        # on cpu-N, N processes share this host's cores: measure with each rank's share
        self.threads = max(1, (os.cpu_count() or 1) // max(1, cluster.devices_per_node))

    def __call__(self, micro_batch: int) -> TaskGraph:
        n = self.cluster.devices_per_node
        if micro_batch not in self.graphs and self._concurrent():
            self._cpu_concurrent([micro_batch], n)
        if micro_batch not in self.graphs:
            ctx = _threads(self.threads) if self.cluster.device.kind == "cpu" else contextlib.nullcontext()
            with ctx:
                self.graphs[micro_batch] = profile_model(
                    self.spec, micro_batch, device=self.cluster.device, dtype=self.dtype,
                    granularity=self.granularity, cache=self.cache, measure=self.measure)
        return self.graphs[micro_batch]

    def all(self, sizes: list[int]) -> dict[int, TaskGraph]:
        """The graph at every size in ``sizes`` (profiled, or from the cache), with progress per size."""
        if self._concurrent():
            self._cpu_concurrent([b for b in sizes if b not in self.graphs], self.cluster.devices_per_node)
        todo = [b for b in sizes if b not in self.graphs]
        if not todo:
            return {b: self.graphs[b] for b in sizes}
        how = "measured here" if self.measured else "predicted, fake tensors"
        with self.progress.task(f"profiling {self.spec.name} for {self.cluster.device.name} ({how})", len(todo),
                                "size") as task, reporting(task):
            if len(todo) > 1 and not self.measured:
                # predicted costs: the sizes share one model and one export (profile_models)
                self.graphs.update(profile_models(self.spec, todo, device=self.cluster.device, dtype=self.dtype,
                                                  granularity=self.granularity, cache=self.cache,
                                                  processes=min(2, os.cpu_count() or 1)))
                task.update(len(todo), note=f"micro-batch sizes {todo}")
            for b in todo:
                if b not in self.graphs:
                    self(b)
                    task.update(1, note=f"micro-batch {b}")
        return {b: self.graphs[b] for b in sizes}

    @property
    def measured(self) -> bool:
        """Costs measured on this host (cpu-N, or ``--measure`` on a GPU), not predicted."""
        return self.cluster.device.kind == "cpu" or bool(self.measure)

    def _concurrent(self) -> bool:
        """cpu-N with N > 1 and a model file the timing processes can load."""
        return (self.cluster.device.kind == "cpu" and self.cluster.devices_per_node > 1
                and Path(self.spec.path).is_file())

    def _cpu_concurrent(self, sizes: list[int], n: int) -> None:
        """cpu-N: memory traced here, phase times measured in N concurrent processes (cached)."""
        keys = {b: cache_key(self.spec, b, self.dtype, self.granularity, f"cpu-concurrent{n}", True) for b in sizes}
        store = ProfileCache() if self.cache else None
        todo = []
        for b in sizes:
            g = store.get(keys[b]) if store else None
            if g is not None:
                self.graphs[b] = g
            else:
                todo.append(b)
        if not todo:
            return
        self.spec.batch(max(todo))  # (a model file's batch error, in one line, before any process starts)
        with self.progress.task(f"timing {self.spec.name} as {n} concurrent ranks", len(todo), "size") as task:
            times = concurrent_phase_times(self.spec, todo, n, granularity=self.granularity, dtype=self.dtype,
                                           progress=self.progress.note)
            task.update(len(todo), note=f"micro-batch(es) {todo}")
        with _threads(self.threads), self.progress.task(f"tracing {self.spec.name}'s memory", len(todo),
                                                        "size") as task, reporting(task):
            for b in todo:
                g = capture_graph(self.spec, b, dtype=self.dtype, granularity=self.granularity, measure=True, repeats=0)
                apply_measured_times(g, times[b]["keep"], device="cpu", swap_times=times[b]["swap"],
                                     selective_times=times[b]["selective"])
                g.meta["accounted_times"] = True
                g.meta["concurrent_processes"] = n
                self.graphs[b] = g
                if store:
                    store.put(keys[b], g)
                task.update(1, note=f"micro-batch {b}")


def baseline_result(ev: Any, tp: int = 1) -> BaselineResult:
    """A search Evaluation as the plan records a baseline (a search at tp > 1: each group's peak is
    every one of its ranks')."""
    return BaselineResult(fits=bool(ev.fits), step_time_s=float(ev.step_time_s),
                          peak_bytes=[int(x) for x in ev.peak_bytes for _ in range(tp)])


@contextlib.contextmanager
def search_progress(progress: Progress, what: str, iterations: int | None):
    """A search ``progress(iteration, best_time_s, fits)`` callback drawing the first chain's iterations
    as a task, with the best time so far and whether anything fits yet."""
    with progress.task(what, iterations, "it") as task:
        def cb(it: int, best: float | None, fits: bool) -> None:
            task.set(it, note=f"best {best * 1e3:,.1f} ms" if (best is not None and fits) else "nothing fits yet")

        yield cb


def resolve_request(req: PlanRequest) -> tuple[ModelSpec, Cluster, Cluster, int]:
    """(spec, cluster, cluster with the usable memory, global batch) of a plan request."""
    spec = resolve_spec(req.model, req.example_batch, req.batch_size, req.loss_fn)
    cl = resolve_cluster(req.cluster, gpus=req.gpus, gpu_type=req.gpu_type, gpu_memory=req.gpu_memory)
    B = req.batch_size or spec.batch_size
    if req.measure and cl.device.kind == "gpu" and torch.cuda.is_available():
        # what a swap moves here: the pinned copy rate of this host's GPU, the slower direction
        cl = dataclasses.replace(cl, host_link=Link(min(measure_cuda_host_link()), cl.host_link.latency))
    usable = cl.with_memory(int(cl.device.memory_bytes * (1.0 - req.headroom))) if req.headroom else cl
    return spec, cl, usable, B


def make_request(model: Any, example_batch: Callable | None, loss_fn: Callable | None, options: dict) -> PlanRequest:
    if isinstance(model, PlanRequest):
        if example_batch is not None or loss_fn is not None or options:
            raise ConfigError("give a PlanRequest alone, or a model with keyword options, not both")
        return model
    try:
        return PlanRequest(model, example_batch=example_batch, loss_fn=loss_fn, **options)
    except TypeError as e:
        raise ConfigError(f"plan(): {e}") from None


def search_problem(model: Any, example_batch: Callable | None = None, loss_fn: Callable | None = None,
                   **options: Any) -> tuple[dict[int, TaskGraph], int, Cluster]:
    """What :func:`plan` with these arguments searches: ``(graphs by micro-batch size, global batch,
    cluster with the usable memory)``, e.g. for :func:`memflow.search.solve_exact` on a small graph."""
    req = make_request(model, example_batch, loss_fn, options)
    spec, cl, usable, B = resolve_request(req)
    source = GraphSource(spec, cl, dtype=req.dtype, granularity=req.granularity, cache=req.cache,
                         measure=req.measure or None, tp=req.tp or 1)
    usable = usable.grouped(req.tp or 1)
    return source.all(micro_batch_sizes(B, usable.num_devices, whole_batch(spec, B, request_limits(req)))), B, usable


def plan(model: Any, example_batch: Callable | None = None, loss_fn: Callable | None = None, *,
         progress: Progress | Callable[[str], None] | None = SILENT, **options: Any) -> Plan:
    """Find the fastest strategy that fits, and return it as an executable :class:`Plan`.

    ``model``: a model file path (``build_model``/``example_batch``), an ``nn.Module`` with
    ``example_batch(batch_size)`` (and ``loss_fn(output, target)`` where the output has no
    ``loss``), or a :class:`~memflow.request.PlanRequest`. ``options`` are the request's fields:
    ``cluster`` (a preset name such as ``"v100-4-pcie"`` or ``"cpu-2"``, a YAML path or a
    Cluster) or ``gpus``/``gpu_type``/``gpu_memory`` (``"16GiB"``); ``batch_size``, ``dtype``,
    ``granularity``, ``seed``, ``time_budget_s``, ``iterations``, ``headroom`` (the fraction of
    each device's memory the plan leaves free), ``measure`` (time every node on this host's GPU
    instead of predicting from FLOPs and bytes; ``cpu`` costs are always measured), ``cache``.
    ``progress``: a :class:`~memflow.progress.Progress` to show the work, or a callable given one
    line at a time (``progress=print``); silent by default (the CLI draws progress bars). Times in seconds, memory in bytes. Example::

        p = memflow.plan("examples/gpt2.py", gpus=4, gpu_type="v100-16gb")
        print(p.predicted.step_time_s, p.strategy.summary())
    """
    return plan_request(make_request(model, example_batch, loss_fn, options), progress=as_progress(progress))


def plan_request(req: PlanRequest, *, progress: Progress = SILENT) -> Plan:
    """:func:`plan` for a validated request."""
    spec, cl, usable, B = resolve_request(req)
    with long_lived():  # what exists now, then the graphs, outlive everything the search makes
        return _plan(spec, cl, usable, B, req, progress)


def tp_degrees(cl: Cluster, req: PlanRequest) -> list[int]:
    """The tensor-parallel degrees a plan searches: the one the request fixes; else, where a machine's
    devices talk over an NVLink-class link (at least :data:`TP_LINK_BANDWIDTH`: Megatron's setting;
    over PCIe its all-reduces per layer cost more than they save), 1, 2 and a whole machine of at most
    8 (Megatron's choice), each one more capture and search (the degrees between are left to ``--tp``:
    with 4 too, GPT-2 medium on 64 × A100 plans in 65 s instead of 43 s, and tp 4 does not win there);
    otherwise, and on ``cpu-N`` (its graphs are measured, minutes per degree), only 1."""
    if req.tp is not None:
        return [req.tp]
    if cl.device.kind == "cpu" or cl.intra_link.bandwidth < TP_LINK_BANDWIDTH:
        return [1]
    n = cl.devices_per_node
    return sorted(t for t in {1, 2, min(n, 8)} if n % t == 0)


TP_LINK_BANDWIDTH = 100e9  # bytes/s: the devices of a machine an unfixed plan splits tensors over


@dataclasses.dataclass
class _TPRun:
    """One tensor-parallel degree's search."""

    tp: int
    grouped: Cluster  # the usable cluster, a device per tensor-parallel group
    graphs: dict
    result: Any
    sequence: bool = True  # (tp > 1) the graphs split the ops between Megatron's pairs by tokens
    limits: Any = None  # the mesh limits it searched within (the request's, bounded by what the model allows)

    @property
    def tokens_split(self) -> bool:
        """Some node of these graphs is split by tokens (sequence parallelism found something)."""
        g = next(iter(self.graphs.values()))
        return self.tp > 1 and bool({MEGATRON_SP, SEQUENCE} & {nd.partitioning for nd in g.nodes})


def _search_tp(spec: ModelSpec, cl: Cluster, usable: Cluster, B: int, req: PlanRequest, progress: Progress,
               tp: int, share: float = 1.0, sequence: bool = True, unsplit: set[int] | None = None
               ) -> _TPRun | None:
    """The search at one tensor-parallel degree (with sequence parallelism or without), given ``share``
    of the request's time budget; None where tp > 1 splits nothing and was not asked for (the degree is
    then added to ``unsplit``: a multiple of it splits nothing either, every split needing a dimension
    divisible by the degree)."""
    source = GraphSource(spec, cl, dtype=req.dtype, granularity=req.granularity, progress=progress,
                         cache=req.cache, measure=req.measure or None, tp=tp, sequence=sequence)
    limits = whole_batch(spec, B, request_limits(req))  # (a graph batch: inputs not split by rows)
    try:
        grouped = usable.grouped(tp)  # (tp > 1: a device per tensor-parallel group; ConfigError if it cannot)
        sizes = micro_batch_sizes(B, grouped.num_devices, limits)
    except ConfigError:
        if req.tp is None and tp > 1:  # (a degree the fixed parts of the request leave no mesh for)
            return None
        raise
    if tp > 1 and req.tp is None:
        if unsplit and any(tp % d == 0 for d in unsplit):
            return None
        # measured costs: one size first, so that a degree that splits nothing costs one measurement;
        # predicted: every size at once (one shared export), the check after it
        first = source.all(sizes[:1] if source.measured else sizes)[sizes[0]]
        if all(nd.partitioning == REPLICATED for nd in first.nodes):
            if unsplit is not None:
                unsplit.add(tp)
            return None
    graphs, bad = profile_sizes(source, sizes)
    if bad:  # (sizes the model cannot train at: the search leaves them out)
        limits = dataclasses.replace(limits, skip_sizes=frozenset(bad))
        sizes = [b for b in sizes if b not in bad]
    limits = one_in_flight(graphs.values(), limits, spec.name)  # (parameters changed in forward)
    carried_state(graphs.values(), spec.name)  # (tensors kept in plain attributes for the next forward)
    routed_sizes(graphs.values(), spec.name)  # (sizes read from tensors: a mixture of experts' routing)
    if tp > 1:
        check_tp(graphs[sizes[0]], spec.name, tp)
    freeze()
    n_chain = req.iterations or (None if req.time_budget_s else default_iterations(graphs[sizes[0]].n))
    tps = (f", tp {tp}" + ("" if sequence else " without sequence parallelism")) if tp > 1 else ""
    budget = req.time_budget_s * share if req.time_budget_s else None
    what = (f"searching {cl.num_devices} × {cl.device.name} ({len(sizes)} micro-batch sizes{tps}, seed {req.seed}"
            + (f", {budget:.3g} s budget" if budget else "") + "), first chain")
    # two processes where there are two cores: the plan is the same (search/api.py), sooner
    with paused_collection(), search_progress(progress, what, n_chain) as cb:  # (freed by reference counting)
        res = search(graphs, B, grouped, seed=req.seed, iterations=req.iterations, time_budget_s=budget,
                     limits=limits, processes=min(2, os.cpu_count() or 1), progress=cb)
    best_s = f"best {res.best_eval.step_time_s * 1e3:,.1f} ms" if res.fits else "nothing fits"
    progress.note(f"searched {res.iterations:,} iterations in {res.seconds:.1f} s ({len(res.chains)} chains{tps}): "
                  f"{best_s}")
    return _TPRun(tp, grouped, graphs, res, sequence, limits)


TP_BASELINES = ("megatron", "tp+fsdp")  # the baselines a tp > 1 search adds beside the tp 1 search's


def tp_runs(spec: ModelSpec, cl: Cluster, usable: Cluster, B: int, req: PlanRequest,
             progress: Progress) -> list[_TPRun]:
    """Every degree's search, with sequence parallelism where tp > 1; then, for a degree where that
    split some node by tokens, the search without it (sequence parallelism saves memory; its extra
    collectives — the column linears' inputs gathered again in the backward, the norms' partial
    gradients — cost time where memory is plentiful), unless it cannot win: without the tokens split
    a step loses at most the sequence-parallel collectives' time of every node for every sample
    (:func:`sp_comm_bound_s`), so where the memory-unaware optimum with them, less that, is no faster
    than the best plan found, the search without them is skipped. Each variant gets half of its
    degree's share of the time budget."""
    degrees = tp_degrees(cl, req)  # (a time budget is for the whole plan: each degree gets its share)
    share = 1 / len(degrees)
    unsplit: set[int] = set()
    runs = [r for tp in degrees
            if (r := _search_tp(spec, cl, usable, B, req, progress, tp, share / 2 if tp > 1 else share,
                                unsplit=unsplit))]
    # the most promising first (the fastest with sequence parallelism): a faster plan found early
    # rules out more of the others by the bound
    for r in sorted(runs, key=lambda r: r.result.best_eval.step_time_s if r.result.fits else float("inf")):
        if not r.tokens_split:
            continue
        fitting = [x.result.best_eval.step_time_s for x in runs if x.result.fits]
        unaware = r.result.baselines.get("memory-unaware search")
        if fitting and unaware is not None:
            floor = unaware[1].step_time_s - sp_comm_bound_s(r, cl, B)
            if floor >= min(fitting):
                progress.note(f"tp {r.tp} without sequence parallelism not searched: at best "
                              f"{floor * 1e3:,.1f} ms, no faster than {min(fitting) * 1e3:,.1f} ms")
                continue
        if plain := _search_tp(spec, cl, usable, B, req, progress, r.tp, share / 2, False):
            runs.append(plain)
    return runs


def sp_comm_bound_s(r: _TPRun, cl: Cluster, B: int) -> float:
    """An upper bound on what a step at this degree can gain without sequence parallelism: every
    tensor-parallel collective of every node (the smallest micro-batch's graph: the most latency per
    sample), for every sample of the batch (one data-parallel replica takes them all at most)."""
    b = min(r.graphs)
    g, link = r.graphs[b], cl.intra_link
    per_mb = sum(allreduce_s(nd.tp_fwd_bytes, nd.tp_fwd_collectives, r.tp, link.bandwidth, link.latency)
                 + allreduce_s(nd.tp_bwd_bytes, nd.tp_bwd_collectives, r.tp, link.bandwidth, link.latency)
                 for nd in g.nodes)
    return per_mb * B / b


def _baseline_name(name: str, r: _TPRun) -> str:
    """A tp search's baseline, named with sequence parallelism where its graphs have it."""
    if not r.tokens_split:
        return name
    return name.replace("megatron", "megatron+sp", 1) if name.startswith("megatron") else \
        name.replace("tp+", "tp+sp+", 1)


def _plan(spec: ModelSpec, cl: Cluster, usable: Cluster, B: int, req: PlanRequest, progress: Progress) -> Plan:
    """The plan; on one GPU, with the caching allocator's reserved peak predicted (:mod:`memflow.reserved`)
    where the plan is one it covers, and planned once more with that much less memory where the reserved
    peak and the CUDA context would not fit the device: with the live peak it may have that much lower, at
    most :data:`RESERVED_REPLANS` times; a plan still over does not fit."""
    p, graph = _plan_once(spec, cl, usable, B, req, progress)
    for tries in range(RESERVED_REPLANS + 1):
        over = predict_reserved(p, spec, cl, progress, graph)
        h = 1.0 - (max(p.predicted.peak_bytes) - over) / cl.device.memory_bytes
        if over <= 0 or h >= 1.0 or tries == RESERVED_REPLANS:
            break
        progress.note(f"the allocator's reserved memory and the CUDA context would exceed the device by "
                      f"{format_bytes(over)}: planning again with headroom {100 * h:.1f}%")
        req = dataclasses.replace(req, headroom=h)
        p, graph = _plan_once(spec, cl, cl.with_memory(int(cl.device.memory_bytes * (1.0 - h))), B, req, progress)
    if over > 0:
        p.predicted.fits = False
    return p


RESERVED_REPLANS = 3


def swap_leave(graph: TaskGraph, cl: Cluster, st: Strategy) -> dict[int, int]:
    """Per swapped node of a one-stage plan, the first phase the simulator frees its saved buffers in (its
    timeline of the copies to the host): the order :func:`memflow.reserved.plan_reserved`'s fake run
    follows."""
    if SWAP not in st.actions:
        return {}
    se = Simulator(graph, cl).stage_eval(0, graph.n, list(st.actions), shard=st.sharding[0],
                                         opt_host=bool(st.optimizer_on_host[0]), dp=1,
                                         host_bw=cl.host_link.bandwidth, detail=True,
                                         params_host=bool(st.params_on_host[0]), prefetch=st.prefetch)
    return dict(se.swap_leave)


def predict_reserved(p: Plan, spec: ModelSpec, cl: Cluster, progress: Progress = SILENT,
                     graph: TaskGraph | None = None) -> int:
    """Record in ``p.predicted.reserved_bytes`` the caching allocator's reserved peak for a plan on one GPU
    that :func:`memflow.reserved.not_covered` covers and that fits; returns how far that and the CUDA
    context exceed the device (bytes; 0 or less where they fit, where nothing was predicted, and on a
    device too small to hold a CUDA context: a what-if of tensor memory alone, as the test and bench
    cases of a few hundred KiB are)."""
    if cl.device.kind != "gpu" or not p.fits or not_covered(p.strategy) or \
            (graph is None and SWAP in p.strategy.actions):
        return 0
    t0 = time.perf_counter()
    r = plan_reserved(spec, p.strategy, p.batch_size, device_name=cl.device.name, dtype=p.settings.dtype,
                      granularity=p.settings.granularity,
                      swap_leave=swap_leave(graph, cl, p.strategy) if graph is not None else None,
                      live_peak=max(p.predicted.peak_bytes))
    p.predicted.reserved_bytes = [r]
    progress.note(f"the caching allocator's reserved peak, from a fake run of the step: {format_bytes(r)} "
                  f"({time.perf_counter() - t0:.1f} s)")
    return r + CONTEXT_BYTES - cl.device.memory_bytes if cl.device.memory_bytes > CONTEXT_BYTES else 0


def _plan_once(spec: ModelSpec, cl: Cluster, usable: Cluster, B: int, req: PlanRequest,
               progress: Progress) -> tuple[Plan, TaskGraph]:
    """The plan, and the graph its strategy was simulated on."""
    runs = tp_runs(spec, cl, usable, B, req, progress)
    fitting = [r for r in runs if r.result.fits]
    run = min(fitting, key=lambda r: r.result.best_eval.step_time_s) if fitting else runs[0]
    res, graphs, limits = run.result, run.graphs, run.limits or request_limits(req)
    best: Strategy | None = res.best
    proof = None
    if best is None:
        proof = prove_no_fit(graphs, B, run.grouped, progress, limits)
        if proof and proof.best is not None:
            best = proof.best
    if best is None and res.smallest_peak is not None:  # nothing fits: the lowest-peak strategy seen
        best = res.smallest_peak[0]
    if best is None:
        raise ConfigError("the search returned no strategy at all")
    graph = graphs[best.microbatch_size(B)]
    if graph.meta.get("replay_unsafe"):  # (the search's recompute there was priced as keep: written as it runs)
        best = best.copy(actions=replay_safe(best.actions, set(graph.meta["replay_unsafe"])))
    if run.tp > 1:
        best = best.copy(tp=run.tp, partitioning=[nd.partitioning for nd in graph.nodes])
    sim = Simulator(graph, usable).evaluate(best, detail=True)
    baselines = {}
    for i, r in enumerate(runs):  # (the first run's every baseline, the tp ones of the others)
        baselines.update({_baseline_name(name, r) if name.startswith(TP_BASELINES) else name:
                          baseline_result(ev, r.tp)
                          for name, (st, ev) in r.result.baselines.items() if i == 0 or name.startswith(TP_BASELINES)})
    on_file = str(spec.path) != "<module>"
    p = Plan(
        model_file=str(Path(spec.path).resolve()) if on_file else "",
        model_sha256=file_sha256(spec.path) if on_file else "",
        env=model_env(spec.env_vars),
        model_name=spec.name,
        batch_size=B,
        strategy=best,
        cluster=cl.to_dict(),
        node_names=[nd.name for nd in graph.nodes],
        fingerprint=graph.fingerprint,
        predicted=prediction(sim, B, best),
        baselines=baselines,
        pareto=[ParetoPoint(step_time_s=float(t), max_peak_bytes=int(p)) for t, p, _ in res.pareto],
        settings=PlanSettings(
            seed=req.seed, dtype=req.dtype, granularity=req.granularity, time_budget_s=req.time_budget_s,
            headroom=float(req.headroom), measure=bool(req.measure),
            no_fit_proved=bool(proof and proof.complete and proof.best is None),
            iterations=int(sum(r.result.iterations for r in runs)),
            search_seconds=float(sum(r.result.seconds for r in runs)),
            cost_source=graph.time_source, torch=torch.__version__,
            dp=req.dp, pp=req.pp, microbatches=req.microbatches, max_microbatches=req.max_microbatches,
            sharding=req.sharding, offload=req.offload, tp=req.tp,
        ),
    )
    return p, graph


def prediction(sim: SimResult, batch_size: int, strategy: Strategy) -> Prediction:
    """The plan's record of a detailed simulation of ``strategy``."""
    return Prediction(
        strategy_digest=strategy.digest(),
        fits=bool(sim.fits), step_time_s=float(sim.step_time_s),
        peak_bytes=[int(x) for x in sim.peak_bytes], capacity_bytes=[int(x) for x in sim.capacity_bytes],
        rank_step_time_s=[float(x) for x in sim.end_s], binding=sim.binding,
        samples_per_s=batch_size / sim.step_time_s if sim.step_time_s > 0 else 0.0,
        breakdown=[MemoryBreakdown.from_sim(b) for b in sim.breakdown],
    )


def check_tp(graph: TaskGraph, name: str, tp: int) -> None:
    """A ConfigError unless some node of ``graph`` splits across the tensor-parallel group."""
    if all(nd.partitioning == REPLICATED for nd in graph.nodes):
        raise ConfigError(f"--tp {tp}: no node of {name} splits across a tensor-parallel group (tensor parallelism "
                          f"splits pairs of linear layers, as in a transformer block's attention and MLP); "
                          f"plan it without --tp")


EXACT_PROOF_NODES = 8  # where the search finds nothing that fits, graphs this small are solved exactly
EXACT_PROOF_S = 60.0


def prove_no_fit(graphs: Any, B: int, usable: Cluster, progress: Progress = SILENT,
                 limits: MeshLimits | None = None):
    """Nothing the search saw fits: on a small graph, enumerate the whole space (exactly, with
    pruning) for a strategy that does, or a proof that none does. None on a bigger graph."""
    ctx = SearchContext(graphs, B, usable, limits=mesh_limits(limits))
    if ctx.n > EXACT_PROOF_NODES:
        return None
    # selective holds all a recompute holds and more (simulator.stage), so without it the proof is as
    # exact and its space is 3^n actions, not 4^n
    ctx.actions = tuple(a for a in ctx.actions if a != SELECTIVE)
    progress.note(f"nothing found fits: checking every strategy ({ctx.n} nodes, at most {EXACT_PROOF_S:.0f} s)")
    ex = solve_exact(ctx=ctx, time_limit_s=EXACT_PROOF_S)
    if ex.best is not None:
        progress.note(f"the exact solver found a strategy that fits: {ex.best_eval.step_time_s * 1e3:,.1f} ms")
    elif ex.complete:
        progress.note(f"proved in {ex.seconds:.1f} s: no strategy fits")
    else:
        progress.note(f"stopped after {ex.seconds:.0f} s: nothing found fits, not proved")
    return ex


def _plan_spec(p: Plan) -> ModelSpec:
    if not p.model_file:
        raise ModelLoadError("this plan was made from an in-memory module; save the model as a model file to "
                             "simulate or run it")
    return load_model_file(p.model_file)


def plan_environment(p: Plan):
    """A context in which the plan's model file sees the environment it was planned under."""
    return applied(p.env) if p.env is not None else contextlib.nullcontext()


def check_model(p: Plan, spec: ModelSpec | None = None) -> None:
    """Raise PlanMismatchError unless the model file's step (captured under fake tensors at the plan's
    micro-batch size: no profiling) has the plan's fingerprint. Call it in :func:`plan_environment`."""
    spec = spec or _plan_spec(p)
    st = p.settings
    captured, _, _, model = capture_program(spec, p.micro_batch_size, granularity=st.granularity, dtype=st.dtype)
    fp = fingerprint(model, captured, p.micro_batch_size, st.dtype, st.granularity, p.strategy.tp)
    if fp != p.fingerprint:
        what = "its nodes differ" if captured.names != p.node_names else "its parameters or batch shapes differ"
        if p.model_sha256:
            what += ("; the file changed since the plan was made" if file_sha256(spec.path) != p.model_sha256
                     else "; the file is unchanged: a module it imports or the environment differs")
        raise PlanMismatchError(f"{spec.path}: the model no longer matches the plan ({what}; fingerprint {fp} ≠ "
                                f"{p.fingerprint}); re-run `memflow plan`")


def plan_graph(p: Plan, cache: bool = True, progress: Progress = SILENT) -> TaskGraph:
    """The costed task graph a plan was made from (re-profiled, or from the cache), after checking
    that the model still matches the plan; both under the plan's environment."""
    with plan_environment(p):
        spec = _plan_spec(p)
        check_model(p, spec)
        st = p.settings
        source = GraphSource(spec, p.get_cluster(), dtype=st.dtype, granularity=st.granularity, cache=cache,
                             measure=st.measure or None, progress=progress, tp=p.strategy.tp,
                             sequence=uses_sequence(p.strategy.partitioning))
        return source.all([p.micro_batch_size])[p.micro_batch_size]


def usable_cluster(p: Plan) -> Cluster:
    """The plan's cluster with the memory the plan may use (its headroom kept free)."""
    cl = p.get_cluster()
    h = p.settings.headroom
    return cl.with_memory(int(cl.device.memory_bytes * (1.0 - h))) if h else cl


def simulate_plan(p: Plan, cache: bool = True, progress: Progress = SILENT) -> SimResult:
    """Full simulator detail (SimResult) for a plan, against the memory it may use (as it was planned)."""
    return Simulator(plan_graph(p, cache=cache, progress=progress), usable_cluster(p)).evaluate(p.strategy,
                                                                                               detail=True)


def current_prediction(p: Plan, progress: Progress = SILENT) -> Prediction:
    """The plan's prediction, simulated again where its strategy is not the one it was made for (a plan
    edited by hand): the figures a run is compared with must be the strategy's own."""
    if p.predicted.strategy_digest == p.strategy.digest():
        return p.predicted
    progress.note("the plan's strategy differs from the one its prediction was made for: simulating it again")
    return prediction(simulate_plan(p, progress=progress), p.batch_size, p.strategy)
