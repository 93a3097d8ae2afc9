"""MemFlow's exception hierarchy.

Every user mistake surfaces as a subclass of :class:`MemflowError`; the CLI
turns it into one line on stderr and a non-zero exit code, never a traceback.
"""
from __future__ import annotations

__all__ = [
    "MemflowError",
    "ConfigError",
    "ModelLoadError",
    "CaptureError",
    "StrategyError",
    "InfeasibleError",
    "PlanMismatchError",
    "DeviceOutOfMemoryError",
    "ExecutionError",
]


class MemflowError(Exception):
    """Base of every error MemFlow raises on purpose (exit code 2 in the CLI)."""

    exit_code = 2


class ConfigError(MemflowError, ValueError):
    """A YAML file, a CLI value or a config dataclass field is invalid."""


class ModelLoadError(MemflowError):
    """The user's model file is missing, raises on import, or breaks the contract."""


class CaptureError(MemflowError):
    """The training step could not be captured as a task graph."""


class StrategyError(MemflowError, ValueError):
    """A strategy is invalid for the graph or the cluster (shows the arithmetic)."""


class InfeasibleError(MemflowError):
    """No strategy fits the devices' memory (exit code 3: the input was fine, the answer is no)."""

    exit_code = 3


class PlanMismatchError(MemflowError):
    """A plan file does not match the model or batch it is used with."""


class DeviceOutOfMemoryError(MemflowError, RuntimeError):
    """Accounted live tensor bytes exceeded a device's capacity during a run."""


class ExecutionError(MemflowError, RuntimeError):
    """A distributed run failed (a rank died, timed out, or diverged)."""
