"""The executor's run configuration (``RunConfig``), written as JSON for the workers."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ..kinds import TRAIN_DTYPES
from ..request import check_batch_size, check_positive_int
from ..strategy import Strategy
from ..typed import from_data, to_data

__all__ = ["RunConfig", "RunPrediction", "error_path", "DEVICES"]

DEVICES = ("auto", "cpu", "cuda")


def error_path(out_json: str, rank: int) -> str:
    """Where rank ``rank`` writes its one-line error report."""
    return f"{out_json}.rank{rank}.error.json"


@dataclass
class RunPrediction:
    """What the plan predicts for each rank (empty: no prediction to compare with)."""

    peak_bytes: list[int] = field(default_factory=list)  # per rank
    step_time_s: list[float] = field(default_factory=list)  # per rank: when its own step ends
    reserved_bytes: list[int] = field(default_factory=list)  # per rank: the allocator's (memflow.reserved)

    def peak(self, rank: int) -> int | None:
        return self.peak_bytes[rank] if rank < len(self.peak_bytes) else None

    def time(self, rank: int) -> float | None:
        return self.step_time_s[rank] if rank < len(self.step_time_s) else None

    def reserved(self, rank: int) -> int | None:
        return self.reserved_bytes[rank] if rank < len(self.reserved_bytes) else None


@dataclass
class RunConfig:
    """What every rank of a planned run needs.

    ``batch_size`` is the global batch (samples per step, all dp ranks
    together). ``capacity_bytes`` is the accounted device memory per rank
    (None: no cap). ``predicted``: the plan's per-rank figures (None: none to compare with).
    ``node_names`` (when given) must equal the captured nodes, or the run
    is refused. ``device``: ``"cpu"`` (gloo; memory is the accounted live
    bytes), ``"cuda"`` (NCCL, one GPU per rank; fails when a rank has none)
    or ``"auto"`` (CUDA where there is a GPU, else the CPU). ``dtype``: the
    training precision (``bf16``: forward passes under autocast, as profiled). ``fail_rank`` /
    ``fail_step`` are a test hook: that rank calls ``os._exit(1)`` at the
    start of that step. ``resume_from``: the checkpoint to resume (the
    launcher picks and verifies it; unset, the ranks pick the newest in
    ``checkpoint_dir`` and verify it themselves). ``progress_file``: where
    ranks append progress events (:mod:`.progress`).
    """

    model_file: str
    batch_size: int
    strategy: Strategy
    steps: int = 3
    seed: int = 0
    granularity: str | int = "auto"
    node_names: list[str] = field(default_factory=list)
    capacity_bytes: int | None = None
    predicted: RunPrediction = field(default_factory=RunPrediction)
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0
    resume: bool = False
    out_json: str | None = None
    warmup: int = 1
    device: str = "auto"
    dtype: str = "fp32"
    bucket_cap_bytes: int = 25 * 2**20
    comm_timeout_s: float = 30.0
    fail_rank: int | None = None
    fail_step: int | None = None
    resume_from: str | None = None
    progress_file: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.strategy, dict):
            self.strategy = Strategy.from_dict(self.strategy)
        if self.predicted is None:  # no prediction to compare with
            self.predicted = RunPrediction()
        elif isinstance(self.predicted, dict):
            self.predicted = from_data(RunPrediction, self.predicted, "predicted")
        elif not isinstance(self.predicted, RunPrediction):
            raise ConfigError(f"predicted must be a RunPrediction, a mapping or None, got {type(self.predicted).__name__}")
        check_batch_size(self.batch_size, "batch_size")
        check_positive_int(self.steps, "steps")
        if self.dtype not in TRAIN_DTYPES:
            raise ConfigError(f"dtype must be one of {list(TRAIN_DTYPES)}, got {self.dtype!r}")
        if self.device not in DEVICES:
            raise ConfigError(f"device must be one of {', '.join(DEVICES)}; got {self.device!r}")
        if self.warmup < 0:
            raise ConfigError(f"warmup must be >= 0, got {self.warmup}")
        if self.checkpoint_every < 0:
            raise ConfigError(f"checkpoint_every must be >= 0, got {self.checkpoint_every}")
        if (self.checkpoint_every or self.resume) and not self.checkpoint_dir:
            raise ConfigError("checkpoint_every / resume need a checkpoint_dir")
        if self.capacity_bytes is not None and self.capacity_bytes < 1:
            raise ConfigError(f"capacity_bytes must be positive or None, got {self.capacity_bytes}")
        if self.comm_timeout_s <= 0:
            raise ConfigError(f"comm_timeout_s must be positive, got {self.comm_timeout_s}")
        try:
            self.strategy.check_batch(self.batch_size)
        except ValueError as e:
            raise ConfigError(str(e)) from None

    @property
    def world_size(self) -> int:
        return self.strategy.num_devices

    # ----------------------------------------------------------- serialising
    def to_dict(self) -> dict[str, Any]:
        return to_data(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunConfig":
        return from_data(cls, d, "run config")

    @classmethod
    def load(cls, path: str) -> "RunConfig":
        with open(path) as f:
            return cls.from_dict(json.load(f))

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            f.write(self.to_json())
