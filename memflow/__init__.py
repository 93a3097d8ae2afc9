"""MemFlow: find how to train a PyTorch model fastest without running out of memory.

Public API::

    import memflow
    p = memflow.plan("examples/gpt2.py", gpus=4, gpu_type="v100-16gb")   # or a module + example_batch
    print(p.strategy.summary(), p.predicted["step_time_s"], p.predicted["peak_bytes"])
    p.save("gpt2.plan.yaml"); p = memflow.load_plan("gpt2.plan.yaml")
    report = p.run(steps=3)            # torchrun on this host: measured vs predicted per rank
    memflow.Cluster.load("a100-8-nvlink")

Times are in seconds and memory in bytes throughout.
"""
from __future__ import annotations

__version__ = "0.1.0"

from .cluster import Cluster, Link
from .devices import DeviceSpec, load_device
from .errors import (
    CaptureError,
    ConfigError,
    DeviceOutOfMemoryError,
    ExecutionError,
    InfeasibleError,
    MemflowError,
    ModelLoadError,
    PlanMismatchError,
    StrategyError,
)
from .graph.build import capture_graph
from .graph.record import TaskGraph, replay
from .model_file import ModelSpec, load_model_file
from .planfile import Plan, load_plan
from .planner import plan
from .profile import profile_model
from .strategy import Strategy

__all__ = [
    "__version__",
    "Cluster", "Link", "DeviceSpec", "load_device",
    "MemflowError", "ConfigError", "ModelLoadError", "CaptureError", "StrategyError", "InfeasibleError",
    "PlanMismatchError", "DeviceOutOfMemoryError", "ExecutionError",
    "TaskGraph", "replay", "capture_graph", "profile_model", "ModelSpec", "load_model_file", "Strategy",
    "plan", "Plan", "load_plan",
]
