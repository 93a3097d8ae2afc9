"""``memflow run PLAN.yaml | EXPERIMENT.yaml``: train with a plan and report measured vs predicted."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..config import is_experiment, load_experiment
from ..errors import ConfigError
from ..executor import format_report
from ..fileio import read_yaml
from ..planfile import Plan, load_plan
from ..planner import plan_request
from ..runner import run
from ..summary import summary
from ..typed import to_data
from .outputs import free_name
from .progress import reporter

__all__ = ["main"]


def _plan_from_experiment(path: Path, quiet: bool) -> tuple[Plan, int, dict]:
    exp = load_experiment(path)
    os.environ.update(exp.env)
    if exp.plan_file:
        return load_plan(exp.plan_file), exp.run.steps, vars(exp.run)
    p = plan_request(exp.request, progress=reporter(quiet))
    out = free_name(Path(path.stem + ".plan.yaml"))
    p.save(out)
    if not quiet:
        print(f"memflow: plan written to {out}", file=sys.stderr, flush=True)
    return p, exp.run.steps, vars(exp.run)


def main(a: argparse.Namespace) -> int:
    if a.steps is not None and a.steps < 1:
        raise ConfigError(f"--steps must be >= 1, got {a.steps}")
    if a.nnodes < 1 or not 0 <= a.node_rank < a.nnodes:
        raise ConfigError(f"--node-rank must be in 0..{a.nnodes - 1} with --nnodes {a.nnodes}")
    if a.checkpoint_every < 0:
        raise ConfigError(f"--checkpoint-every must be >= 0, got {a.checkpoint_every}")
    path = Path(a.file)
    data = read_yaml(path, "plan or experiment file")
    run_settings: dict = {}
    quiet = a.quiet or a.json
    if is_experiment(data):
        plan, steps, run_settings = _plan_from_experiment(path, quiet)
    else:
        plan, steps = Plan.from_dict(data, source=str(path)), 5
    if not a.json:
        print(summary(plan), flush=True)
    steps = a.steps or steps
    ckpt_dir = a.checkpoint_dir or run_settings.get("checkpoint_dir")
    ckpt_every = a.checkpoint_every or run_settings.get("checkpoint_every", 0)
    result = run(plan, steps=steps, force=a.force, on_cpu=a.on_cpu, checkpoint_dir=ckpt_dir,
                 checkpoint_every=ckpt_every, resume=a.resume, nnodes=a.nnodes, node_rank=a.node_rank,
                 rdzv_endpoint=a.rdzv_endpoint, progress=None if quiet else reporter(quiet).note)
    if result is None:
        print(f"node {a.node_rank}: done (rank 0's node reports the run)")
    elif a.json:
        print(json.dumps(to_data(result)))
    else:
        print(format_report(result))
    return 0
