"""The executor's run configuration (``RunConfig``), written as JSON for the workers."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ConfigError
from ..strategy import Strategy

__all__ = ["RunConfig", "error_path", "DEVICES"]

DEVICES = ("auto", "cpu", "cuda")


def error_path(out_json: str, rank: int) -> str:
    """Where rank ``rank`` writes its one-line error report."""
    return f"{out_json}.rank{rank}.error.json"


@dataclass
class RunConfig:
    """What every rank of a planned run needs.

    ``batch_size`` is the global batch (samples per step, all dp ranks
    together). ``strategy`` is :meth:`Strategy.to_dict`. ``capacity_bytes``
    is the accounted device memory per rank (None: no cap). ``predicted``
    may hold ``peak_bytes`` (a per-rank list) and ``step_time_s``.
    ``node_names`` (when given) must equal the captured nodes, or the run
    is refused. ``device``: ``"cpu"`` (gloo; memory is the accounted live
    bytes), ``"cuda"`` (NCCL, one GPU per rank; fails when a rank has none)
    or ``"auto"`` (CUDA where there is a GPU, else the CPU). ``dtype``: the
    training precision (``bf16``: forward passes under autocast, as profiled). ``fail_rank`` /
    ``fail_step`` are a test hook: that rank calls ``os._exit(1)`` at the
    start of that step.
    """

    model_file: str
    batch_size: int
    strategy: dict[str, Any]
    steps: int = 3
    seed: int = 0
    granularity: str | int = "auto"
    node_names: list[str] = field(default_factory=list)
    capacity_bytes: int | None = None
    predicted: dict[str, Any] = field(default_factory=dict)
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

    def __post_init__(self) -> None:
        if isinstance(self.strategy, Strategy):
            self.strategy = self.strategy.to_dict()
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ConfigError(f"batch_size must be a positive int, got {self.batch_size!r}")
        if not isinstance(self.steps, int) or self.steps < 1:
            raise ConfigError(f"steps must be a positive int, got {self.steps!r}")
        if self.dtype not in ("fp32", "bf16"):
            raise ConfigError(f"dtype must be fp32 or bf16; got {self.dtype!r}")
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
        strat = self.get_strategy()
        if self.batch_size % (strat.dp * strat.microbatches):
            raise ConfigError(
                f"batch {self.batch_size} is not divisible by dp {strat.dp} × microbatches "
                f"{strat.microbatches} = {strat.dp * strat.microbatches}"
            )

    def get_strategy(self) -> Strategy:
        return Strategy.from_dict(dict(self.strategy))

    @property
    def world_size(self) -> int:
        s = self.get_strategy()
        return s.dp * s.pp

    # ----------------------------------------------------------- serialising
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunConfig":
        valid = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - valid)
        if unknown:
            raise ConfigError(f"unknown run config key(s) {unknown}; valid: {sorted(valid)}")
        return cls(**d)

    @classmethod
    def load(cls, path: str) -> "RunConfig":
        with open(path) as f:
            return cls.from_dict(json.load(f))

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            f.write(self.to_json())
