"""``memflow plan MODEL.py --gpus N``: the fastest strategy that fits, as a plan file."""
from __future__ import annotations

import json
import math
from pathlib import Path

from ..errors import ConfigError, InfeasibleError
from ..units import format_bytes, format_time, parse_bytes
from .main import ArgParser

__all__ = ["main", "summary"]


def build_parser() -> ArgParser:
    p = ArgParser(prog="memflow plan", description=__doc__)
    p.add_argument("model", help="model file defining build_model() and example_batch(batch_size)")
    p.add_argument("--gpus", type=int, default=None, help="number of devices (default: the cluster's, or 1)")
    p.add_argument("--gpu-type", default=None,
                   help="device spec name from configs/devices (default v100-16gb); cpu = local processes here")
    p.add_argument("--gpu-memory", default=None, help="override device memory, e.g. 16GiB, 12GB, 512MiB")
    p.add_argument("--cluster", default=None, help="cluster preset name or YAML file (configs/clusters)")
    p.add_argument("--batch-size", type=int, default=None, help="global batch per step (default: BATCH_SIZE)")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"], help="training precision")
    p.add_argument("--granularity", default="auto", help="node cut: 'auto' or a module depth")
    p.add_argument("--time-budget", type=float, default=None, help="search budget in seconds")
    p.add_argument("--iterations", type=int, default=None, help="search budget in MCMC iterations")
    p.add_argument("--measure", action="store_true",
                   help="time every node on this host's GPU (CUDA) instead of predicting from FLOPs and bytes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--headroom", type=float, default=0.1,
                   help="fraction of device memory the plan leaves free (default 0.1)")
    p.add_argument("-o", "--output", default=None, help="plan file to write (default MODEL.plan.yaml)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the summary")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def _check_args(a) -> None:
    if a.gpus is not None and a.gpus < 1:
        raise ConfigError(f"--gpus must be >= 1, got {a.gpus}")
    if a.batch_size is not None and a.batch_size < 1:
        raise ConfigError(f"--batch-size must be >= 1, got {a.batch_size}")
    if a.time_budget is not None and not (a.time_budget > 0 and math.isfinite(a.time_budget)):
        raise ConfigError(f"--time-budget must be a positive number of seconds, got {a.time_budget}")
    if a.iterations is not None and a.iterations < 1:
        raise ConfigError(f"--iterations must be >= 1, got {a.iterations}")
    if a.gpu_memory is not None:
        parse_bytes(a.gpu_memory, name="--gpu-memory", allow_zero=False)
    if not 0.0 <= a.headroom < 1.0:
        raise ConfigError(f"--headroom must be a fraction in [0, 1), got {a.headroom}")
    if a.gpu_type is not None and a.cluster is not None:
        raise ConfigError("give --gpu-type or --cluster, not both")
    if a.granularity != "auto":
        try:
            if int(a.granularity) < 1:
                raise ValueError
        except ValueError:
            raise ConfigError(f"--granularity must be 'auto' or a positive integer, got {a.granularity!r}") from None


def summary(plan) -> str:
    """A person-readable summary of a plan."""
    st, pr = plan.strategy, plan.predicted
    lines = []
    cl = plan.cluster
    dev = cl["device"]["name"] if isinstance(cl.get("device"), dict) else cl.get("device")
    n_dev = cl["num_nodes"] * cl["devices_per_node"]
    lines.append(f"{plan.model_name}: batch {plan.batch_size} on {n_dev} × {dev} ({cl.get('name', '')})")
    verdict = "fits" if plan.fits else "DOES NOT FIT"
    lines.append(f"plan: dp {st.dp} × pp {st.pp}, {st.microbatches} micro-batch(es) of "
                 f"{plan.micro_batch_size}, {st.schedule} — {verdict}")
    caps = pr.get("capacity_bytes", [])
    peaks = pr.get("peak_bytes", [])
    for s in range(st.pp):
        nodes = st.stage_nodes(s)
        names = plan.node_names
        first, last = names[nodes[0]], names[nodes[-1]]
        rng = first if first == last else f"{first} .. {last}"
        devs = [st.device_of(s, d) for d in range(st.dp)]
        peak = max(peaks[d] for d in devs) if peaks else 0
        cap = caps[devs[0]] if caps else 0
        n_re = sum(1 for k in nodes if st.actions[k] == "recompute")
        n_sw = sum(1 for k in nodes if st.actions[k] == "swap")
        extra = []
        if st.shard_state[s]:
            extra.append("optimizer state sharded")
        if st.optimizer_on_host[s]:
            extra.append("optimizer on host")
        lines.append(f"  stage {s} (devices {devs[0]}-{devs[-1]}): {len(nodes)} nodes [{rng}], "
                     f"peak {format_bytes(peak)} / {format_bytes(cap)} usable, {n_re} recompute, {n_sw} swap"
                     + (f", {', '.join(extra)}" if extra else ""))
    t = pr.get("step_time_s", float("nan"))
    lines.append(f"predicted step {format_time(t)}, {plan.batch_size / t:.1f} samples/s; binding: {pr.get('binding', '')}")
    if plan.baselines:
        lines.append("baselines:")
        cap = max(caps) if caps else 0
        for name, b in plan.baselines.items():
            mp = max(b["peak_bytes"]) if b["peak_bytes"] else 0
            if b["fits"]:
                ratio = b["step_time_s"] / t if t > 0 else float("nan")
                lines.append(f"  {name:<26} {format_time(b['step_time_s']):>10}  peak {format_bytes(mp):>10}  "
                             f"({ratio:.2f}× the plan's time)")
            else:
                lines.append(f"  {name:<26} {'OOM':>10}  peak {format_bytes(mp):>10}  "
                             f"(over by {format_bytes(max(0, mp - cap))})")
    return "\n".join(lines)


