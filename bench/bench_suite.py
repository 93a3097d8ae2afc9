"""Search quality where memory is tight: MemFlow's plan vs the best baseline that fits.

For each (model, cluster) the device memory is set to 60% of plain data
parallel's simulated peak (so plain DP cannot run), then ``memflow.plan``
searches; its simulated step time is compared with the fastest baseline that
fits (the search's seeds as fixed strategies: DP, DP + full recompute, DP +
ZeRO-1, balanced 1F1B pipelines; Chen's √n checkpointing; each at several
micro-batch counts). Full-scale configs, fake-mode graphs, roofline times.
"""
from __future__ import annotations

import os
import time

import memflow

from .common import ROOT, md_table, write_section

CASES = [
    ("gpt2_medium", "titan-x-4", 8),
    ("gpt2_large", "titan-x-4", 8),
    ("bert_large", "v100-4-pcie", 8),
    ("llama", "v100-4-pcie", 16),
    ("resnet", "titan-x-4", 32),
    ("lstm", "v100-4-pcie", 32),
]
QUICK = CASES[:2]


def _case(model: str, cluster: str, batch: int, budget: float) -> list:
    path = str(ROOT / "examples" / f"{model}.py")
    t0 = time.perf_counter()
    loose = memflow.plan(path, cluster=cluster, gpu_memory="1TiB", batch_size=batch, time_budget_s=1)
    dp_peak = max(loose.baselines["dp/m1"]["peak_bytes"])
    cap = int(dp_peak * 0.6)
    p = memflow.plan(path, cluster=cluster, gpu_memory=cap, batch_size=batch, time_budget_s=budget)
    secs = time.perf_counter() - t0
    fit = {n: b for n, b in p.baselines.items() if b["fits"] and n != "memory-unaware search"}
    best_name = min(fit, key=lambda n: fit[n]["step_time_s"]) if fit else None
    t = p.predicted["step_time_s"]
    if best_name:
        bt = fit[best_name]["step_time_s"]
        base = f"{best_name}: {bt * 1e3:,.0f} ms"
        speed = f"{bt / t:.2f}×"
    else:
        base, speed = "none fits", "—"
    return [model, cluster, batch, f"{cap / 2**30:.2f} GiB", "yes" if p.fits else "NO",
            p.strategy.summary(), f"{t * 1e3:,.0f}", base, speed, f"{secs:.0f}"]


def main(quick: bool = False) -> None:
    os.environ["MEMFLOW_EXAMPLE_SCALE"] = "full"
    rows = [_case(m, c, b, 3 if quick else 8) for m, c, b in (QUICK if quick else CASES)]
    body = ("Memory per device = 60% of plain data parallel's peak. 'speed-up' = fastest fitting baseline's "
            "step time / MemFlow's (simulated).\n\n" +
            md_table(["model", "cluster", "batch", "memory / device", "MemFlow fits", "MemFlow plan", "step ms",
                      "fastest fitting baseline", "speed-up", "wall s (incl. profiling)"], rows))
    write_section("suite", "Search on tight memory: plan vs best feasible baseline", body,
                  command="python -m bench suite" + (" (quick)" if quick else ""))


if __name__ == "__main__":
    main()
