"""What a user asks the planner for: one validated record for the CLI, the YAML and the API.

``memflow plan`` builds a :class:`PlanRequest` from its flags, an experiment
file from its ``plan:`` section (the same field names), and
:func:`memflow.plan` from its keyword arguments; the planner reads nothing
else. Every check lives in ``__post_init__`` and says what was wrong in one
line, in the caller's own words (``--batch-size`` on the command line,
``batch_size`` elsewhere).
"""
from __future__ import annotations

import math
import os
from dataclasses import InitVar, dataclass, fields
from typing import Any, Callable

from .errors import ConfigError
from .kinds import OFFLOAD_PARAMETERS, OFFLOADS, SEARCHABLE_SHARDINGS, SHARD_PARAMETERS, TRAIN_DTYPES
from .units import parse_bytes

__all__ = ["PlanRequest", "check_batch_size", "check_positive_int", "DEFAULT_HEADROOM", "OPTION_FIELDS"]

DEFAULT_HEADROOM = 0.1  # plans keep 10% of each device's memory free


def check_positive_int(value: Any, name: str) -> int:
    """``value`` if it is an integer >= 1 (not a bool, not a float), else a ConfigError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return value


def check_batch_size(value: Any, name: str = "batch size") -> int:
    """The one check every batch size passes (flags, YAML, model files, the API, the executor)."""
    return check_positive_int(value, name)


@dataclass
class PlanRequest:
    """A plan request. ``model``: a model file path, an ``nn.Module`` (with ``example_batch``) or a
    :class:`~memflow.model_file.ModelSpec`. ``cluster``: a preset name, a YAML path or a Cluster;
    or give ``gpus`` / ``gpu_type`` / ``gpu_memory``. Memory in bytes or with a unit ("16GiB"),
    times in seconds."""

    model: Any
    example_batch: Callable | None = None  # batch_size -> batch (with an nn.Module)
    loss_fn: Callable | None = None  # (output, target) -> loss (with an nn.Module whose batch is (inputs, target))
    batch_size: int | None = None  # global batch per step (default: the model file's BATCH_SIZE)
    cluster: Any = None
    gpus: int | None = None
    gpu_type: str | None = None
    gpu_memory: Any = None
    dtype: str = "fp32"
    granularity: str | int = "auto"
    seed: int = 0
    time_budget_s: float | None = None
    iterations: int | None = None
    headroom: float = DEFAULT_HEADROOM
    measure: bool = False
    cache: bool = True
    # parts of the strategy fixed by the user (None: searched)
    dp: int | None = None  # data-parallel replicas
    pp: int | None = None  # pipeline stages
    microbatches: int | None = None  # micro-batches per step (1: one forward/backward pass per step)
    max_microbatches: int | None = None  # a bound on them (default 32)
    sharding: str | None = None  # every stage's sharding level (memflow.kinds.Sharding)
    offload: str | None = None  # what every stage keeps in host memory (memflow.kinds.Offload)
    # tensor-parallel degree (memflow.graph.tp): the devices of a machine that run one replica together;
    # None: searched (on GPUs every power of two dividing a machine's devices; on cpu-N, 1)
    tp: int | None = None
    cli: InitVar[bool] = False  # name fields as the command line's flags in errors

    def __post_init__(self, cli: bool) -> None:
        name = (lambda f: "--" + f.replace("_", "-").removesuffix("-s")) if cli else (lambda f: f)
        if self.model is None or (isinstance(self.model, (str, os.PathLike)) and not str(self.model)):
            raise ConfigError("a plan request needs a model: a model file path or an nn.Module")
        if self.batch_size is not None:
            check_batch_size(self.batch_size, name("batch_size"))
        if self.gpus is not None:
            check_positive_int(self.gpus, name("gpus"))
        if self.gpu_memory is not None:
            parse_bytes(self.gpu_memory, name=name("gpu_memory"), allow_zero=False)
        if self.gpu_type is not None and self.cluster is not None:
            raise ConfigError(f"give {name('gpu_type')} or {name('cluster')}, not both")
        for f in ("gpu_type",):
            v = getattr(self, f)
            if v is not None and (not isinstance(v, str) or not v):
                raise ConfigError(f"{name(f)} must be a device name, got {v!r}")
        if self.cluster is not None and isinstance(self.cluster, (str, os.PathLike)) and not str(self.cluster):
            raise ConfigError(f"{name('cluster')} must be a cluster preset name or a YAML file, got ''")
        if self.dtype not in TRAIN_DTYPES:
            raise ConfigError(f"{name('dtype')} must be one of {list(TRAIN_DTYPES)}, got {self.dtype!r}")
        g = self.granularity
        if g != "auto" and not (isinstance(g, int) and not isinstance(g, bool) and g >= 1):
            try:
                ok = isinstance(g, str) and int(g) >= 1
            except ValueError:
                ok = False
            if not ok:
                raise ConfigError(f"{name('granularity')} must be 'auto' or a positive integer, got {g!r}")
            self.granularity = int(g)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"{name('seed')} must be a non-negative integer, got {self.seed!r}")
        t = self.time_budget_s
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not (t > 0 and math.isfinite(t))):
            raise ConfigError(f"{name('time_budget_s')} must be a positive number of seconds, got {t!r}")
        for f in ("iterations", "dp", "pp", "microbatches", "max_microbatches", "tp"):
            if getattr(self, f) is not None:
                check_positive_int(getattr(self, f), name(f))
        if self.microbatches is not None and self.max_microbatches is not None and \
                self.microbatches > self.max_microbatches:
            raise ConfigError(f"{name('microbatches')} {self.microbatches} is above {name('max_microbatches')} "
                              f"{self.max_microbatches}")
        if self.sharding is not None and self.sharding not in SEARCHABLE_SHARDINGS:
            raise ConfigError(f"{name('sharding')} must be one of {list(SEARCHABLE_SHARDINGS)}, got {self.sharding!r}")
        if self.offload is not None and self.offload not in OFFLOADS:
            raise ConfigError(f"{name('offload')} must be one of {list(OFFLOADS)}, got {self.offload!r}")
        if self.offload == OFFLOAD_PARAMETERS and (self.sharding not in (None, SHARD_PARAMETERS) or self.dp == 1):
            raise ConfigError(f"{name('offload')} {OFFLOAD_PARAMETERS} needs {name('sharding')} parameters on more "
                              f"than one data-parallel rank (got {name('sharding')} {self.sharding}, "
                              f"{name('dp')} {self.dp})")
        h = self.headroom
        if isinstance(h, bool) or not isinstance(h, (int, float)) or not 0.0 <= h < 1.0:
            raise ConfigError(f"{name('headroom')} must be a fraction in [0, 1), got {h!r}")
        for f in ("measure", "cache"):
            if not isinstance(getattr(self, f), bool):
                raise ConfigError(f"{name(f)} must be true or false, got {getattr(self, f)!r}")
        for f in ("example_batch", "loss_fn"):
            v = getattr(self, f)
            if v is not None and not callable(v):
                raise ConfigError(f"{name(f)} must be a function, got {type(v).__name__}")


#: The request's options (what an experiment file's ``plan:`` section and :func:`memflow.plan`'s keyword
#: arguments may set): every field but the model and its callables.
OPTION_FIELDS = tuple(f.name for f in fields(PlanRequest) if f.name not in ("model", "example_batch", "loss_fn"))
