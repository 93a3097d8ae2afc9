"""MemFlow: find how to train a PyTorch model fastest without running out of memory.

Public API::

    import memflow
    p = memflow.plan("examples/gpt2.py", gpus=4, gpu_type="v100-16gb")   # or a module + example_batch
    print(p.strategy.summary(), p.predicted.step_time_s, p.predicted.peak_bytes)
    p.save("gpt2.plan.yaml"); p = memflow.load_plan("gpt2.plan.yaml")
    report = memflow.run(p, steps=3)   # one process per device here: measured vs predicted per rank
    memflow.Cluster.load("a100-8-nvlink")

Times are in seconds and memory in bytes throughout.

The names below are loaded when first used: ``import memflow`` (and the CLI's
``--help``) does not import torch; the records (``memflow.strategy``,
``memflow.cluster``, ``memflow.graph.record``), the simulator and the search
never do.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> the module that defines it
_WHERE = {
    "Cluster": "memflow.cluster", "Link": "memflow.cluster",
    "DeviceSpec": "memflow.devices", "load_device": "memflow.devices",
    "MemflowError": "memflow.errors", "ConfigError": "memflow.errors", "ModelLoadError": "memflow.errors",
    "CaptureError": "memflow.errors", "StrategyError": "memflow.errors", "InfeasibleError": "memflow.errors",
    "PlanMismatchError": "memflow.errors", "DeviceOutOfMemoryError": "memflow.errors",
    "ExecutionError": "memflow.errors",
    "TaskGraph": "memflow.graph.record", "replay": "memflow.graph.record",
    "capture_graph": "memflow.profile.build", "profile_model": "memflow.profile",
    "ModelSpec": "memflow.model_file", "load_model_file": "memflow.model_file",
    "Strategy": "memflow.strategy", "PlanRequest": "memflow.request",
    "Prediction": "memflow.records", "RunReport": "memflow.executor.report",
    "plan": "memflow.planner", "simulate_plan": "memflow.planner",
    "Plan": "memflow.planfile", "load_plan": "memflow.planfile",
    "run": "memflow.runner",
}

__all__ = ["__version__", *_WHERE]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from .cluster import Cluster, Link
    from .devices import DeviceSpec, load_device
    from .errors import (CaptureError, ConfigError, DeviceOutOfMemoryError, ExecutionError, InfeasibleError,
                         MemflowError, ModelLoadError, PlanMismatchError, StrategyError)
    from .executor.report import RunReport
    from .graph.record import TaskGraph, replay
    from .model_file import ModelSpec, load_model_file
    from .planfile import Plan, load_plan
    from .planner import plan, simulate_plan
    from .profile import profile_model
    from .profile.build import capture_graph
    from .records import Prediction
    from .request import PlanRequest
    from .runner import run
    from .strategy import Strategy


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'memflow' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
