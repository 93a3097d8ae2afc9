"""``memflow run PLAN.yaml | EXPERIMENT.yaml``: train with a plan and report measured vs predicted."""
from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

from ..config import is_experiment, load_experiment
from ..errors import ConfigError
from ..planfile import Plan, load_plan
from .main import ArgParser

__all__ = ["main"]


def build_parser() -> ArgParser:
    p = ArgParser(prog="memflow run", description=__doc__)
    p.add_argument("file", help="a plan file (memflow plan -o) or an experiment file (configs/experiments)")
    p.add_argument("--steps", type=int, default=None, help="training steps (default 5, or the experiment's)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--checkpoint-dir", default=None)
    p.add_argument("--checkpoint-every", type=int, default=0, help="save a checkpoint every K steps")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--rdzv-endpoint", default=None, help="HOST:PORT of the rendezvous (several nodes)")
    p.add_argument("--force", action="store_true", help="launch even if the plan predicts it does not fit")
    p.add_argument("--quiet", action="store_true")
    return p


def _plan_from_experiment(path: Path, quiet: bool) -> tuple[Plan, int, dict]:
    from ..planner import plan as make_plan

    exp = load_experiment(path)
    os.environ.update(exp.env)
    if exp.plan_file:
        return load_plan(exp.plan_file), exp.run.steps, vars(exp.run)
    c, s = exp.cluster, exp.search
    p = make_plan(exp.model, cluster=c.preset, gpus=c.gpus, gpu_type=c.gpu_type, gpu_memory=c.gpu_memory,
                  batch_size=exp.batch_size, dtype=s.dtype, granularity=s.granularity, seed=s.seed,
                  time_budget_s=s.time_budget_s, iterations=s.iterations, progress=not quiet)
    out = Path(path.stem + ".plan.yaml")
    p.save(out)
    if not quiet:
        print(f"memflow: plan written to {out}", flush=True)
    return p, exp.run.steps, vars(exp.run)


def main(argv: list[str]) -> int:
    from ..executor.report import format_report
    from ..runner import run_plan_file

    a = build_parser().parse_args(argv)
    if a.steps is not None and a.steps < 1:
        raise ConfigError(f"--steps must be >= 1, got {a.steps}")
    if a.nnodes < 1 or not 0 <= a.node_rank < a.nnodes:
        raise ConfigError(f"--node-rank must be in 0..{a.nnodes - 1} with --nnodes {a.nnodes}")
    path = Path(a.file)
    if not path.exists():
        raise ConfigError(f"{path}: file not found")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        raise ConfigError(f"{path}: not valid YAML") from None
    run_settings: dict = {}
    if is_experiment(data):
        plan, steps, run_settings = _plan_from_experiment(path, a.quiet)
    else:
        plan, steps = load_plan(path), 5
    steps = a.steps or steps
    ckpt_dir = a.checkpoint_dir or run_settings.get("checkpoint_dir")
    ckpt_every = a.checkpoint_every or run_settings.get("checkpoint_every", 0)
    result = run_plan_file(plan, steps=steps, force=a.force, checkpoint_dir=ckpt_dir, checkpoint_every=ckpt_every,
                           resume=a.resume, nnodes=a.nnodes, node_rank=a.node_rank, rdzv_endpoint=a.rdzv_endpoint)
    if a.json:
        print(json.dumps(result))
    else:
        print(format_report(result))
    return 0
