"""Memory-unaware vs memory-aware search (the MemFlow claim), simulated.

For each case (model, cluster preset, batch): costed task graphs from
fake-mode captures with roofline times for the preset's GPU; then the same
MCMC search twice with the same seed and time budget — time only
(``search.search(..., memory_aware=False)``: what a FlexFlow-style search
returns) and memory-aware (MemFlow's objective). Memory is the preset's
unless the time-only best fits it, in which case the case tightens it to
75% of that strategy's peak (rounded down to 0.5 GiB; 0.25 MiB for tiny
models), which the time-only search does not see. Reported: each one's
strategy, predicted step time and peak vs capacity.

Run: ``python -m bench unaware`` (``quick``: the tiny Llama case only).
"""
from __future__ import annotations

import os
import sys
import time

from memflow.cluster import Cluster

from .bench_maxbatch import describe, env
from .common import ROOT, md_table, write_section

GiB, MiB = 2**30, 2**20

# label, example, scale, cluster preset, batch
CASES = [
    ("GPT-2 medium (seq 1024)", "gpt2_medium", "full", "titan-x-4", 8),
    ("GPT-2 large (seq 1024)", "gpt2_large", "full", "titan-x-4", 8),
    ("BERT-large", "bert_large", "full", "v100-4-pcie", 8),
    ("Llama (tiny)", "llama", "tiny", "v100-4-pcie", 8),
]


def log(msg: str) -> None:
    print(f"[unaware] {msg}", file=sys.stderr, flush=True)


def fmt_ms(t: float) -> str:
    return f"{t * 1e3:,.0f}" if t >= 0.01 else f"{t * 1e3:.2f}"


def fmt_mem(x: float, tiny: bool) -> str:
    return f"{x / MiB:.1f} MiB" if tiny else f"{x / GiB:.2f} GiB"


def run_case(label, example, scale, preset, batch, budget):
    from memflow.search import search

    from memflow.model_file import load_model_file
    from memflow.planner import GraphSource, micro_batch_sizes

    tiny = scale == "tiny"
    with env(MEMFLOW_EXAMPLE_SCALE=scale):
        spec = load_model_file(ROOT / "examples" / f"{example}.py")
        cl = Cluster.load(preset)
        t = time.time()
        graphs = GraphSource(spec, cl).all(micro_batch_sizes(batch, cl.num_devices))
        t_prof = time.time() - t
    kw = dict(seed=0, time_budget_s=budget, max_microbatches=32, baselines=False)
    un = search(graphs, batch, cl, memory_aware=False, **kw)
    ue = un.best_eval
    tightened = False
    if ue.fits:
        step = MiB // 4 if tiny else GiB // 2
        cap = int(0.75 * max(ue.peak_bytes)) // step * step
        cl = cl.with_memory(cap)
        tightened = True
        un = search(graphs, batch, cl, memory_aware=False, **kw)
        ue = un.best_eval
    aw = search(graphs, batch, cl, memory_aware=True, **kw)
    cap = cl.device.memory_bytes
    row = dict(label=label, preset=preset, batch=batch, cap=cap, tightened=tightened, tiny=tiny, t_prof=t_prof,
               n=graphs[max(graphs)].n,
               un_plan=describe(un.best), un_step=ue.step_time_s, un_peak=max(ue.peak_bytes), un_fits=ue.fits,
               aw_fits=aw.best is not None)
    if aw.best is not None:
        ae = aw.best_eval
        row.update(aw_plan=describe(aw.best), aw_step=ae.step_time_s, aw_peak=max(ae.peak_bytes))
    elif aw.smallest_peak:
        st, ae = aw.smallest_peak
        row.update(aw_plan="nothing fits; smallest peak: " + describe(st), aw_step=ae.step_time_s,
                   aw_peak=max(ae.peak_bytes))
    log(f"{label}: unaware {row['un_plan']} {fmt_mem(row['un_peak'], tiny)} fits={ue.fits}; "
        f"aware {row.get('aw_plan')} {fmt_mem(row.get('aw_peak', 0), tiny)}")
    return row


def main(quick: bool = False) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    t0 = time.time()
    budget = 3.0 if quick else 5.0
    cases = [c for c in CASES if c[2] == "tiny"] if quick else CASES
    rows, notes = [], []
    for c in cases:
        t = time.time()
        try:
            r = run_case(*c, budget=budget)
        except Exception as e:
            log(f"{c[0]} failed: {type(e).__name__}: {e}")
            rows.append([c[0], c[3], c[4], "error", f"{type(e).__name__}: {str(e)[:150]}", "", "", "", "", ""])
            continue
        tiny = r["tiny"]
        cap = fmt_mem(r["cap"], tiny) + (" (tightened)" if r["tightened"] else "")
        slow = (f"{100 * (r['aw_step'] / r['un_step'] - 1):+.0f}%" if r["aw_fits"] else "—")
        rows.append([r["label"], r["preset"], r["batch"], cap,
                     f"{r['un_plan']}", fmt_ms(r['un_step']),
                     f"{fmt_mem(r['un_peak'], tiny)} ({'fits' if r['un_fits'] else 'DOES NOT FIT'})",
                     r.get("aw_plan", "—"), fmt_ms(r['aw_step']) if "aw_step" in r else "—",
                     f"{fmt_mem(r['aw_peak'], tiny)} ({'fits' if r['aw_fits'] else 'does not fit'})"
                     if "aw_peak" in r else "—", slow])
        notes.append(f"{r['label']}: {r['n']} nodes, profiling {r['t_prof']:.0f} s, case {time.time() - t:.0f} s")
    body = ["**The fastest strategy of a time-only search does not fit the devices; the memory-aware search "
            "(MemFlow) finds one that does, and how much slower it is.** Simulated: fake-mode task graphs, "
            "roofline times for the preset's GPU, fp32; the same MCMC search with the same seed and a "
            f"{budget:.0f} s budget each, time-only (`search.search(..., memory_aware=False)`) and memory-aware. "
            "Memory per device is the preset's unless the time-only best fits it; then 75% of that strategy's "
            "peak, rounded down to 0.5 GiB (0.25 MiB for tiny models; marked tightened).", "",
            md_table(["model", "cluster", "batch", "memory / device", "time-only best", "step ms", "its max peak",
                      "MemFlow best", "step ms", "its max peak", "MemFlow vs time-only"], rows), "",
            "; ".join(notes) + f". Total bench time {time.time() - t0:.0f} s."]
    write_section("unaware", "Memory-unaware vs memory-aware search", "\n".join(body),
                  command="python -m bench unaware" + (" (quick)" if quick else ""))


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
