"""Run a Plan with the executor: checks first, then the ranks (torchrun's protocol), then measured vs predicted.

Before launch: the model must still match the plan's fingerprint, and a plan
whose prediction does not fit its devices is refused (``force`` overrides,
and the run then fails at the accounted cap as a GPU would).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable

import torch

from .errors import ConfigError, InfeasibleError, ModelLoadError
from .executor import RunConfig, RunPrediction, RunReport, run_plan
from .model_file import load_model_file
from .planfile import Plan, load_plan
from .planner import check_model, current_prediction, plan_environment
from .units import format_bytes

__all__ = ["run"]


def run(plan: Plan | str | os.PathLike, steps: int = 5, *, check: bool = True, force: bool = False,
        on_cpu: bool = False, seed: int | None = None, checkpoint_dir: str | None = None, checkpoint_every: int = 0,
        resume: bool = False, nnodes: int = 1, node_rank: int = 0, rdzv_endpoint: str | None = None,
        out_json: str | None = None, timeout_s: float = 1800.0, fail_rank: int | None = None,
        fail_step: int | None = None, warmup: int = 1,
        progress: Callable[[str], None] | None = None) -> RunReport | None:
    """Execute ``plan`` (a Plan or a plan file) for ``steps`` steps; returns the run's report, each
    rank's measured peak and step time beside the prediction (None on a node without rank 0).

    A plan for ``cpu-N`` runs on the CPU (gloo) even where there are GPUs; a plan for
    named GPUs runs on CUDA (NCCL), one GPU per rank, and is refused where this host has
    too few, unless ``on_cpu``: then it runs on the CPU under the same accounted cap.
    The model file is loaded under the environment the plan recorded. ``progress`` receives a
    line for each thing that happens (the launch, the ranks ready, every step's loss and time) as
    it happens; nothing before the launch, so that an error found by the checks stays the only line."""
    if not isinstance(plan, Plan):
        plan = load_plan(plan)
    if not plan.model_file:
        raise ModelLoadError("this plan was made from an in-memory module; save the model as a model file to run it")
    pr = plan.predicted
    if not pr.fits and not force and pr.strategy_digest == plan.strategy.digest():
        d = pr.worst_device()
        raise InfeasibleError(
            f"refusing to launch: the plan predicts {format_bytes(pr.peak_bytes[d])} on device {d}, "
            f"over its {format_bytes(pr.capacity_bytes[d])} (pass --force to run it anyway)")
    cluster = plan.get_cluster()
    per_node = plan.strategy.num_devices // max(1, nnodes)
    if cluster.device.kind == "gpu" and not on_cpu and torch.cuda.device_count() < per_node:
        have = torch.cuda.device_count()
        raise ConfigError(
            f"this plan is for {plan.strategy.num_devices} × {cluster.device.name} and this host has "
            f"{have or 'no'} CUDA GPU{'' if have == 1 else 's'}: plan for this host with `memflow plan MODEL.py "
            f"--gpus {plan.strategy.num_devices} --gpu-type cpu`, or pass --on-cpu to run this plan on the CPU")
    with plan_environment(plan):
        if check:
            check_model(plan, load_model_file(plan.model_file))
        pr = current_prediction(plan)
        if pr is not plan.predicted and not pr.fits and not force:
            d = pr.worst_device()
            raise InfeasibleError(
                f"refusing to launch: the plan's strategy was edited since it was predicted, and simulated again "
                f"it needs {format_bytes(pr.peak_bytes[d])} on device {d}, over its "
                f"{format_bytes(pr.capacity_bytes[d])} (pass --force to run it anyway)")
        plan = dataclasses.replace(plan, predicted=pr)
        return _launch(plan, cluster, steps, on_cpu=on_cpu, seed=seed, checkpoint_dir=checkpoint_dir,
                       checkpoint_every=checkpoint_every, resume=resume, nnodes=nnodes, node_rank=node_rank,
                       rdzv_endpoint=rdzv_endpoint, out_json=out_json, timeout_s=timeout_s, fail_rank=fail_rank,
                       fail_step=fail_step, warmup=warmup, progress=progress)


def _launch(plan: Plan, cluster, steps: int, *, on_cpu: bool, seed: int | None, checkpoint_dir: str | None,
            checkpoint_every: int, resume: bool, nnodes: int, node_rank: int, rdzv_endpoint: str | None,
            out_json: str | None, timeout_s: float, fail_rank: int | None, fail_step: int | None,
            warmup: int, progress: Callable[[str], None] | None) -> RunReport | None:
    pr = plan.predicted
    cfg = RunConfig(
        model_file=plan.model_file, batch_size=plan.batch_size, strategy=plan.strategy, steps=steps,
        seed=plan.settings.seed if seed is None else seed, granularity=plan.settings.granularity,
        node_names=list(plan.node_names),
        capacity_bytes=int(cluster.device.memory_bytes),  # the cap is the device, not the planned usable part
        predicted=RunPrediction(peak_bytes=list(pr.peak_bytes),
                                step_time_s=list(pr.rank_step_time_s) or [pr.step_time_s] * len(pr.peak_bytes),
                                reserved_bytes=list(pr.reserved_bytes)),
        checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every, resume=resume, out_json=out_json,
        fail_rank=fail_rank, fail_step=fail_step, warmup=warmup,
        device="cpu" if cluster.device.kind == "cpu" or on_cpu else "auto", dtype=plan.settings.dtype,
    )
    world = plan.strategy.num_devices
    if world % nnodes:
        raise InfeasibleError(f"{world} ranks cannot be split evenly over {nnodes} nodes")
    return run_plan(cfg, nproc=world // nnodes, nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=rdzv_endpoint,
                    timeout_s=timeout_s, progress=progress)
