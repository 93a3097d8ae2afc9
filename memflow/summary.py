"""A plan in words: a table per stage, every node that does not keep its activations, the baselines.

Used by ``memflow plan`` (after the search), ``memflow run`` (before it
launches anything) and the HTML report.
"""
from __future__ import annotations

import math

from .gpumem import CONTEXT_BYTES, FRAGMENTATION, device_bytes, fragmented_device_bytes
from .kinds import KEEP, SHARD_NONE, SHARD_PARAMETERS
from .planfile import Plan
from .units import format_bytes, format_time

#: what the plan table says of a stage's sharding level
SHARD_LABELS = {"optimizer": "optimizer state sharded (ZeRO-1)", "gradients": "optimizer state and gradients sharded (ZeRO-2)",
                "parameters": "parameters, gradients and optimizer state sharded (ZeRO-3/FSDP)"}

__all__ = ["summary", "stage_table", "action_lines", "infeasible_message"]


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join((c.rjust(w) if i in right else c.ljust(w)) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
            for r in rows]


def stage_table(plan: Plan) -> list[str]:
    """One row per pipeline stage: its devices, its nodes, its peak against the usable memory, its options."""
    st, pr, names = plan.strategy, plan.predicted, plan.node_names
    rows = [["stage", "devices", "nodes", "peak / usable", "", "options"]]
    for s in range(st.pp):
        nodes = st.stage_nodes(s)
        first, last = names[nodes[0]], names[nodes[-1]]
        span = first if first == last else f"{first} .. {last}"
        devs = [st.rank_of(s, d, t) for d in range(st.dp) for t in range(st.tp)]
        peak = max(pr.peak_bytes[d] for d in devs)
        cap = pr.capacity_bytes[devs[0]]
        opts = []
        lvl = st.sharded(s)
        if lvl != SHARD_NONE and st.dp > 1:
            opts.append(SHARD_LABELS[lvl])
        if lvl == SHARD_PARAMETERS and plan.settings.dtype == "bf16" and (st.dp > 1 or st.params_host(s)):
            opts.append("the weights autocast casts gathered in bf16")  # (memflow.graph.casts)
        if st.tp > 1:
            split = sum(1 for k in nodes if st.partitioning and st.partitioning[k] != "replicated")
            opts.append(f"tensor parallel over {st.tp} ({split}/{len(nodes)} nodes split)")
        if st.params_host(s) and st.dp == 1:
            opts.append("parameters streamed in from the host per node, gradients out, optimizer on host")
        elif st.params_host(s):
            opts.append("parameters + optimizer on host")
        elif st.optimizer_on_host[s]:
            opts.append("optimizer on host")
        dev = str(devs[0]) if len(devs) == 1 else f"{devs[0]}-{devs[-1]}"
        rows.append([str(s), dev, f"{len(nodes)}: {span}", f"{format_bytes(peak)} / {format_bytes(cap)}",
                     f"{100 * peak / cap:.0f}%" if cap else "", ", ".join(opts) or "-"])
    return _table(rows, right={3, 4})


def action_lines(plan: Plan) -> list[str]:
    """Every node that does not keep its activations, by action, with its stage."""
    st, names = plan.strategy, plan.node_names
    by: dict[str, list[str]] = {}
    for k, a in enumerate(st.actions):
        if a != KEEP:
            by.setdefault(a, []).append(f"{names[k]} (stage {st.stage_of[k]})")
    if not by:
        return ["memory actions: none (every node keeps its activations for its backward)"]
    return [f"{a} ({len(v)}): " + ", ".join(v) for a, v in sorted(by.items())]


