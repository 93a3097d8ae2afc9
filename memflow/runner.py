"""Run a Plan with the executor: checks first, then torchrun, then measured vs predicted.

Before launch: the model must still match the plan's fingerprint, and a plan
whose prediction does not fit its devices is refused (``force`` overrides,
and the run then fails at the accounted cap as a GPU would).
"""
from __future__ import annotations

from typing import Any

from .errors import InfeasibleError, ModelLoadError
from .planfile import Plan

__all__ = ["run_plan_file"]


def run_plan_file(plan: Plan, steps: int = 5, *, check: bool = True, force: bool = False, seed: int | None = None,
                  checkpoint_dir: str | None = None, checkpoint_every: int = 0, resume: bool = False,
                  nnodes: int = 1, node_rank: int = 0, rdzv_endpoint: str | None = None,
                  out_json: str | None = None, timeout_s: float = 1800.0, fail_rank: int | None = None,
                  fail_step: int | None = None, warmup: int = 1) -> dict[str, Any]:
    """Execute ``plan`` for ``steps`` steps; returns the executor's report (per-rank measured vs predicted).

    A plan for ``cpu-N`` runs on the CPU (gloo) even where there are GPUs; a plan for
    named GPUs runs on CUDA (NCCL) where there is one, else on the CPU under the
    same accounted cap."""
    from .executor import RunConfig, run_plan
    from .model_file import load_model_file
    from .units import format_bytes

    if not plan.model_file:
        raise ModelLoadError("this plan was made from an in-memory module; save the model as a model file to run it")
    if not plan.fits and not force:
        peaks = plan.predicted.get("peak_bytes", [])
        caps = plan.predicted.get("capacity_bytes", [])
        d = max(range(len(peaks)), key=lambda i: peaks[i] - caps[i]) if peaks else 0
        raise InfeasibleError(
            f"refusing to launch: the plan predicts {format_bytes(peaks[d]) if peaks else '?'} on device {d}, "
            f"over its {format_bytes(caps[d]) if caps else '?'} (pass --force to run it anyway)")
    if check:
        plan.check_model(load_model_file(plan.model_file))
    device_bytes = int(plan.get_cluster().device.memory_bytes)  # the cap is the device, not the planned usable part
    cfg = RunConfig(
        model_file=plan.model_file, batch_size=plan.batch_size, strategy=plan.strategy.to_dict(), steps=steps,
        seed=plan.seed if seed is None else seed, granularity=plan.granularity, node_names=list(plan.node_names),
        capacity_bytes=device_bytes,
        predicted={"peak_bytes": plan.predicted.get("peak_bytes", []),
                   "step_time_s": plan.predicted.get("rank_step_time_s") or plan.predicted.get("step_time_s")},
        checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every, resume=resume, out_json=out_json,
        fail_rank=fail_rank, fail_step=fail_step, warmup=warmup,
        device="cpu" if plan.get_cluster().device.kind == "cpu" else "auto", dtype=plan.dtype,
    )
    world = plan.strategy.num_devices
    if world % nnodes:
        raise InfeasibleError(f"{world} ranks cannot be split evenly over {nnodes} nodes")
    return run_plan(cfg, nproc=world // nnodes, nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=rdzv_endpoint,
                    timeout_s=timeout_s)
