"""Tensor parallelism in the plan (issue 24): GPT-2 large and Llama-7B (bf16 autocast) planned on
``a100-8-nvlink`` (8 × A100-80GB, NVLink) and ``h100-2x8-ib`` (2 × 8 × H100-80GB, IB between),
with the whole memory and with a tight one; predicted (fake tensors, roofline times). Per case: the
plan (tp 1, 2 and a whole machine searched), its step, the fastest fitting baseline, the fastest
fitting Megatron-style baseline (tp = a machine's devices × pp with 1F1B, kept or recomputed; tp × FSDP
with several machines), and the planning time. Every baseline is listed below the table.

``python -m bench tp`` (``quick``: the first case).
"""
from __future__ import annotations

import time
from pathlib import Path

import memflow

from .common import md_table, write_section

ROOT = Path(__file__).resolve().parents[1]
# (model file, cluster, batch, gpu memory or None: the device's)
CASES = [
    ("gpt2_large", "a100-8-nvlink", 16, None),
    ("gpt2_large", "a100-8-nvlink", 16, "12GiB"),
    ("llama7b", "a100-8-nvlink", 8, None),
    ("llama7b", "a100-8-nvlink", 8, "32GiB"),
    # 32 GiB stopped being tight once ZeRO-3 gathered in bf16 (FSDP alone fits): a tighter one
    ("llama7b", "a100-8-nvlink", 8, "20GiB"),
    ("llama7b", "h100-2x8-ib", 16, None),
    # more devices than the batch has samples: data parallelism alone cannot use them
    ("gpt2_medium", "64×a100-80gb", 8, None),
]


def _case(model: str, cluster: str, batch: int, mem: str | None) -> tuple[list, list[list]]:
    t0 = time.perf_counter()
    where = dict(gpus=int(cluster.split("×")[0]), gpu_type=cluster.split("×")[1]) if "×" in cluster \
        else dict(cluster=cluster)
    p = memflow.plan(str(ROOT / "examples" / f"{model}.py"), gpu_memory=mem, batch_size=batch, dtype="bf16", **where)
    secs = time.perf_counter() - t0
    pred = p.predicted
    fit = {k: b for k, b in p.baselines.items() if b.fits}
    best = min(fit, key=lambda k: fit[k].step_time_s) if fit else None
    meg = {k: b for k, b in fit.items() if k.startswith(("megatron", "tp+"))}
    mbest = min(meg, key=lambda k: meg[k].step_time_s) if meg else None
    where = f"{cluster}" + (f", {mem}" if mem else "")
    row = [model, where, batch, p.strategy.summary() if pred.fits else "nothing fits", f"{pred.step_time_s:.3f}",
           f"{max(pred.peak_bytes) / 2**30:.1f} / {min(pred.capacity_bytes) / 2**30:.1f}",
           f"{best}: {fit[best].step_time_s:.3f} s" if best else "none fits",
           f"{fit[best].step_time_s / pred.step_time_s:.2f}×" if best and pred.fits else "—",
           f"{mbest}: {meg[mbest].step_time_s:.3f} s" if mbest else
           ("none fits" if any(k.startswith(("megatron", "tp+")) for k in p.baselines) else
            "none (a machine of more than 8)"),
           f"{meg[mbest].step_time_s / pred.step_time_s:.2f}×" if mbest and pred.fits else "—", f"{secs:.0f}"]
    bases = [[model, where, k, "yes" if b.fits else "no", f"{b.step_time_s:.3f}", f"{max(b.peak_bytes) / 2**30:.1f}"]
             for k, b in sorted(p.baselines.items(), key=lambda kv: (not kv[1].fits, kv[1].step_time_s))]
    return row, bases


def main(quick: bool = False, only: list | None = None) -> None:
    rows, bases = [], []
    for case in only or (CASES[:1] if quick else CASES):
        r, b = _case(*case)
        rows.append(r)
        bases += b
        print(" | ".join(str(x) for x in r), flush=True)
    body = ("Predicted with fake tensors and roofline times (not measured); bf16 autocast with fp32 master "
            "weights; default search budget, seed 0, 10% headroom. 'tight': the devices' memory set lower "
            "(`--gpu-memory`). Tensor parallelism splits what the graph rules find (memflow/graph/tp_rules.py): "
            "the attention and MLP pairs where the heads divide by tp (GPT-2 large's 20 heads do not by 8: "
            "at tp 8 only its MLPs split), and Llama's untied vocabulary (its lookup, output layer and loss). "
            "'speed-up': the fastest fitting baseline's step over the plan's.\n\n" +
            md_table(["model", "cluster", "batch", "plan", "step s", "peak / usable GiB", "fastest fitting baseline",
                      "speed-up", "fastest fitting Megatron-style", "vs Megatron", "plan s"], rows) +
            "\n\nEvery baseline (fitting first, fastest first; peaks in GiB):\n\n" +
            md_table(["model", "cluster", "baseline", "fits", "step s", "peak GiB"], bases))
    write_section("tp", "Tensor parallelism: plans against Megatron-style baselines", body)
