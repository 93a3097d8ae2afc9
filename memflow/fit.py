"""The capacity questions: the largest batch per pass, depth, sequence length or expert count that trains.

``memflow fit MODEL.py --gpus N --max batch|depth|seq|experts`` answers it twice: with plain data
parallelism (every activation kept, one micro-batch: the ``dp/m1`` baseline) and with MemFlow's plan.
Each probe is a plan at one value of the knob (one plan answers both: the baseline is simulated
beside it); the largest value that fits is found by doubling, then bisection, assuming that more of
the knob never needs less memory.

The knob ``batch`` is the global batch per step, planned in one forward/backward pass per step
(``max_microbatches=1``) unless the request says otherwise: the papers count the batch of one
pass. The other knobs come from the model file: ``KNOBS = {"depth": "MY_DEPTH_VAR", ...}`` names the
environment variable the file reads for each, optionally as ``{"env": ..., "min": ..., "step": ...}``
where only some values are valid (a ResNet depth: even, at least 10). The plan at the answer records
that variable, so ``memflow run`` rebuilds the model at that size.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Callable

from .errors import ConfigError, MemflowError
from .gpumem import CONTEXT_BYTES
from .model_file import load_model_file
from .planfile import Plan
from .planner import plan_request
from .progress import SILENT, Progress
from .request import PlanRequest
from .reserved import plan_reserved
from .strategy import Strategy

__all__ = ["Knob", "FitResult", "fit", "find_max", "model_knob", "plain_fits", "KNOB_NAMES"]

KNOB_NAMES = ("batch", "depth", "seq", "experts")


@dataclass(frozen=True)
class Knob:
    """What is grown: ``batch`` (the request's batch) or an environment variable the model file reads."""

    name: str
    env: str = ""  # '' for the batch
    minimum: int = 1
    step: int = 1

    def value(self, i: int) -> int:
        """The i-th valid value (i ≥ 0)."""
        return self.minimum + i * self.step


@dataclass
class FitResult:
    knob: str
    plain_max: int | None  # None: plain data parallel fits no value tried
    plan_max: int | None
    limit_hit: bool  # the plan fits at the search's own bound: the true limit may be higher
    per_sample_overhead: float | None  # the plan at plan_max against plain at plain_max, per sample (fraction)
    upto: int  # the bound
    probes: dict[int, tuple[bool, bool]] = field(default_factory=dict)  # value -> (plain fits, plan fits)
    plan: Plan | None = None  # MemFlow's plan at plan_max
    # how the plan at plan_max was judged, as plain is on the same devices: "reserved" (one GPU: the
    # allocator's reserved peak of a fake run of its step and the CUDA context within the device,
    # memflow.reserved) or "live" (its live tensor bytes within the device less the headroom: several
    # devices, which memflow.reserved does not cover, or a CPU)
    plan_memory_check: str = "live"


def model_knob(model_file: str, name: str) -> Knob:
    """The knob ``name`` as the model file declares it in ``KNOBS`` (``batch`` needs no declaration)."""
    if name not in KNOB_NAMES:
        raise ConfigError(f"--max must be one of {list(KNOB_NAMES)}, got {name!r}")
    if name == "batch":
        return Knob("batch")
    spec = load_model_file(model_file)
    knobs = spec.knobs
    if name not in knobs:
        raise ConfigError(f"{model_file}: declares no {name!r} knob; a model file names the environment variable "
                          f"it reads for it in KNOBS, e.g. KNOBS = {{{name!r}: 'MY_{name.upper()}'}}"
                          + (f" (it declares {sorted(knobs)})" if knobs else ""))
    k = knobs[name]
    if isinstance(k, str):
        return Knob(name, env=k)
    return Knob(name, env=k["env"], minimum=int(k.get("min", 1)), step=int(k.get("step", 1)))


def find_max(fits: Callable[[int], bool], upto: int) -> tuple[int | None, bool]:
    """``(largest i in [0, upto] with fits(i), whether fits(upto))`` for a monotone ``fits`` (true up to
    some point, false after it): i + 1 doubled from 1 (the values 1, 2, 4, 8, ... of a knob that starts
    at 1), then bisection. None if fits(0) is false."""
    if not fits(0):
        return None, False
    lo, hi = 0, 1  # fits(lo); hi: next to try
    while hi <= upto and fits(hi):
        lo, hi = hi, 2 * hi + 1
    if hi > upto:
        if lo == upto:
            return upto, True
        if fits(upto):
            return upto, True
        hi = upto
    while hi - lo > 1:  # fits(lo), not fits(hi)
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo, False


def fit(req: PlanRequest, knob: Knob, *, upto: int, progress: Progress = SILENT) -> FitResult:
    """The largest value of ``knob`` (at most ``upto``) at which plain data parallelism fits, and at
    which MemFlow's plan fits, with ``req``'s devices and settings."""
    if knob.name == "batch" and req.microbatches is None and req.max_microbatches is None:
        req = dataclasses.replace(req, max_microbatches=1)
    n_max = max(0, (upto - knob.minimum) // knob.step)
    plans: dict[int, Plan | None] = {}
    plain: dict[int, bool] = {}

    def probe(i: int) -> Plan | None:
        if i not in plans:
            v = knob.value(i)
            saved = os.environ.get(knob.env) if knob.env else None
            try:
                if knob.env:
                    os.environ[knob.env] = str(v)
                    r = req
                else:
                    r = dataclasses.replace(req, batch_size=v)
                progress.note(f"{knob.name} {v}: planning")
                plans[i] = plan_request(r, progress=progress)
                plain[i] = plain_fits(plans[i])
            except MemflowError as e:  # e.g. a batch the devices cannot split: does not fit
                progress.note(f"{knob.name} {v}: {e}")
                plans[i] = None
                plain[i] = False
            finally:
                if knob.env:
                    if saved is None:
                        os.environ.pop(knob.env, None)
                    else:
                        os.environ[knob.env] = saved
            p = plans[i]
            progress.note(f"{knob.name} {v}: plain data parallel {'fits' if plain[i] else 'does not fit'}, "
                          f"MemFlow's plan {'fits' if p is not None and p.fits else 'does not fit'}")
        return plans[i]

    i_plan, hit = find_max(lambda i: (p := probe(i)) is not None and p.fits, n_max)
    i_plain, _ = find_max(lambda i: probe(i) is not None and plain[i], n_max if i_plan is None else i_plan)
    plain_p = plans.get(i_plain) if i_plain is not None else None
    plan_p = plans.get(i_plan) if i_plan is not None else None
    check = "reserved" if plan_p is not None and plan_p.predicted.reserved_bytes else "live"
    overhead = None
    if plain_p is not None and plan_p is not None:  # seconds per sample, each at its own largest value
        per_plain = plain_p.baselines["dp/m1"].step_time_s / plain_p.batch_size
        per_plan = plan_p.predicted.step_time_s / plan_p.batch_size
        overhead = per_plan / per_plain - 1.0
    return FitResult(
        knob=knob.name, plain_max=knob.value(i_plain) if i_plain is not None else None,
        plan_max=knob.value(i_plan) if i_plan is not None else None, limit_hit=hit, per_sample_overhead=overhead,
        upto=knob.value(n_max), plan=plan_p, plan_memory_check=check,
        probes={knob.value(i): (plain[i], p is not None and p.fits) for i, p in sorted(plans.items())})


def plain_fits(p: Plan | None) -> bool:
    """Plain data parallelism (the ``dp/m1`` baseline) fits beside ``p``; on one GPU judged as the plan is
    (:func:`memflow.planner.predict_reserved`): its live peak, and the caching allocator's reserved peak
    of its step with the CUDA context (:mod:`memflow.reserved`). Call it where the knob's value is set."""
    b = p.baselines.get("dp/m1") if p is not None else None
    if not (b and b.fits):
        return False
    cl = p.get_cluster()
    if cl.device.kind != "gpu" or cl.num_devices != 1 or not p.model_file or cl.device.memory_bytes <= CONTEXT_BYTES:
        return True  # (a device too small for a CUDA context: tensor memory alone, as the plan is judged)
    st = Strategy.single(len(p.node_names))
    if p.predicted.reserved_bytes and p.strategy.digest() == st.digest():
        r = p.predicted.reserved_bytes[0]
    else:
        r = plan_reserved(load_model_file(p.model_file), st, p.batch_size, device_name=cl.device.name,
                          dtype=p.settings.dtype, granularity=p.settings.granularity)
    return r + CONTEXT_BYTES <= cl.device.memory_bytes