def gpu_memory_line(live_peak: int, memory: int, reserved: int | None = None) -> str:
    """What the fullest GPU holds beside the planned live bytes (:mod:`memflow.gpumem`): the caching
    allocator's reserved peak (cuBLAS workspaces, 20 MiB pages, expandable segments) and the CUDA context;
    and, where the allocator's holes as large as the worst measured would not fit, a warning. With
    ``reserved`` (a fake run of the step through the allocator model, :mod:`memflow.reserved`) that peak,
    its holes included."""
    if reserved:
        need = reserved + CONTEXT_BYTES
        line = (f"on the GPU: {format_bytes(need)} of {format_bytes(memory)} (the caching allocator's reserved "
                f"peak, its holes included, from a fake run of the step; and the CUDA context)")
        if need > memory:
            line += f"; OVER the device by {format_bytes(need - memory)} " + (
                "(a device this small cannot hold a CUDA context: planned for its tensor memory alone)"
                if memory <= CONTEXT_BYTES else
                "(planned again with less memory as far as that helps: the context and workspaces stay)")
        return line
    need, holed = device_bytes(live_peak), fragmented_device_bytes(live_peak)
    line = (f"on the GPU: {format_bytes(need)} of {format_bytes(memory)} on the fullest device (live peak, cuBLAS "
            f"workspaces and pages as the allocator reserves them, and the CUDA context)")
    if need > memory:
        line += (f"; OVER the device by {format_bytes(need - memory)}: raise --headroom or lower --gpu-memory "
                 "to plan with less")
    elif holed > memory:
        line += (f"; with the allocator's holes as large as measured ({100 * FRAGMENTATION:.1f}% of the live peak, "
                 f"docs/design.md) it would need {format_bytes(holed)}: on a real "
                 "GPU raise --headroom")
    return line


def summary(plan: Plan) -> str:
    """A person-readable summary of a plan."""
    st, pr = plan.strategy, plan.predicted
    cl = plan.get_cluster()
    lines = [f"{plan.model_name}: batch {plan.batch_size} on {cl.num_devices} × {cl.device.name} ({cl.name})",
             f"plan: dp {st.dp} × pp {st.pp}" + (f" × tp {st.tp}" if st.tp > 1 else "") + f", {st.microbatches} micro-batch(es) of {plan.micro_batch_size}, "
             f"{st.schedule} — {'fits' if plan.fits else 'DOES NOT FIT'}"]
    lines += ["  " + x for x in stage_table(plan)]
    lines += ["  " + x for x in action_lines(plan)]
    if cl.device.kind == "gpu" and pr.peak_bytes:
        lines.append(gpu_memory_line(max(pr.peak_bytes), cl.device.memory_bytes,
                                     max(pr.reserved_bytes) if pr.reserved_bytes else None))
    t = pr.step_time_s
    rate = f", {plan.batch_size / t:,.1f} samples/s" if t > 0 else ""
    lines.append(f"predicted step {format_time(t)}{rate}; binding: {pr.binding}")
    if plan.baselines:
        lines.append("baselines:")
        cap = max(pr.capacity_bytes) if pr.capacity_bytes else 0
        for name, b in plan.baselines.items():
            mp = b.max_peak_bytes
            if b.fits:
                ratio = b.step_time_s / t if t > 0 else float("nan")
                lines.append(f"  {name:<26} {format_time(b.step_time_s):>10}  peak {format_bytes(mp):>10}  "
                             f"({ratio:.2f}× the plan's time)")
            else:
                lines.append(f"  {name:<26} {'OOM':>10}  peak {format_bytes(mp):>10}  "
                             f"(over by {format_bytes(max(0, mp - cap))})")
    return "\n".join(lines)


def infeasible_message(plan: Plan) -> str:
    """Why nothing fits, and what would: the memory per device or the device count."""
    pr = plan.predicted
    if pr.reserved_bytes and max(pr.reserved_bytes) + CONTEXT_BYTES > plan.get_cluster().device.memory_bytes:
        need = max(pr.reserved_bytes) + CONTEXT_BYTES
        return (f"no plan fits the device: the smallest found needs {format_bytes(need)} on the GPU (the caching "
                f"allocator's reserved peak and the CUDA context); try --gpu-memory {_round_up(need)} or --gpus 2")
    worst = pr.worst_device()
    need = pr.peak_bytes[worst]
    stage = plan.strategy.stage_of_device(worst)
    nodes = plan.strategy.stage_nodes(stage)
    total = need / (1.0 - plan.settings.headroom)  # device memory at which this strategy fits with the headroom kept
    proved = " (every strategy checked: none fits)" if plan.settings.no_fit_proved else ""
    return (f"no plan fits {format_bytes(pr.capacity_bytes[worst])} usable per device{proved}: the smallest found "
            f"needs {format_bytes(need)} on device {worst} (stage {stage}: {plan.node_names[nodes[0]]} ..); "
            f"try --gpu-memory {_round_up(total)} or --gpus {2 * len(pr.peak_bytes)}")


def _round_up(nbytes: float) -> str:
    """A --gpu-memory value at or above ``nbytes`` (GiB, or MiB below 1 GiB)."""
    if nbytes >= 2**30:
        return f"{math.ceil(nbytes / 2**30 * 1.02)}GiB"
    return f"{math.ceil(nbytes / 2**20 * 1.02)}MiB"
