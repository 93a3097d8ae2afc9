"""Run a plan with ``torch.distributed`` and measure it against its prediction.

``run_plan(RunConfig, nproc)`` launches one worker per device (torchrun's protocol)
(gloo on CPU, NCCL on CUDA); each worker runs its pipeline stage as a
data-parallel replica with the plan's keep / recompute / swap actions under
an accounted device-memory cap. ``plain_losses`` is the single-process
reference that planned training must match.
"""
from .config import RunConfig, RunPrediction
from .launch import free_port, plain_losses, run_plan
from .report import RankReport, RunReport, format_report
from .schedule import stage_schedule

__all__ = ["RunConfig", "RunPrediction", "RunReport", "RankReport", "run_plan", "plain_losses", "format_report",
           "stage_schedule", "free_port"]
