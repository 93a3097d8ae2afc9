"""MemFlow: find how to train a PyTorch model fastest without running out of memory.

Public API (more arrives with the planner): load a model file, profile its
training step as a task graph, describe clusters and strategies.
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
from .profile import profile_model
from .strategy import Strategy

__all__ = [
    "__version__",
    "Cluster", "Link", "DeviceSpec", "load_device",
    "MemflowError", "ConfigError", "ModelLoadError", "CaptureError", "StrategyError", "InfeasibleError",
    "PlanMismatchError", "DeviceOutOfMemoryError", "ExecutionError",
    "TaskGraph", "replay", "capture_graph", "profile_model", "ModelSpec", "load_model_file", "Strategy",
]
