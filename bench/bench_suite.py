"""Search quality where memory is tight: MemFlow's plan vs the best baseline that fits.

For each (model, cluster) the device memory is set to 60% of plain data
parallel's simulated peak (so plain DP cannot run), then ``memflow.plan``
searches with its default budget (``search.default_iterations`` per chain,
2 chains: an iteration budget, so the plan does not depend on the machine's
load); its simulated step time is compared with the fastest baseline that
fits (the search's seeds as fixed strategies: DP, DP + full recompute, DP +
ZeRO-1, balanced 1F1B pipelines; Chen's √n checkpointing; each at several
micro-batch counts). Full-scale configs, fake-mode graphs, roofline times.

Two columns say how much of the remaining distance to a target is the
search's and how much is the problem's:

* the same search with 10× the iterations (same seed, same cases): the best
  step time it finds, and the default plan's gap to it;
* the speed-up ceiling: the fastest fitting baseline over the fastest
  strategy the memory-unaware search finds with memory ignored (no plan that
  fits can be faster than that, so no speed-up can exceed it).
"""
from __future__ import annotations

import os
import sys
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
QUICK = [CASES[2], CASES[5]]  # a transformer and the LSTM: under a minute with profiles cached
LONG = 10  # the long search's budget, × the default iterations


def _unaware_time(p) -> float | None:
    b = p.baselines.get("memory-unaware search")
    return b["step_time_s"] if b else None


def _case(model: str, cluster: str, batch: int) -> list:
    from search import default_iterations

    path = str(ROOT / "examples" / f"{model}.py")
    t0 = time.perf_counter()
    loose = memflow.plan(path, cluster=cluster, gpu_memory="1TiB", batch_size=batch, time_budget_s=1)
    dp_peak = max(loose.baselines["dp/m1"]["peak_bytes"])
    cap = int(dp_peak * 0.6)
    p = memflow.plan(path, cluster=cluster, gpu_memory=cap, batch_size=batch)
    secs = time.perf_counter() - t0
    per_chain = default_iterations(len(p.node_names))
    t1 = time.perf_counter()
    long = memflow.plan(path, cluster=cluster, gpu_memory=cap, batch_size=batch, iterations=LONG * per_chain)
    long_secs = time.perf_counter() - t1
    fit = {n: b for n, b in p.baselines.items() if b["fits"] and n != "memory-unaware search"}
    best_name = min(fit, key=lambda n: fit[n]["step_time_s"]) if fit else None
    t = p.predicted["step_time_s"]
    tl = long.predicted["step_time_s"]
    free = [x for x in (_unaware_time(p), _unaware_time(long)) if x]
    if best_name:
        bt = fit[best_name]["step_time_s"]
        base = f"{best_name}: {bt * 1e3:,.0f} ms"
        speed = f"{bt / t:.2f}×" if p.fits else "—"
        ceiling = f"{bt / min(free):.2f}×" if free else "—"
    else:
        base, speed, ceiling = "none fits", "—", "—"
    if long.fits and p.fits:
        gap = f"{(t / tl - 1) * 100:+.1f}%"
    else:
        gap = "—"
    return [model, cluster, batch, f"{cap / 2**30:.2f} GiB", "yes" if p.fits else "NO",
            p.strategy.summary(), f"{t * 1e3:,.1f}", base, speed,
            f"{tl * 1e3:,.1f}" + ("" if long.fits else " (no fit)"), gap, ceiling,
            f"{p.settings['iterations']:,} / {long.settings['iterations']:,}", f"{secs:.0f} / {long_secs:.0f}"]


def main(quick: bool = False) -> None:
    os.environ["MEMFLOW_EXAMPLE_SCALE"] = "full"
    t0 = time.perf_counter()
    rows = [_case(m, c, b) for m, c, b in (QUICK if quick else CASES)]
    body = ("Memory per device = 60% of plain data parallel's peak; plans keep memflow's default 10% headroom, "
            "and the baselines are judged against the same usable memory. MemFlow = `memflow.plan` with its "
            "default budget (iterations, seed 0). 'speed-up' = fastest fitting baseline's step time / MemFlow's "
            f"(simulated). '{LONG}× search' = the same search given {LONG}× the iterations; 'gap' = how much "
            "slower the default plan is than that. 'ceiling' = fastest fitting baseline / the fastest strategy "
            "found with memory ignored (the memory-unaware search): no plan that fits can give a larger "
            "speed-up.\n\n" +
            md_table(["model", "cluster", "batch", "memory / device", "MemFlow fits", "MemFlow plan", "step ms",
                      "fastest fitting baseline", "speed-up", f"{LONG}× search step ms", "gap", "ceiling",
                      f"iterations (default / {LONG}×)", "wall s (default incl. profiling / "
                      f"{LONG}×)"], rows) +
            f"\n\nTotal {time.perf_counter() - t0:.0f} s.")
    write_section("suite", "Search on tight memory: plan vs best feasible baseline", body,
                  command="python -m bench suite" + (" --quick" if quick else ""))


if __name__ == "__main__":
    main(quick="--quick" in sys.argv[1:])