def infeasible_message(plan) -> str:
    peaks = plan.predicted.get("peak_bytes", [])
    caps = plan.predicted.get("capacity_bytes", [])
    worst = max(range(len(peaks)), key=lambda d: peaks[d] - caps[d]) if peaks else 0
    need = peaks[worst] if peaks else 0
    stage = plan.strategy.stage_of_device(worst)
    names = plan.node_names
    nodes = plan.strategy.stage_nodes(stage)
    n_dev = len(peaks)
    head = float(plan.settings.get("headroom", 0.0) or 0.0)
    total = need / (1.0 - head)  # device memory at which this strategy fits with the headroom kept free
    proved = " (every strategy checked: none fits)" if plan.settings.get("no_fit_proved") else ""
    return (f"no plan fits {format_bytes(caps[worst] if caps else 0)} usable per device{proved}: the smallest found "
            f"needs {format_bytes(need)} on device {worst} (stage {stage}: {names[nodes[0]]} ..); "
            f"try --gpu-memory {_round_up(total)} or --gpus {2 * n_dev}")


def _round_up(nbytes: float) -> str:
    """A --gpu-memory value at or above ``nbytes`` (GiB, or MiB below 1 GiB)."""
    if nbytes >= 2**30:
        return f"{math.ceil(nbytes / 2**30 * 1.02)}GiB"
    return f"{math.ceil(nbytes / 2**20 * 1.02)}MiB"


def main(argv: list[str]) -> int:
    from ..planner import plan as make_plan

    a = build_parser().parse_args(argv)
    _check_args(a)
    p = make_plan(a.model, cluster=a.cluster, gpus=a.gpus, gpu_type=a.gpu_type, gpu_memory=a.gpu_memory,
                  batch_size=a.batch_size, dtype=a.dtype, granularity=a.granularity, seed=a.seed,
                  time_budget_s=a.time_budget, iterations=a.iterations, progress=not a.quiet,
                  headroom=a.headroom, measure=a.measure)
    out = Path(a.output) if a.output else Path(a.model).with_suffix(".plan.yaml")
    p.save(out)
    if a.json:
        st = p.strategy
        obj = {
            "fits": p.fits,
            "step_time_s": p.predicted["step_time_s"],
            "peak_memory_bytes": p.predicted["peak_bytes"],
            "memory_capacity_bytes": p.predicted["capacity_bytes"],
            "strategy": {
                "dp": st.dp, "pp": st.pp, "microbatches": st.microbatches, "schedule": st.schedule,
                "stages": [[p.node_names[k] for k in st.stage_nodes(s)] for s in range(st.pp)],
                "memory_actions": dict(zip(p.node_names, st.actions)),
                "shard_state": st.shard_state, "optimizer_on_host": st.optimizer_on_host,
            },
            "baselines": {name: {"fits": b["fits"], "step_time_s": b["step_time_s"],
                                 "peak_memory_bytes": b["peak_bytes"]} for name, b in p.baselines.items()},
            "pareto": p.pareto,
            "plan_file": str(out),
        }
        print(json.dumps(obj))
    else:
        print(summary(p))
        print(f"plan written to {out}")
    if not p.fits:
        raise InfeasibleError(infeasible_message(p))
    return 0
