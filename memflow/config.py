"""Experiment files: model + batch + cluster + search + run settings in one YAML.

Every section maps to a dataclass validated in ``__post_init__``; unknown
keys are rejected with the list of valid ones; sizes, bandwidths and times
take units (``16GiB``, ``300GB/s``, ``2us``). ``memflow run EXPERIMENT.yaml``
plans (or loads ``plan_file``) and runs. Example::

    kind: experiment
    model: ../../examples/gpt2.py      # relative to this file
    batch_size: 4
    env: {MEMFLOW_EXAMPLE_SCALE: tiny}
    cluster: {preset: cpu-2, gpu_memory: 64MiB}
    search: {seed: 0, time_budget_s: 5}
    run: {steps: 3}
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError
from .units import parse_bytes

__all__ = ["ClusterSection", "SearchSection", "RunSection", "Experiment", "load_experiment", "is_experiment"]


def _build(cls, d: Any, where: str):
    if d is None:
        return cls()
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(d).__name__}")
    valid = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(d) - set(valid))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; valid: {valid}")
    try:
        return cls(**d)
    except TypeError as e:
        raise ConfigError(f"{where}: {e}") from None


@dataclass
class ClusterSection:
    preset: str | None = None  # a configs/clusters name, a YAML path or cpu-N
    gpus: int | None = None
    gpu_type: str | None = None
    gpu_memory: Any = None  # "16GiB"

    def __post_init__(self) -> None:
        if self.preset is not None and self.gpu_type is not None:
            raise ConfigError("cluster: give preset or gpu_type, not both")
        if self.gpus is not None and (not isinstance(self.gpus, int) or self.gpus < 1):
            raise ConfigError(f"cluster.gpus must be a positive integer, got {self.gpus!r}")
        if self.gpu_memory is not None:
            parse_bytes(self.gpu_memory, name="cluster.gpu_memory", allow_zero=False)


@dataclass
class SearchSection:
    seed: int = 0
    time_budget_s: float | None = None
    iterations: int | None = None
    dtype: str = "fp32"
    granularity: Any = "auto"

    def __post_init__(self) -> None:
        if not isinstance(self.seed, int):
            raise ConfigError(f"search.seed must be an integer, got {self.seed!r}")
        if self.time_budget_s is not None and not (isinstance(self.time_budget_s, (int, float))
                                                   and self.time_budget_s > 0 and math.isfinite(self.time_budget_s)):
            raise ConfigError(f"search.time_budget_s must be a positive number, got {self.time_budget_s!r}")
        if self.iterations is not None and (not isinstance(self.iterations, int) or self.iterations < 1):
            raise ConfigError(f"search.iterations must be a positive integer, got {self.iterations!r}")
        if self.dtype not in ("fp32", "bf16"):
            raise ConfigError(f"search.dtype must be one of ['fp32', 'bf16'], got {self.dtype!r}")


@dataclass
class RunSection:
    steps: int = 5
    checkpoint_every: int = 0
    checkpoint_dir: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.steps, int) or self.steps < 1:
            raise ConfigError(f"run.steps must be a positive integer, got {self.steps!r}")
        if not isinstance(self.checkpoint_every, int) or self.checkpoint_every < 0:
            raise ConfigError(f"run.checkpoint_every must be a non-negative integer, got {self.checkpoint_every!r}")


@dataclass
class Experiment:
    model: str
    kind: str = "experiment"
    batch_size: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    cluster: ClusterSection = field(default_factory=ClusterSection)
    search: SearchSection = field(default_factory=SearchSection)
    run: RunSection = field(default_factory=RunSection)
    plan_file: str | None = None  # load this plan instead of planning
    source: str = ""

    def __post_init__(self) -> None:
        if self.kind != "experiment":
            raise ConfigError(f"kind must be 'experiment', got {self.kind!r}")
        if self.batch_size is not None and (not isinstance(self.batch_size, int) or self.batch_size < 1):
            raise ConfigError(f"batch_size must be a positive integer, got {self.batch_size!r}")
        if not isinstance(self.env, dict):
            raise ConfigError("env must be a mapping of environment variables")


def is_experiment(d: Any) -> bool:
    return isinstance(d, dict) and (d.get("kind") == "experiment" or ("model" in d and "strategy" not in d))


def load_experiment(path: str | Path, data: Any = None) -> Experiment:
    """Read and validate an experiment file; paths inside are relative to it."""
    path = Path(path)
    if data is None:
        if not path.exists():
            raise ConfigError(f"{path}: file not found")
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError:
            raise ConfigError(f"{path}: not valid YAML") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: an experiment must be a YAML mapping")
    d = dict(data)
    valid = [f.name for f in dataclasses.fields(Experiment) if f.name != "source"]
    unknown = sorted(set(d) - set(valid))
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {unknown}; valid: {valid}")
    if "model" not in d:
        raise ConfigError(f"{path}: an experiment needs `model: PATH/TO/model.py`")
    d["cluster"] = _build(ClusterSection, d.get("cluster"), f"{path}: cluster")
    d["search"] = _build(SearchSection, d.get("search"), f"{path}: search")
    d["run"] = _build(RunSection, d.get("run"), f"{path}: run")
    base = path.parent
    d["model"] = str((base / d["model"]).resolve())
    if d.get("plan_file"):
        d["plan_file"] = str((base / d["plan_file"]).resolve())
    d["env"] = {str(k): str(v) for k, v in (d.get("env") or {}).items()}
    try:
        return Experiment(source=str(path), **d)
    except TypeError as e:
        raise ConfigError(f"{path}: {e}") from None
