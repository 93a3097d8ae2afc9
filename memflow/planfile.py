"""The Plan record: a strategy with its predictions, as a versioned YAML file.

A plan holds everything needed to run and to check it: the model file and
batch, the cluster, the strategy, the graph fingerprint (so a changed model
is refused), the predicted step time and per-device peaks, the baselines and
Pareto front the search saw, and the seed and settings that produced it.
Writes are atomic.
"""
from __future__ import annotations

import datetime as _dt
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError, PlanMismatchError
from .strategy import Strategy

__all__ = ["Plan", "load_plan", "PLAN_VERSION"]

PLAN_VERSION = 1


@dataclass
class Plan:
    """An executable plan. Bytes in bytes, times in seconds."""

    model_file: str
    model_name: str
    batch_size: int  # global batch per step
    strategy: Strategy
    cluster: dict[str, Any]  # Cluster.to_dict()
    node_names: list[str]
    fingerprint: str  # graph fingerprint at the plan's micro-batch size
    predicted: dict[str, Any] = field(default_factory=dict)  # step_time_s, peak_bytes, capacity_bytes, fits, binding
    baselines: dict[str, Any] = field(default_factory=dict)  # name -> {fits, step_time_s, peak_bytes}
    pareto: list[dict[str, Any]] = field(default_factory=list)  # [{step_time_s, max_peak_bytes}]
    settings: dict[str, Any] = field(default_factory=dict)  # seed, dtype, granularity, budget, iterations, ...
    version: int = PLAN_VERSION
    created: str = ""

    @property
    def fits(self) -> bool:
        return bool(self.predicted.get("fits"))

    @property
    def dtype(self) -> str:
        return self.settings.get("dtype", "fp32")

    @property
    def granularity(self) -> Any:
        return self.settings.get("granularity", "auto")

    @property
    def seed(self) -> int:
        return int(self.settings.get("seed", 0))

    @property
    def micro_batch_size(self) -> int:
        return self.strategy.microbatch_size(self.batch_size)

    def get_cluster(self):
        from .cluster import Cluster

        return Cluster.from_dict(self.cluster)

    # ----------------------------------------------------------- file I/O
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["strategy"] = self.strategy.to_dict()
        return _plain(d)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the plan as YAML, atomically."""
        path = Path(path)
        if not self.created:
            self.created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        text = yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None, width=120)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(f"# MemFlow plan v{PLAN_VERSION}: run with `memflow run {path.name}`\n")
                f.write(text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def from_dict(cls, d: Any, source: str = "plan") -> "Plan":
        if not isinstance(d, dict):
            raise ConfigError(f"{source}: a plan file must be a YAML mapping, got {type(d).__name__}")
        version = d.get("version")
        if version != PLAN_VERSION:
            raise ConfigError(f"{source}: plan format version {version!r} is not supported (this MemFlow reads "
                              f"v{PLAN_VERSION}); re-run `memflow plan`")
        valid = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - valid)
        if unknown:
            raise ConfigError(f"{source}: unknown plan key(s) {unknown}; valid: {sorted(valid)}")
        missing = sorted(k for k in ("model_file", "batch_size", "strategy", "cluster", "node_names", "fingerprint")
                         if k not in d)
        if missing:
            raise ConfigError(f"{source}: plan is missing {missing}")
        d = dict(d)
        cl = d["cluster"]
        try:
            n_dev = int(cl["num_nodes"]) * int(cl["devices_per_node"])
        except (TypeError, KeyError, ValueError):
            raise ConfigError(f"{source}: cluster must give num_nodes and devices_per_node") from None
        try:
            if not isinstance(d["strategy"], dict):
                raise ValueError("strategy must be a mapping")
            d["strategy"] = Strategy.from_dict(d["strategy"])
            d["strategy"].validate(len(d["node_names"]), n_devices=n_dev, batch_size=int(d["batch_size"]))
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{source}: invalid strategy: {e}") from None
        return cls(**d)

    # ------------------------------------------------------------ checking
    def check_model(self, spec: Any) -> None:
        """Raise PlanMismatchError unless ``spec``'s graph matches the plan's fingerprint."""
        from .graph.build import capture_graph

        g = capture_graph(spec, self.micro_batch_size, dtype=self.dtype, granularity=self.granularity)
        if g.fingerprint != self.fingerprint:
            names = [nd.name for nd in g.nodes]
            what = "its nodes differ" if names != self.node_names else "its parameters or batch shapes differ"
            raise PlanMismatchError(
                f"{spec.path}: the model no longer matches the plan ({what}; fingerprint {g.fingerprint} ≠ "
                f"{self.fingerprint}); re-run `memflow plan`"
            )

    # ------------------------------------------------------------ running
    def run(self, steps: int = 5, **kwargs: Any):
        """Execute the plan with torch.distributed on this host (see :mod:`memflow.executor`)."""
        from .runner import run_plan_file

        return run_plan_file(self, steps=steps, **kwargs)


def _plain(x: Any) -> Any:
    """Plain Python containers/scalars only (numpy scalars, str subclasses → builtins), for safe YAML."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, bool) or x is None:
        return x
    if isinstance(x, str):
        return str(x)
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return float(x)
    if hasattr(x, "item"):  # numpy scalar
        return _plain(x.item())
    return str(x)


def load_plan(path: str | os.PathLike) -> Plan:
    """Read a plan file; a missing, corrupt or stale file is a one-line ConfigError."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: plan file not found")
    try:
        d = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: not valid YAML{where}") from None
    return Plan.from_dict(d, source=str(path))
