"""One rank of a planned run: ``python -m memflow.executor.worker CONFIG.json`` (started by
:mod:`.launch`, or by torchrun on several machines).

Each rank joins the process group (gloo on CPU, NCCL on CUDA), builds the
real model with the configured seed (identical on every rank), captures it
at the micro-batch size, keeps its stage (see :mod:`.stage`), and trains
``steps`` steps under :class:`memflow.memory.LiveBytes` with the plan's
device capacity as the cap. Rank 0 gathers the per-rank measurements and
writes the report JSON. On any exception a rank writes
``OUT_JSON.rankR.error.json`` (type, one-line message) and exits 1. A loss
that does not require grad stops the run at the first forward; a loss that
is not finite stops it at the step where it appears. Progress events go to
``progress_file`` (:mod:`.progress`). A rank dies with the process that started it.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import statistics
import sys
import time
import traceback
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from ..batchrows import check_split
from ..errors import ConfigError, DeviceOutOfMemoryError, ExecutionError, PlanMismatchError
from ..kinds import SHARD_GRADIENTS, SHARD_NONE, SHARD_PARAMETERS
from ..graph.build import capture_program
from ..graph.casts import cast_only
from ..graph.tp import uses_sequence
from ..graph.training import autocast, in_model_order
from ..memory import LiveBytes
from ..typed import to_data
from ..model_file import flatten, load_model_file
from ..procs import die_with_parent
from ..gpumem import cublas_workspace_bytes, reserved_bytes
from ..alloc_trace import AllocTrace
from .checkpoint import load_checkpoint, resume_point, save_checkpoint
from .config import RunConfig, error_path
from .optim import StageOptimizer
from .progress import ProgressLog
from .report import RankReport, RunReport
from .schedule import FORWARD, stage_schedule
from .signing import key
from .stage import Stage

__all__ = ["main", "run_worker", "run_device", "error_path"]


def _check_names(expected: list[str], got: list[str], model_file: str) -> None:
    if not expected or list(expected) == list(got):
        return
    k = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b), min(len(expected), len(got)))
    a = expected[k] if k < len(expected) else "<end>"
    b = got[k] if k < len(got) else "<end>"
    raise PlanMismatchError(
        f"{model_file} no longer matches the plan: the plan has {len(expected)} nodes, the model "
        f"captures {len(got)}; first difference at node {k}: plan {a!r}, model {b!r}"
    )


def _shard_batch(flat: list[torch.Tensor], batch: int, dp: int, dp_rank: int, m: int) -> list[list[torch.Tensor]]:
    """Rows of this dp rank, split into ``m`` micro-batches (per micro-batch: placeholder list), in
    host memory; :func:`_to_device` moves one micro-batch to the device when its forward starts."""
    per = batch // dp
    shards = []
    for t in flat:
        if t.dim() > 0 and t.shape[0] == batch:
            shards.append([c.clone() for c in t[dp_rank * per:(dp_rank + 1) * per].chunk(m)])
        else:  # not batched: every micro-batch reads it whole
            shards.append([t] * m)
    return [[sh[i] for sh in shards] for i in range(m)]


def _to_device(inputs: list[torch.Tensor], device: torch.device, wanted: list[bool]) -> list[Any]:
    """The inputs of one micro-batch that the stage reads, in device memory (on CPU: a copy the
    live-bytes counter accounts). Nothing else holds them, so they live while the forward or
    autograd needs them: each in-flight micro-batch holds its own, as the simulator counts."""
    return [t.to(device, copy=True) if w else None for t, w in zip(inputs, wanted)]


def run_device(kind: str, local_rank: int) -> torch.device:
    """This rank's device: ``cpu``, ``cuda`` (GPU ``local_rank``, which must exist) or ``auto``."""
    if kind == "cpu" or (kind == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if local_rank >= n:
        raise ConfigError(f"local rank {local_rank} needs GPU {local_rank}, this node has {n} GPU(s); "
                          "launch at most one rank per GPU")
    return torch.device("cuda", local_rank)


def run_worker(cfg: RunConfig, rank: int, world: int, local_rank: int) -> RunReport | None:
    strat = cfg.strategy
    if world != strat.num_devices:
        tp = f" × tp {strat.tp}" if strat.tp > 1 else ""
        raise ConfigError(f"dp {strat.dp} × pp {strat.pp}{tp} = {strat.num_devices} ranks, launched {world}")
    device = run_device(cfg.device, local_rank)
    cuda = device.type == "cuda"
    if cuda:  # pragma: no cover - needs a GPU
        torch.cuda.set_device(device)
    trace = AllocTrace(device, rank)  # (MEMFLOW_CUDA_ALLOC_TRACE: the allocator's events, for bench gpu)
    timeout = timedelta(seconds=cfg.comm_timeout_s)
    started = time.perf_counter()
    dist.init_process_group("nccl" if cuda else "gloo", timeout=timeout)

    # (with tensor parallelism, this rank's share of every split node: memflow.graph.tp; with sequence
    # parallelism where the plan's partitioning has it)
    spec = dataclasses.replace(load_model_file(cfg.model_file, guard=False), tp=strat.tp,
                               sequence=uses_sequence(strat.partitioning))  # (loaded, guarded, before)
    check_split(spec, cfg.batch_size, strat.dp, strat.microbatches)  # (a graph batch cut by rows: wrong indices)
    mb = strat.microbatch_size(cfg.batch_size)
    # captured on the device it runs on: the export bakes device constants (masks, positions) in
    captured, program, _, model = capture_program(spec, mb, granularity=cfg.granularity, fake=False,
                                                   seed=cfg.seed, device=device, dtype=cfg.dtype,
                                                   tp_rank=strat.coords(rank)[2])
    _check_names(cfg.node_names, captured.names, cfg.model_file)
    strat.validate(program.n, world, cfg.batch_size)
    if strat.partitioning and program.partitioning and strat.partitioning != program.partitioning:
        raise ExecutionError(f"the plan's node partitioning {strat.partitioning} is not the one found on the model's "
                             f"graph {program.partitioning}; re-run `memflow plan`")

    my_stage = strat.coords(rank)[0]
    # ZeRO-3 in bf16: the parameters autocast only casts are gathered in bf16 (found as the profiler finds
    # them: one forward under a fake mode, nothing computed)
    low = cast_only(program, captured.flat_inputs, cfg.dtype, device.type, fake=True) \
        if strat.sharded(my_stage) == SHARD_PARAMETERS else set()
    stage = Stage(program, strat.stage_of, strat.actions, rank, strat.dp, strat.pp, strat.microbatches,
                  device, timeout, cfg.bucket_cap_bytes, sharding=strat.sharded(my_stage),
                  params_host=strat.params_host(my_stage), tp=strat.tp, low=low, prefetch=strat.prefetch)
    # the optimizer steps the stage's parameters in the model's order, as the profiler traced it
    opt = StageOptimizer(spec, in_model_order(model, stage.params),
                         shard=strat.sharded(stage.stage) != SHARD_NONE,
                         on_host=strat.optimizer_on_host[stage.stage], dp_group=stage.dp_group, device=device,
                         sliced=stage.sync if stage.sharding in (SHARD_GRADIENTS, SHARD_PARAMETERS) else None)

    pred_peak = cfg.predicted.peak(rank)

    def where_of(phase: str, node: int | None, mb: int | None) -> str:
        return (phase + (f" of node {node} ({captured.names[node]})" if node is not None else "")
                + (f", micro-batch {mb}" if mb is not None else ""))

    def where() -> str:
        cur = stage.current
        return where_of(cur["phase"], cur.get("node"), cur.get("mb"))

    def describe() -> str:
        pred = f"predicted peak {pred_peak} bytes" if pred_peak is not None else "no predicted peak"
        return f"rank {rank} (stage {stage.stage}, dp rank {stage.dp_rank}), {where()}, {pred}"

    # device memory is what lives on the run's device; host copies (swap, host optimizer) are host bytes
    live = LiveBytes(cap_bytes=cfg.capacity_bytes, describe=describe, device_type=device.type)
    live.locate = where
    places: dict[tuple, int] = {}  # (phase, node, micro-batch) -> the counter's phase number: each place's peak

    def at(cur: dict) -> None:
        key = (cur["phase"], cur.get("node"), cur.get("mb"))
        p = places.get(key)
        if p is None:
            p = places[key] = len(places)
        if p != live.phase:
            live.set_phase(p)

    stage.current.hook = at
    stage.attach_memory(live)
    opt.live = live

    # the first rank of the last stage sees the loss: it reports the steps
    progress = ProgressLog(cfg.progress_file)
    reporter = stage.last and stage.dp_rank == 0 and stage.tp_rank == 0

    # ---- resume
    start = 0
    if cfg.resume:
        opt.init_state()
        path = cfg.resume_from or resume_point(cfg.checkpoint_dir, cfg.steps)[0]
        start = load_checkpoint(path, rank, stage.host_tensors + stage.tensors, opt.state_tensors())
        opt.reload()
        if rank == 0:
            progress(event="resumed", rank=rank, path=path, done=start)
    sign_key = key(create=False) if rank == 0 and cfg.checkpoint_dir and cfg.checkpoint_every else None
    dist.barrier()
    if rank == 0:
        progress(event="ready", rank=rank, world=world, seconds=time.perf_counter() - started, first=start,
                 steps=cfg.steps)

    live.track(stage.tensors, kind="state")
    with live.host():  # (parameters on the host: the units' shards)
        live.track(stage.host_tensors, kind="state")
    if not opt.on_host:
        live.track(opt.state_tensors().values(), kind="optimizer")

    sched = stage_schedule(strat.schedule, stage.stage, strat.pp, strat.microbatches)
    times: list[float] = []
    parts: dict[str, list[float]] = {k: [] for k in ("forward", "backward", "grad_sync", "optimizer")}
    step_losses: list[float] = []
    for t in range(start, cfg.steps):
        if cfg.fail_rank == rank and cfg.fail_step == t:
            os._exit(1)
        if t - start == cfg.warmup:
            live.reset_peak()
            if cuda:  # pragma: no cover - needs a GPU
                torch.cuda.reset_peak_memory_stats(device)
                trace.mark_timed()
        with live:
            stage.current.update(phase="data", node=None, mb=None)
            with live.host():
                torch.manual_seed(cfg.seed + 1000 + t)
                flat, _ = flatten(spec.batch(cfg.batch_size))
                mbs = _shard_batch(flat, cfg.batch_size, strat.dp, stage.dp_rank, strat.microbatches)
            del flat
        dist.barrier()  # the step's clock starts together on every rank, after data loading
        t0 = time.perf_counter()
        spent = dict.fromkeys(parts, 0.0)  # wall time per part of the step (CUDA: host-side launch time)
        with live:
            opt.zero_grad()
            stage.losses.clear()
            for act, i in sched:
                ta = time.perf_counter()
                if act == FORWARD:
                    with autocast(cfg.dtype, device.type):  # the training precision, as profiled
                        stage.forward(i, _to_device(mbs[i], device, stage.reads_input))
                    spent["forward"] += time.perf_counter() - ta
                else:
                    if i == strat.microbatches - 1:
                        stage.sync.start_last_microbatch()
                    stage.backward(i)
                    mbs[i] = None
                    spent["backward"] += time.perf_counter() - ta
            ta = time.perf_counter()
            stage.finish_grads()
            tb = time.perf_counter()
            stage.current.update(phase="optimizer step", node=None, mb=None)
            opt.step()
            if cuda:  # pragma: no cover
                torch.cuda.synchronize()
            spent["grad_sync"], spent["optimizer"] = tb - ta, time.perf_counter() - tb
            if stage.last:
                step_losses.append(float(torch.stack(stage.losses).mean()))
                if not math.isfinite(step_losses[-1]):
                    raise ExecutionError(f"rank {rank} (stage {stage.stage}): the loss is {step_losses[-1]} at step "
                                         f"{t + 1}/{cfg.steps}; the run was stopped")
            stage.losses.clear()
            del mbs
        times.append(time.perf_counter() - t0)
        for k, v in spent.items():
            parts[k].append(v)
        done = t + 1
        if reporter:
            progress(event="step", rank=rank, step=done, steps=cfg.steps, loss=step_losses[-1], seconds=times[-1],
                     dp=strat.dp)
        if cfg.checkpoint_dir and cfg.checkpoint_every and done % cfg.checkpoint_every == 0:
            save_checkpoint(cfg.checkpoint_dir, done, rank, stage.host_tensors + stage.tensors, opt.state_tensors(),
                            sign_key)

    timed = times[cfg.warmup:] if len(times) > cfg.warmup else times
    rec = RankReport(
        rank=rank, stage=stage.stage, dp_rank=stage.dp_rank, tp_rank=stage.tp_rank, nodes=[stage.lo, stage.hi],
        measured_peak_bytes=int(live.peak), peak_at=live.peak_at, host_peak_bytes=int(live.host_peak),
        predicted_peak_bytes=pred_peak,
        measured_step_time_s=statistics.median(timed) if timed else None,
        predicted_step_time_s=cfg.predicted.time(rank), step_times_s=times, losses=step_losses,
        measured_parts_s={k: statistics.median(v[cfg.warmup:] or v) for k, v in parts.items() if v},
        phase_peaks={where_of(*key): int(live.phase_peak[p]) for key, p in places.items() if p in live.phase_peak},
    )
    if cuda:  # pragma: no cover - needs a GPU
        # the caching allocator's view beside the accounted one (allocated: tensors; reserved: its pool)
        rec.cuda_peak_allocated_bytes = int(torch.cuda.max_memory_allocated(device))
        rec.cuda_peak_reserved_bytes = int(torch.cuda.max_memory_reserved(device))
        rec.cuda_alloc_conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", os.environ.get("PYTORCH_ALLOC_CONF", ""))
        if cfg.predicted.reserved(rank):  # (the plan's fake run through the allocator model)
            rec.cuda_predicted_reserved_bytes = cfg.predicted.reserved(rank)
        elif pred_peak:
            ws = cublas_workspace_bytes(torch.cuda.get_device_capability(device)[0])
            rec.cuda_predicted_reserved_bytes = reserved_bytes(pred_peak, ws)
        trace.dump()
    recs: list[Any] = [None] * world
    dist.all_gather_object(recs, rec)
    result = None
    if rank == 0:
        last = [r for r in recs if r.stage == strat.pp - 1]
        n = min(len(r.losses) for r in last)
        losses = [sum(r.losses[i] for r in last) / len(last) for i in range(n)]
        preds = [r.predicted_step_time_s for r in recs if r.predicted_step_time_s is not None]
        result = RunReport(
            model_file=cfg.model_file, batch_size=cfg.batch_size, microbatch_size=mb, world_size=world,
            strategy=strat.to_dict(), node_names=captured.names, first_step=start,
            steps=list(range(start, start + n)), losses=losses,
            backend="nccl" if cuda else "gloo", capacity_bytes=cfg.capacity_bytes,
            measured_step_time_s=max((r.measured_step_time_s or 0.0) for r in recs),
            predicted_step_time_s=max(preds) if preds else None,
            ranks=sorted(recs, key=lambda r: r.rank),
        )
        if cfg.out_json:
            tmp = cfg.out_json + ".tmp"
            with open(tmp, "w") as f:
                json.dump(to_data(result), f, indent=1)
            os.replace(tmp, cfg.out_json)
    dist.barrier()
    dist.destroy_process_group()
    return result


def _one_line(e: BaseException) -> str:
    msg = " ".join(str(e).split())
    return msg[:1000] if msg else type(e).__name__


def _out_json(cfg_path: str) -> str:
    """Where the launcher looks for this rank's error report when the config itself would not load:
    the file's ``out_json`` where it can be read, else beside the config."""
    try:
        with open(cfg_path) as f:
            out = json.load(f).get("out_json")
    except (OSError, ValueError, AttributeError):
        out = None
    return out if isinstance(out, str) and out else cfg_path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m memflow.executor.worker CONFIG.json", file=sys.stderr)
        return 2
    die_with_parent(signal.SIGKILL)  # the launcher (or torchrun's agent) stops the ranks; if it is killed, they go with it
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cfg = None
    try:
        cfg = RunConfig.load(argv[0])
        run_worker(cfg, rank, world, local_rank)
    except BaseException as e:  # noqa: BLE001 - report every failure as one line
        kind = type(e).__name__
        msg = _one_line(e)
        if not isinstance(e, DeviceOutOfMemoryError) and f"rank {rank}" not in msg:
            msg = f"rank {rank}: {msg}"
        out = cfg.out_json if cfg is not None and cfg.out_json else _out_json(argv[0])
        try:
            with open(error_path(out, rank), "w") as f:
                json.dump(dict(rank=rank, type=kind, message=msg, time=time.time(),
                               traceback=traceback.format_exc()[-4000:]), f)
        except OSError:
            pass
        print(f"memflow worker rank {rank}: {kind}: {msg}", file=sys.stderr, flush=True)
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    return 0


if __name__ == "__main__":
    _rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # the run is done and reported: leave without the interpreter's teardown, where gloo's threads
    # were seen (intermittently, ZeRO-1 runs) to abort with "terminate called without an active exception"
    os._exit(_rc)
