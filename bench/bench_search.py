"""Benchmark: time to plan a GPT-2-medium-sized graph on 8 devices, and the
search's optimality gap against the exact solver on small instances.

Graph: a synthetic GPT-2-medium-like graph (embedding, 24 blocks of width
1024, final norm, LM head + loss: 27 nodes; bf16 activations, fp32 Adam
state, V100-ish times), built for every micro-batch size the search asks for.
Cluster: 8 × V100-16GB over PCIe (``Cluster.for_gpus(8, "v100-16gb")``).
Run: ``python bench/bench_search.py [--quick]``; prints markdown tables.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memflow.cluster import Cluster  # noqa: E402
from memflow.graph.record import KIND_ACTIVATION, KIND_GRAD, KIND_INPUT_GRAD, Buffer, Node  # noqa: E402
from simulator.synthetic import _finish  # noqa: E402


def gpt2_medium_like_graph(micro_batch: int = 4, seq: int = 1024, *, d: int = 1024, layers: int = 24,
                           bytes_per: int = 2):
    """Like :func:`simulator.gpt2_like_graph` with GPT-2-medium's width and depth."""
    V = 50257
    tok = micro_batch * seq
    act = tok * d * bytes_per
    n = layers + 3
    nodes, bufs = [], []
    blk_p = 12 * d * d * 4 + 13 * d * 4
    params = [V * d * 4 + 1024 * d * 4] + [blk_p] * layers + [2 * d * 4, 0]
    heads = d // 64
    flops_blk = 2 * tok * 12 * d * d + 2 * tok * seq * d * 2
    fl = [tok * d * 2] + [flops_blk] * layers + [tok * d * 10, 2 * tok * d * V]
    rate = 60e12
    names = ["wte"] + [f"h.{i}" for i in range(layers)] + ["ln_f", "lm_head"]
    for k in range(n):
        nodes.append(Node(index=k, name=names[k], module_path="", param_bytes=params[k], grad_bytes=params[k],
                          optimizer_bytes=2 * params[k], fwd_flops=fl[k], bwd_flops=2 * fl[k],
                          fwd_time_s=fl[k] / rate + 2e-5, bwd_time_s=2 * fl[k] / rate + 4e-5))
    for k in range(n):
        F, B = k, 2 * n - 1 - k
        if k < n - 1:
            bufs.append(Buffer(act, F, 2 * n - 2 - k, KIND_ACTIVATION, [k + 1, 2 * n - 2 - k]))
            if k > 0:
                bufs.append(Buffer(act, B, B + 1, KIND_INPUT_GRAD, [B + 1]))
        saved = 0
        if 1 <= k <= layers:
            saved = 16 * act + micro_batch * heads * seq * seq * bytes_per
        elif k == layers + 2:
            saved = tok * V * 4
        if saved:
            bufs.append(Buffer(saved, F, B, KIND_ACTIVATION, [B]))
        if params[k]:
            bufs.append(Buffer(params[k], B, 2 * n + 1, KIND_GRAD, [2 * n]))
    return _finish("gpt2-medium-like", nodes, bufs, input_bytes=tok * 8 * 2, opt_transient=params[1] * 2,
                   batch_size=micro_batch, ws_fwd=[act * 2] * n, ws_bwd=[act * 4] * n, bwd_dominates=True)


class CachedGraphs:
    """The graph provider: micro-batch size → graph, built once per size."""

    def __init__(self, **kw):
        self.kw = kw
        self.cache = {}

    def __call__(self, mb: int):
        g = self.cache.get(mb)
        if g is None:
            g = self.cache[mb] = gpt2_medium_like_graph(mb, **self.kw)
        return g


