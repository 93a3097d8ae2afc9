"""Llama-7B (``examples/llama7b.py``, bf16 autocast, batch 8 × 2048) planned on the clusters issue 23
names: 8 × V100-16GB, 4 × A100-40GB and 1 × A100-80GB (ZeRO-Offload's single-GPU case). Captured and
costed in fake mode (roofline times, predicted, not measured): per cluster the plan (default budget,
seed 0), its predicted step and peak, and every baseline's, with the fastest fitting one. The
8 × V100 row is compared with the plan the search made before ZeRO-3/FSDP was in its space
(23.1 s: dp 1 × pp 8, 22 swapped and 2 recomputed nodes, the optimizer on the host on 6 stages).

``python -m bench llama7b``.
"""
from __future__ import annotations

import time
from pathlib import Path

import memflow

from .common import md_table, write_section

ROOT = Path(__file__).resolve().parents[1]
LLAMA = str(ROOT / "examples" / "llama7b.py")
CLUSTERS = [(8, "v100-16gb"), (4, "a100-40gb"), (1, "a100-80gb")]
BEFORE_S = {(8, "v100-16gb"): 23.1}  # the figure: the plan before ZeRO-3/FSDP was searched


def _row(n: int, gpu: str) -> tuple[list, list[list]]:
    t0 = time.perf_counter()
    p = memflow.plan(LLAMA, gpus=n, gpu_type=gpu, batch_size=8, dtype="bf16")
    secs = time.perf_counter() - t0
    pred = p.predicted
    fit_base = {k: b for k, b in p.baselines.items() if b.fits}
    best = min(fit_base, key=lambda k: fit_base[k].step_time_s) if fit_base else None
    before = BEFORE_S.get((n, gpu))
    free = p.baselines.get("memory-unaware search")
    row = [f"{n} × {gpu}", p.strategy.summary() if pred.fits else "nothing fits", f"{pred.step_time_s:.2f}",
           f"{max(pred.peak_bytes) / 2**30:.2f} / {min(pred.capacity_bytes) / 2**30:.2f}",
           f"{best}: {fit_base[best].step_time_s:.2f} s" if best else "none fits",
           f"{fit_base[best].step_time_s / pred.step_time_s:.2f}×" if best and pred.fits else "—",
           f"{free.step_time_s:.2f}" if free else "—",
           f"{before / pred.step_time_s:.2f}× ({before} s); at most {before / free.step_time_s:.2f}×"
           if before and pred.fits and free else "—", f"{secs:.0f}"]
    bases = [[f"{n} × {gpu}", k, "yes" if b.fits else "no", f"{b.step_time_s:.2f}", f"{max(b.peak_bytes) / 2**30:.1f}"]
             for k, b in sorted(p.baselines.items(), key=lambda kv: (not kv[1].fits, kv[1].step_time_s))]
    return row, bases


def main(quick: bool = False) -> None:
    rows, bases = [], []
    for n, gpu in CLUSTERS[:1] if quick else CLUSTERS:
        r, b = _row(n, gpu)
        rows.append(r)
        bases += b
    body = ("Llama-7B (`examples/llama7b.py`, bf16 autocast with fp32 master weights, batch 8 × 2048 tokens), "
            "captured and costed with fake tensors (roofline times from the device specs: predicted, not "
            "measured). Default search budget, seed 0. 'peak / usable': the plan's largest device peak "
            "against the memory it may use (GiB). 'vs before': the 8 × V100 plan before ZeRO-3/FSDP was in "
            "the search space (23.1 s, issue 23), and the most any plan could gain on it: 'memory-unaware' is "
            "the fastest step the search finds with memory ignored (the space's ceiling on these devices).\n\n" +
            md_table(["cluster", "plan", "step s", "peak / usable GiB", "fastest fitting baseline", "speed-up",
                      "memory-unaware s", "vs before", "plan s"], rows) +
            "\n\nEvery baseline (fitting first, fastest first; peaks in GiB):\n\n" +
            md_table(["cluster", "baseline", "fits", "step s", "peak GiB"], bases))
    write_section("llama7b", "Llama-7B: plans with full sharding and offload in the space", body)
