"""``memflow plan MODEL.py --gpus N``: the fastest strategy that fits, as a plan file."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import InfeasibleError
from ..planner import plan_request
from ..request import PlanRequest
from ..summary import infeasible_message, summary
from ..typed import to_data
from .outputs import checked_output, free_name
from .progress import reporter

__all__ = ["main", "request_from_args"]


def request_from_args(a: argparse.Namespace) -> PlanRequest:
    """The plan request the flags of ``memflow plan`` describe (validated, errors named as flags)."""
    return PlanRequest(a.model, batch_size=a.batch_size, cluster=a.cluster, gpus=a.gpus, gpu_type=a.gpu_type,
                       gpu_memory=a.gpu_memory, dtype=a.dtype, granularity=a.granularity, seed=a.seed,
                       time_budget_s=a.time_budget, iterations=a.iterations, headroom=a.headroom, measure=a.measure,
                       cache=not a.no_cache, dp=a.dp, pp=a.pp, microbatches=a.microbatches,
                       max_microbatches=a.max_microbatches, sharding=a.sharding, offload=a.offload,
                       tp=a.tp, cli=True)


def main(a: argparse.Namespace) -> int:
    req = request_from_args(a)
    if a.output:
        out = checked_output(a.output, "-o")
        replaces = out.exists()
    else:  # the current directory, never replacing a plan that is there
        default = Path(Path(a.model).stem + ".plan.yaml")
        out = checked_output(default if a.force else free_name(default), "-o")
        replaces = out.exists()
    p = plan_request(req, progress=reporter(quiet=a.quiet or a.json))
    p.save(out)
    if a.json:
        print(json.dumps({**to_data(p), "plan_file": str(out)}))
    else:
        print(summary(p))
        print(f"plan written to {out}" + (" (replacing the file that was there)" if replaces else ""))
    if not p.fits:
        raise InfeasibleError(infeasible_message(p))
    return 0
