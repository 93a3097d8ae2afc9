"""Experiment files: a model, its environment, a plan request and run settings in one YAML.

The ``plan:`` section holds :class:`~memflow.request.PlanRequest`'s fields
under their own names (the flags of ``memflow plan``, with ``_`` for ``-``):
one schema for the CLI, the YAML and the API. Unknown keys are rejected with
the list of valid ones; sizes take units (``16GiB``). Paths inside are
relative to the file. ``memflow run EXPERIMENT.yaml`` plans (or loads
``plan_file``) and runs. Example::

    kind: experiment
    model: ../../examples/gpt2.py
    env: {MEMFLOW_EXAMPLE_SCALE: tiny}
    plan: {batch_size: 4, cluster: cpu-2, gpu_memory: 64MiB, seed: 0, time_budget_s: 5}
    run: {steps: 3}

Files written for earlier versions (``batch_size`` at the top, ``cluster:
{preset, gpus, gpu_type, gpu_memory}`` and ``search: {seed, time_budget_s,
iterations, dtype, granularity}`` sections) are read as the same request.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .fileio import read_yaml_mapping
from .request import OPTION_FIELDS, PlanRequest, check_positive_int
from .typed import from_data

__all__ = ["RunSection", "Experiment", "load_experiment", "is_experiment"]


@dataclass
class RunSection:
    steps: int = 5
    checkpoint_every: int = 0
    checkpoint_dir: str | None = None

    def __post_init__(self) -> None:
        check_positive_int(self.steps, "run.steps")
        if isinstance(self.checkpoint_every, bool) or not isinstance(self.checkpoint_every, int) \
                or self.checkpoint_every < 0:
            raise ConfigError(f"run.checkpoint_every must be a non-negative integer, got {self.checkpoint_every!r}")


@dataclass
class Experiment:
    request: PlanRequest
    env: dict[str, str] = field(default_factory=dict)
    run: RunSection = field(default_factory=RunSection)
    plan_file: str | None = None  # load this plan instead of planning
    source: str = ""


_TOP = ("kind", "model", "env", "plan", "run", "plan_file")
_LEGACY = {"cluster": {"preset": "cluster", "gpus": "gpus", "gpu_type": "gpu_type", "gpu_memory": "gpu_memory"},
           "search": {k: k for k in ("seed", "time_budget_s", "iterations", "dtype", "granularity")}}


def is_experiment(d: Any) -> bool:
    return isinstance(d, dict) and (d.get("kind") == "experiment" or ("model" in d and "strategy" not in d))


def _legacy_options(d: dict[str, Any], where: str) -> dict[str, Any]:
    """Plan options from an earlier version's top-level batch_size and cluster / search sections."""
    opts: dict[str, Any] = {}
    if "batch_size" in d:
        opts["batch_size"] = d.pop("batch_size")
    for section, names in _LEGACY.items():
        if section not in d:
            continue
        sec = d.pop(section)
        if sec is None:
            continue
        if not isinstance(sec, dict):
            raise ConfigError(f"{where}: {section} must be a mapping, got {sec!r}")
        unknown = sorted(str(k) for k in sec if k not in names)
        if unknown:
            raise ConfigError(f"{where}: {section}: unknown key(s) {unknown}; valid: {sorted(names)}")
        opts.update({names[k]: v for k, v in sec.items()})
    return opts


def load_experiment(path: str | Path, data: Any = None) -> Experiment:
    """Read and validate an experiment file; paths inside are relative to it."""
    path = Path(path)
    where = str(path)
    raw = read_yaml_mapping(path, "experiment file") if data is None else data
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: an experiment must be a YAML mapping")
    d = dict(raw)
    legacy = _legacy_options(d, where)
    unknown = sorted(str(k) for k in d if k not in _TOP)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; valid: {list(_TOP)}")
    if d.get("kind", "experiment") != "experiment":
        raise ConfigError(f"{where}: kind must be 'experiment', got {d.get('kind')!r}")
    model = d.get("model")
    if not isinstance(model, str) or not model:
        raise ConfigError(f"{where}: an experiment needs `model: PATH/TO/model.py`, got {model!r}")
    env = d.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, (str, int, float)) and
                                            not isinstance(v, bool) for k, v in env.items()):
        raise ConfigError(f"{where}: env must be a mapping of environment variable names to values, got {env!r}")
    opts = d.get("plan") or {}
    if not isinstance(opts, dict):
        raise ConfigError(f"{where}: plan must be a mapping of plan options, got {opts!r}")
    unknown = sorted(str(k) for k in opts if k not in OPTION_FIELDS)
    if unknown:
        raise ConfigError(f"{where}: plan: unknown key(s) {unknown}; valid: {list(OPTION_FIELDS)}")
    opts = {**legacy, **opts}
    base = path.parent
    if isinstance(opts.get("cluster"), str) and opts["cluster"].endswith((".yaml", ".yml")):
        opts["cluster"] = str((base / opts["cluster"]).resolve())
    try:
        request = PlanRequest(str((base / model).resolve()), **opts)
    except ConfigError as e:
        raise ConfigError(f"{where}: plan: {e}") from None
    plan_file = d.get("plan_file")
    if plan_file is not None and (not isinstance(plan_file, str) or not plan_file):
        raise ConfigError(f"{where}: plan_file must be a path, got {plan_file!r}")
    return Experiment(request=request, env={str(k): str(v) for k, v in env.items()},
                      run=from_data(RunSection, d.get("run") or {}, f"{where}: run"),
                      plan_file=str((base / plan_file).resolve()) if plan_file else None, source=where)
