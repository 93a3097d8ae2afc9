"""Run a Plan with the executor: checks first, then torchrun, then measured vs predicted.

Before launch: the model must still match the plan's fingerprint, and a plan
whose prediction does not fit its devices is refused (``force`` overrides,
and the run then fails at the accounted cap as a GPU would).
"""
from __future__ import annotations

import os
from typing import Callable

from .errors import InfeasibleError, ModelLoadError
from .executor import RunConfig, RunPrediction, RunReport, run_plan
from .model_file import load_model_file
from .planfile import Plan, load_plan
from .planner import check_model
from .units import format_bytes

__all__ = ["run"]


def run(plan: Plan | str | os.PathLike, steps: int = 5, *, check: bool = True, force: bool = False,
        seed: int | None = None, checkpoint_dir: str | None = None, checkpoint_every: int = 0, resume: bool = False,
        nnodes: int = 1, node_rank: int = 0, rdzv_endpoint: str | None = None, out_json: str | None = None,
        timeout_s: float = 1800.0, fail_rank: int | None = None, fail_step: int | None = None,
        warmup: int = 1, progress: Callable[[str], None] | None = None) -> RunReport | None:
    """Execute ``plan`` (a Plan or a plan file) for ``steps`` steps; returns the run's report, each
    rank's measured peak and step time beside the prediction (None on a node without rank 0).

    A plan for ``cpu-N`` runs on the CPU (gloo) even where there are GPUs; a plan for
    named GPUs runs on CUDA (NCCL) where there is one, else on the CPU under the
    same accounted cap. ``progress`` receives a line for each thing that happens (the launch, the
    ranks ready, every step's loss and time) as it happens; nothing before the launch, so that an
    error found by the checks stays the only line."""
    if not isinstance(plan, Plan):
        plan = load_plan(plan)
    if not plan.model_file:
        raise ModelLoadError("this plan was made from an in-memory module; save the model as a model file to run it")
    pr = plan.predicted
    if not pr.fits and not force:
        d = pr.worst_device()
        raise InfeasibleError(
            f"refusing to launch: the plan predicts {format_bytes(pr.peak_bytes[d])} on device {d}, "
            f"over its {format_bytes(pr.capacity_bytes[d])} (pass --force to run it anyway)")
    if check:
        check_model(plan, load_model_file(plan.model_file))
    cluster = plan.get_cluster()
    cfg = RunConfig(
        model_file=plan.model_file, batch_size=plan.batch_size, strategy=plan.strategy, steps=steps,
        seed=plan.settings.seed if seed is None else seed, granularity=plan.settings.granularity,
        node_names=list(plan.node_names),
        capacity_bytes=int(cluster.device.memory_bytes),  # the cap is the device, not the planned usable part
        predicted=RunPrediction(peak_bytes=list(pr.peak_bytes),
                                step_time_s=list(pr.rank_step_time_s) or [pr.step_time_s] * len(pr.peak_bytes)),
        checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every, resume=resume, out_json=out_json,
        fail_rank=fail_rank, fail_step=fail_step, warmup=warmup,
        device="cpu" if cluster.device.kind == "cpu" else "auto", dtype=plan.settings.dtype,
    )
    world = plan.strategy.num_devices
    if world % nnodes:
        raise InfeasibleError(f"{world} ranks cannot be split evenly over {nnodes} nodes")
    return run_plan(cfg, nproc=world // nnodes, nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=rdzv_endpoint,
                    timeout_s=timeout_s, progress=progress)
