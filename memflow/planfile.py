"""The Plan record: a strategy with its predictions, as a versioned YAML file.

A plan holds everything needed to run and to check it: the model file and
batch, the cluster, the strategy, the graph fingerprint (so a changed model
is refused), the predicted step time and per-device peaks, the baselines and
Pareto front the search saw, and the seed and settings that produced it.
Every field is typed (:mod:`memflow.records`) and checked when a file is read.
Writes are atomic.
"""
from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .cluster import Cluster
from .errors import ConfigError, MemflowError
from .fileio import atomic_write_text, read_yaml
from .records import BaselineResult, ParetoPoint, PlanSettings, Prediction
from .strategy import Strategy, dict_digest
from .typed import check_value, from_data, to_data

__all__ = ["Plan", "load_plan", "PLAN_VERSION"]

PLAN_VERSION = 2  # 2: typed predictions (breakdown fields in bytes named *_bytes); v1 files are read too


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
    predicted: Prediction
    baselines: dict[str, BaselineResult] = field(default_factory=dict)
    pareto: list[ParetoPoint] = field(default_factory=list)
    settings: PlanSettings = field(default_factory=PlanSettings)
    model_sha256: str = ""  # the model file's bytes when the plan was made
    # the environment the model was built under (MEMFLOW_* and the file's ENV); None: not recorded
    env: dict[str, str] | None = None
    version: int = PLAN_VERSION
    created: str = ""

    @property
    def fits(self) -> bool:
        return self.predicted.fits

    @property
    def micro_batch_size(self) -> int:
        return self.strategy.microbatch_size(self.batch_size)

    def get_cluster(self) -> Cluster:
        return Cluster.from_dict(self.cluster)

    # ----------------------------------------------------------- file I/O
    def to_dict(self) -> dict[str, Any]:
        return to_data(self)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the plan as YAML, atomically."""
        path = Path(path)
        if not self.created:
            self.created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        text = yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None, width=120)
        atomic_write_text(path, f"# MemFlow plan v{PLAN_VERSION}: run with `memflow run {path.name}`\n" + text)
        return path

    @classmethod
    def from_dict(cls, d: Any, source: str = "plan") -> "Plan":
        if not isinstance(d, dict):
            raise ConfigError(f"{source}: a plan file must be a YAML mapping, got {type(d).__name__}")
        version = d.get("version")
        if version is None:
            raise ConfigError(f"{source}: no plan format version: not a MemFlow plan, or a truncated or damaged one; "
                              f"re-run `memflow plan`")
        if version not in (1, PLAN_VERSION):
            raise ConfigError(f"{source}: plan format version {version!r} is not supported (this MemFlow reads "
                              f"v1 and v{PLAN_VERSION}); re-run `memflow plan`")
        d = dict(d)
        if version == 1:
            d = _from_v1(d)
        d["version"] = PLAN_VERSION
        missing = sorted(f for f in ("model_file", "model_name", "batch_size", "strategy", "cluster", "node_names",
                                     "fingerprint", "predicted") if f not in d)
        if missing:
            raise ConfigError(f"{source}: plan is missing {missing}")
        if not isinstance(d.get("strategy"), dict):
            raise ConfigError(f"{source}: strategy must be a mapping, got {d.get('strategy')!r}")
        old = d["strategy"]
        try:
            d["strategy"] = Strategy.from_dict(old)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{source}: invalid strategy: {e}") from None
        p = from_data(cls, d, f"{source}: plan")
        if ("shard_state" in old or "offload" not in old) and p.predicted.strategy_digest == dict_digest(old):
            p.predicted.strategy_digest = p.strategy.digest()  # (the same strategy, in today's fields)
        try:
            cl = Cluster.from_dict(p.cluster)
        except MemflowError as e:
            raise ConfigError(f"{source}: invalid cluster: {e}") from None
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            raise ConfigError(f"{source}: invalid cluster: {type(e).__name__}: {e}") from None
        try:
            check_value(int, p.batch_size, f"{source}: batch_size")
            p.strategy.validate(len(p.node_names), n_devices=cl.num_devices, batch_size=p.batch_size)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{source}: invalid strategy: {e}") from None
        n = cl.num_devices
        if len(p.predicted.peak_bytes) != n:
            raise ConfigError(f"{source}: predicted.peak_bytes has {len(p.predicted.peak_bytes)} entries for "
                              f"{n} devices")
        return p


def _from_v1(d: dict[str, Any]) -> dict[str, Any]:
    """A v1 plan's mapping in v2's field names (v1 wrote its breakdown entries without ``_bytes``)."""
    pred = d.get("predicted")
    if isinstance(pred, dict) and isinstance(pred.get("breakdown"), list):
        pred = dict(pred)
        pred["breakdown"] = [{(k if k == "phase" else f"{k}_bytes"): v for k, v in b.items()} if isinstance(b, dict)
                             else b for b in pred["breakdown"]]
        d["predicted"] = pred
    return d


def load_plan(path: str | os.PathLike) -> Plan:
    """Read a plan file; a missing, corrupt or stale file is a one-line ConfigError."""
    return Plan.from_dict(read_yaml(path, "plan file"), source=str(path))
