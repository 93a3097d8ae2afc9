"""The records a plan carries after the search: predictions, baselines, the Pareto front, settings.

Bytes in bytes, times in seconds, as the field names say. They are written to
plan files and printed as JSON with :func:`memflow.typed.to_data`, and read
back with :func:`memflow.typed.from_data`, which checks every field's type.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .kinds import TrainDtype

__all__ = ["MemoryBreakdown", "Prediction", "BaselineResult", "ParetoPoint", "PlanSettings"]


@dataclass
class MemoryBreakdown:
    """One device's predicted peak, split by what holds the bytes (the parts sum to the peak)."""

    params_bytes: int = 0
    grads_bytes: int = 0
    optimizer_bytes: int = 0
    activations_bytes: int = 0  # this micro-batch's live buffers and its batch inputs
    inflight_microbatches_bytes: int = 0  # the activations other in-flight micro-batches retain
    swap_buffers_bytes: int = 0  # swapped buffers prefetched back
    transient_bytes: int = 0  # the peak phase's in-phase temporaries
    phase: str = ""  # where the peak is: F0, B0, Fwarm, Fsteady, Bj, OPT

    @classmethod
    def from_sim(cls, b: dict[str, Any]) -> "MemoryBreakdown":
        """From a SimResult breakdown entry (keys without the ``_bytes`` suffix)."""
        return cls(**{f"{k}_bytes" if k != "phase" else k: (int(v) if k != "phase" else str(v))
                      for k, v in b.items()})


@dataclass
class Prediction:
    """The simulator's prediction for a plan's strategy on its cluster's usable memory."""

    fits: bool
    step_time_s: float
    peak_bytes: list[int]  # per device
    capacity_bytes: list[int]  # per device: the usable memory the plan was made for
    rank_step_time_s: list[float] = field(default_factory=list)  # per device: when its own step ends
    binding: str = ""
    samples_per_s: float = 0.0
    breakdown: list[MemoryBreakdown] = field(default_factory=list)  # per device
    strategy_digest: str = ""  # Strategy.digest() of the strategy this prediction is for
    # per device, where a fake run of the step through the allocator model stood for the GPU's
    # (memflow.reserved): the caching allocator's reserved peak; empty elsewhere
    reserved_bytes: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.capacity_bytes) != len(self.peak_bytes):
            raise ValueError(f"{len(self.peak_bytes)} peaks but {len(self.capacity_bytes)} capacities")
        if self.rank_step_time_s and len(self.rank_step_time_s) != len(self.peak_bytes):
            raise ValueError(f"{len(self.peak_bytes)} peaks but {len(self.rank_step_time_s)} rank step times")

    def worst_device(self) -> int:
        """The device whose peak is furthest over (or least under) its capacity."""
        return max(range(len(self.peak_bytes)), key=lambda d: self.peak_bytes[d] - self.capacity_bytes[d])


@dataclass
class BaselineResult:
    """A fixed strategy a user might pick by hand, simulated on the same devices."""

    fits: bool
    step_time_s: float
    peak_bytes: list[int]  # per device

    @property
    def max_peak_bytes(self) -> int:
        return max(self.peak_bytes) if self.peak_bytes else 0


@dataclass
class ParetoPoint:
    """A strategy the search saw that no other beat on both step time and its largest peak."""

    step_time_s: float
    max_peak_bytes: int


@dataclass
class PlanSettings:
    """How a plan was made: the request's settings and what the search did."""

    seed: int = 0
    dtype: TrainDtype = "fp32"
    granularity: str | int = "auto"
    time_budget_s: float | None = None
    headroom: float = 0.1
    measure: bool = False
    no_fit_proved: bool = False  # nothing fit the search, and the exact solver proved that nothing can
    iterations: int = 0
    search_seconds: float = 0.0
    cost_source: str = ""  # measured | predicted
    torch: str = ""
    # the parts of the strategy the request fixed (None: searched)
    dp: int | None = None
    pp: int | None = None
    microbatches: int | None = None
    max_microbatches: int | None = None
    sharding: str | None = None  # every stage's sharding level (memflow.kinds.Sharding)
    offload: str | None = None  # what every stage keeps in host memory (memflow.kinds.Offload)
    tp: int | None = None  # the tensor-parallel degree the request fixed