def bench_plan(repeats: int, global_batch: int, seq: int, processes: int, reference: bool = True,
               memory: str | None = None) -> list[str]:
    from search import search

    cl = Cluster.for_gpus(8, "v100-16gb", memory=memory)
    rows = []
    gap_ref = None
    graphs = CachedGraphs(seq=seq)
    # warm the provider so timings are the search's, not graph building
    from search import SearchContext
    ctx = SearchContext(graphs, global_batch, cl)
    for mb in ctx.microbatch_sizes():
        graphs(mb)
    out = [f"graph: synthetic GPT-2-medium-like ({ctx.n} nodes, seq {seq}); cluster: {cl.name} "
           f"({cl.num_devices} × {cl.device.memory_bytes / 2**30:.0f} GiB); global batch {global_batch}; "
           f"{os.cpu_count()} CPU cores", ""]
    configs = [("1 chain (default budget)", dict(chains=1, processes=1))]
    if processes > 1:
        configs.append((f"2 chains, {processes} processes", dict(chains=2, processes=processes)))
    res = None
    for label, kw in configs:
        times = []
        for rep in range(repeats):
            t0 = time.perf_counter()
            res = search(graphs, global_batch, cl, seed=rep, **kw)
            times.append(time.perf_counter() - t0)
        best = res.best_eval
        rows.append(f"| {label} | {statistics.median(times):.2f} | {max(times):.2f} | {res.iterations} | "
                    f"{res.evaluations} | {best.step_time_s * 1e3:.1f} | {max(best.peak_bytes) / 2**30:.2f} |"
                    if best else f"| {label} | {statistics.median(times):.2f} | — | nothing fits |")
    if reference:
        from search import default_iterations
        t0 = time.perf_counter()
        ref = search(graphs, global_batch, cl, seed=1000, iterations=10 * default_iterations(ctx.n), chains=2,
                     processes=processes, baselines=False)
        t_ref = time.perf_counter() - t0
        if ref.best is not None:
            rows.append(f"| reference: 10× budget, 2 chains | {t_ref:.2f} | {t_ref:.2f} | {ref.iterations} | "
                        f"{ref.evaluations} | {ref.best_eval.step_time_s * 1e3:.1f} | "
                        f"{max(ref.best_eval.peak_bytes) / 2**30:.2f} |")
            if res.best is not None:
                gap_ref = res.best_eval.step_time_s / ref.best_eval.step_time_s - 1
    out += ["| search | median s | max s | iterations | evaluations | best step ms | best max peak GiB |",
            "|---|---:|---:|---:|---:|---:|---:|", *rows, ""]
    if gap_ref is not None:
        out.append(f"default budget vs the 10× reference: {gap_ref * 100:+.2f}% step time\n")
    out.append(f"best plan: {res.best.summary() if res.best else 'none'}")
    out += ["", "| plan | step ms | max peak GiB | fits |", "|---|---:|---:|---|"]
    if res.best:
        out.append(f"| **search** | {res.best_eval.step_time_s * 1e3:.1f} | "
                   f"{max(res.best_eval.peak_bytes) / 2**30:.2f} | yes |")
    for name, (st, ev) in res.baselines.items():
        out.append(f"| {name} | {ev.step_time_s * 1e3:.1f} | {max(ev.peak_bytes) / 2**30:.2f} | "
                   f"{'yes' if ev.fits else 'no'} |")
    out.append(f"\nPareto front: {len(res.pareto)} points")
    return out


def bench_gap(seeds: int) -> list[str]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from test_search import GB, INSTANCES, provider, tight_cluster  # the test suite's small instances

    from search import search, solve_exact

    rows, gaps, ex_t, se_t, found = [], [], [], [], 0
    n_feasible = 0
    for kind, n, ndev, seed, frac in INSTANCES:
        g = provider(kind, n, seed)
        cl = tight_cluster(g, ndev, frac)
        ex = solve_exact(g, GB, cl)
        ex_t.append(ex.seconds)
        inst_gaps = []
        for s in range(seeds):
            t0 = time.perf_counter()
            r = search(g, GB, cl, seed=s, baselines=False)
            se_t.append(time.perf_counter() - t0)
            if ex.best is None:
                continue
            if r.best is not None:
                found += 1
                inst_gaps.append(r.best_eval.step_time_s / ex.best_eval.step_time_s - 1)
        if ex.best is not None:
            n_feasible += 1
            gaps += inst_gaps
        rows.append(f"| {kind} n={n} N={ndev} mem={frac:.2f} | {ex.space:,} | {ex.evaluated:,} | {ex.seconds:.2f} | "
                    + (f"{ex.best_eval.step_time_s * 1e3:.2f} | {max(inst_gaps) * 100:.2f}% |" if ex.best else
                       "nothing fits | — |"))
    out = [f"Optimality gap: {len(INSTANCES)} instances × {seeds} seeds, default budget, global batch {GB}", "",
           "| instance | space | exact evaluated | exact s | optimum ms | worst gap |",
           "|---|---:|---:|---:|---:|---:|", *rows, ""]
    out.append("| summary | value |")
    out.append("|---|---:|")
    out.append(f"| runs with a feasible optimum | {n_feasible * seeds} |")
    out.append(f"| of those, search found a feasible plan | {found} |")
    out.append(f"| mean gap | {statistics.mean(gaps) * 100:.3f}% |")
    out.append(f"| worst gap | {max(gaps) * 100:.2f}% |")
    out.append(f"| runs within 2% | {sum(g <= 0.02 for g in gaps)}/{len(gaps)} |")
    out.append(f"| runs at the optimum (gap < 1e-9) | {sum(g < 1e-9 for g in gaps)}/{len(gaps)} |")
    out.append(f"| exact solver s (median / max) | {statistics.median(ex_t):.2f} / {max(ex_t):.2f} |")
    out.append(f"| search s (median / max) | {statistics.median(se_t):.3f} / {max(se_t):.3f} |")
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats and seeds")
    ap.add_argument("--global-batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--processes", type=int, default=2)
    a = ap.parse_args(argv)
    print("## Time to plan\n")
    print("\n".join(bench_plan(1 if a.quick else 3, a.global_batch, a.seq, a.processes, reference=not a.quick)))
    if not a.quick:
        print("\n### Same, with 8 GiB devices\n")
        print("\n".join(bench_plan(3, a.global_batch, a.seq, a.processes, memory="8GiB")))
    print("\n## Optimality gap\n")
    print("\n".join(bench_gap(2 if a.quick else 5)))


if __name__ == "__main__":
    main()
