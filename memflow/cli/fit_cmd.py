"""``memflow fit MODEL.py --gpus N --max batch|depth|seq|experts``: how far plain training and MemFlow go."""
from __future__ import annotations

import argparse
import json

from ..errors import ConfigError
from ..fit import fit, model_knob
from ..typed import to_data
from ..units import format_time
from .outputs import checked_output
from .plan_cmd import request_from_args
from .progress import reporter

__all__ = ["main"]


def main(a: argparse.Namespace) -> int:
    req = request_from_args(a)
    knob = model_knob(a.model, a.max)
    upto = a.upto if a.upto is not None else (65536 if a.max == "batch" else 4096)
    if upto < knob.minimum:
        raise ConfigError(f"--upto {upto} is below the smallest {a.max} the model allows ({knob.minimum})")
    out = checked_output(a.output, "-o") if a.output else None
    r = fit(req, knob, upto=upto, progress=reporter(a.quiet or a.json))
    if out is not None and r.plan is not None:
        r.plan.save(out)
    if a.json:
        print(json.dumps({"knob": r.knob, "plain_max": r.plain_max, "plan_max": r.plan_max, "limit_hit": r.limit_hit,
                          "per_sample_overhead": r.per_sample_overhead,
                          "plan_memory_check": r.plan_memory_check,
                          "plan": to_data(r.plan) if r.plan is not None else None}))
        return 0
    what = "batch per pass" if a.max == "batch" and (r.plan is None or r.plan.strategy.microbatches == 1) else a.max
    print(f"{r.plan.model_name if r.plan else a.model}: the largest {what} that trains")
    print(f"  plain data parallel: {r.plain_max if r.plain_max is not None else 'none'}")
    print(f"  MemFlow:             {r.plan_max if r.plan_max is not None else 'none'}"
          + (f" (the bound, --upto {r.upto}: it may go further)" if r.limit_hit else ""))
    if r.plain_max and r.plan_max:
        print(f"  gain {r.plan_max / r.plain_max:.2f}×; per-sample time {r.per_sample_overhead:+.1%} against plain at "
              f"its own largest")
    if r.plan is not None:
        st = r.plan.strategy
        print(f"  plan at {r.plan_max}: {st.summary()}; predicted step {format_time(r.plan.predicted.step_time_s)}")
        if out is not None:
            print(f"  plan written to {out}")
    return 0
