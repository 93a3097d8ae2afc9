"""Benchmark: time to plan a GPT-2-medium-sized graph on 8 devices, and the
search's optimality gap against the exact solver on small instances.

Graph: a synthetic GPT-2-medium-like graph (embedding, 24 blocks of width
1024, final norm, LM head + loss: 27 nodes; bf16 activations, fp32 Adam
state, V100-ish times), built for every micro-batch size the search asks for.
Cluster: 8 × V100-16GB over PCIe (``Cluster.for_gpus(8, "v100-16gb")``).
Run: ``python -m bench search``; writes its section of BENCHMARKS.md.
``python -m bench.bench_search real`` re-measures only the real GPT-2-medium
``memflow.plan`` table (cold and warm, each in a fresh process, 5 runs; beside it the
``memflow plan`` command end to end, median and max: issue #4's time-to-plan figure);
``python -m bench.bench_search real --against REV`` times the cold command of this checkout
and of git revision REV side by side (interleaved, 6 runs each; its own section of BENCHMARKS.md).
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

from memflow.cluster import Cluster
from memflow.simulator.synthetic import gpt2_like_graph


def gpt2_medium_like_graph(micro_batch: int = 4, seq: int = 1024, *, d: int = 1024, layers: int = 24,
                           bytes_per: int = 2):
    """:func:`simulator.gpt2_like_graph` with GPT-2-medium's width and depth."""
    return gpt2_like_graph(micro_batch, seq, bytes_per=bytes_per, d=d, layers=layers, name="gpt2-medium-like")


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
    from memflow.search import search

    cl = Cluster.for_gpus(8, "v100-16gb", memory=memory)
    rows = []
    gap_ref = None
    graphs = CachedGraphs(seq=seq)
    # warm the provider so timings are the search's, not graph building
    from memflow.search import SearchContext
    ctx = SearchContext(graphs, global_batch, cl)
    for mb in ctx.microbatch_sizes():
        graphs(mb)
    out = [f"graph: synthetic GPT-2-medium-like ({ctx.n} nodes, seq {seq}); cluster: {cl.name} "
           f"({cl.num_devices} × {cl.device.memory_bytes / 2**30:.0f} GiB); global batch {global_batch}; "
           f"{os.cpu_count()} CPU cores", ""]
    configs = [("1 chain (default iterations per chain)", dict(chains=1, processes=1))]
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
        from memflow.search import default_iterations
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

    from memflow.search import search, solve_exact

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


_REAL_PLAN = r"""
import json, sys, time
t0 = time.perf_counter()
import memflow
t1 = time.perf_counter()
p = memflow.plan(sys.argv[1], gpus=8, gpu_type="v100-16gb", batch_size=8, seed=0)
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "plan": t2 - t1, "search": p.settings["search_seconds"],
                  "summary": p.strategy.summary(), "step_ms": p.predicted["step_time_s"] * 1e3}))
"""


def _real_plan_once(cache: str) -> dict:
    """One ``memflow.plan`` of the real GPT-2-medium example in a fresh process using ``cache``."""
    import json
    import subprocess

    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, MEMFLOW_CACHE_DIR=cache, MEMFLOW_EXAMPLE_SCALE="full", HF_HUB_OFFLINE="1",
               PYTHONPATH=os.pathsep.join([str(root)] + [x for x in [os.environ.get("PYTHONPATH")] if x]))
    out = subprocess.run([sys.executable, "-c", _REAL_PLAN, str(root / "examples" / "gpt2_medium.py")], env=env,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _cli_plan_once(cache: str, root: Path | None = None) -> float:
    """Seconds for the whole command ``memflow plan examples/gpt2_medium.py --gpus 8`` using
    ``cache``: interpreter start, imports, profiling, search, printing and writing the plan
    (``root``: the checkout whose memflow runs; this one by default)."""
    import subprocess
    import tempfile

    root = root or Path(__file__).resolve().parent.parent
    env = dict(os.environ, MEMFLOW_CACHE_DIR=cache, MEMFLOW_EXAMPLE_SCALE="full", HF_HUB_OFFLINE="1",
               PYTHONPATH=os.pathsep.join([str(root)] + [x for x in [os.environ.get("PYTHONPATH")] if x]))
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "memflow", "plan", str(root / "examples" / "gpt2_medium.py"),
                        "--gpus", "8", "-o", str(Path(d) / "plan.yaml")], env=env, check=True, capture_output=True,
                       cwd=root)
        return time.perf_counter() - t0


def bench_real_plan(quick: bool, repeats: int = 5) -> list[str]:
    """memflow.plan on the real GPT-2-medium example, 8 × V100, each run in a fresh process:
    cold (a new profile cache: profiling) and warm (the cache that run filled); medians. Beside
    it the CLI command end to end, cold and warm, in caches of its own."""
    import tempfile

    cold, warm, cli_cold, cli_warm = [], [], [], []
    for _ in range(1 if quick else repeats):
        with tempfile.TemporaryDirectory() as cache:
            cold.append(_real_plan_once(cache))
            warm.append(_real_plan_once(cache))
        with tempfile.TemporaryDirectory() as cache:
            cli_cold.append(_cli_plan_once(cache))
            cli_warm.append(_cli_plan_once(cache))
    out = ["| run (fresh process; %d runs) | `memflow plan examples/gpt2_medium.py --gpus 8` s, median (max) | "
           "`memflow.plan` wall s, median | of which search s | `import memflow` s | plan |" % len(cold),
           "|---|---|---|---|---|---|"]
    for label, runs, cli in (("cold cache (profiles every micro-batch size in fake mode)", cold, cli_cold),
                             ("warm cache", warm, cli_warm)):
        r = runs[0]
        out.append(f"| {label} | {statistics.median(cli):.1f} ({max(cli):.1f}) | "
                   f"{statistics.median(x['plan'] for x in runs):.1f} | "
                   f"{statistics.median(x['search'] for x in runs):.1f} | "
                   f"{statistics.median(x['import'] for x in runs):.1f} | {r['summary']}, {r['step_ms']:.0f} ms |")
    if len({(x["summary"], round(x["step_ms"], 6)) for x in cold + warm}) != 1:
        out.append("\nplans differ between runs: " + "; ".join(sorted({x["summary"] for x in cold + warm})))
    return out


def cold_cli_against(rev: str, pairs: int = 6) -> None:
    """The cold ``memflow plan`` command of this checkout and of git revision ``rev`` side by
    side (``python -m bench.bench_search real --against REV``): ``pairs`` runs each, interleaved,
    each in a fresh profile cache; medians and ranges. A shared, noisy host moves both alike."""
    import subprocess
    import tempfile

    root = Path(__file__).resolve().parent.parent
    sha = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", rev], check=True, capture_output=True,
                         text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as wt:
        subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", wt, sha], check=True,
                       capture_output=True)
        # memflow.search and memflow.simulator are the checkout's search/ and simulator/ (mapped by
        # the editable install, which would give this checkout's to both): linked into the other
        # revision's package, found there first
        for sub in ("search", "simulator"):
            link = Path(wt) / "memflow" / sub
            if (Path(wt) / sub).is_dir() and not link.exists():
                link.symlink_to(Path("..") / sub)
        try:
            runs: dict[str, list[float]] = {sha: [], "this checkout": []}
            for _ in range(pairs):
                for label, where in ((sha, Path(wt)), ("this checkout", root)):
                    with tempfile.TemporaryDirectory() as cache:
                        runs[label].append(_cli_plan_once(cache, where))
        finally:
            subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", wt], capture_output=True)
    from .common import md_table, write_section

    rows = [[label, f"{statistics.median(xs):.2f}", f"{min(xs):.2f}–{max(xs):.2f}", ", ".join(f"{x:.1f}" for x in xs)]
            for label, xs in runs.items()]
    ratio = statistics.median(runs["this checkout"]) / statistics.median(runs[sha])
    body = (f"The cold command `memflow plan examples/gpt2_medium.py --gpus 8` (a fresh profile cache each run) of "
            f"this checkout and of revision {sha}, {pairs} runs each, interleaved on the same host:\n\n"
            + md_table(["code", "median s", "range s", "runs s"], rows)
            + f"\n\nratio of medians (this checkout / {sha}): {ratio:.3f}")
    write_section("plan-ab", "Time to plan, side by side with an earlier revision", body,
                  command=f"python -m bench.bench_search real --against {rev}")


def update_real_plan_rows(repeats: int = 5) -> None:
    """Re-measure only the real-plan table of BENCHMARKS.md's search section (``python -m bench.bench_search real``)."""
    import datetime as dt
    import re

    from .common import BENCH_FILE, machine

    rows = bench_real_plan(False, repeats)
    text = BENCH_FILE.read_text()
    sec = re.search(r"<!-- bench:search -->.*?<!-- /bench:search -->", text, re.S)
    if sec is None:
        raise SystemExit("BENCHMARKS.md has no search section: run `python -m bench search`")
    body = sec.group(0)
    table = re.search(r"\n\| run .*?\n\n", body, re.S)
    if table is None:
        raise SystemExit("the search section has no real-plan table: run `python -m bench search`")
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    note = f"(this table: `python -m bench.bench_search real` — {machine()}, {stamp})"
    new = "\n" + "\n".join(rows) + "\n\n" + note + "\n\n"
    body = re.sub(r"\n\(this table: `python -m bench.bench_search real`[^\n]*\)\n\n", "\n\n", body)
    table = re.search(r"\n\| run .*?\n\n", body, re.S)
    body = body[:table.start()] + new + body[table.end():]
    BENCH_FILE.write_text(text[:sec.start()] + body + text[sec.end():])
    print("\n".join(rows) + "\n\n" + note)


def main(quick: bool = False, global_batch: int = 64, seq: int = 1024, processes: int = 2) -> None:
    from .common import write_section

    parts = ["Search on a synthetic GPT-2-medium-like graph (27 nodes; every micro-batch size built "
             "instantly), 8 × V100-16GB over PCIe, global batch 64 × 1024:", ""]
    parts += bench_plan(1 if quick else 3, global_batch, seq, processes, reference=not quick)
    if not quick:
        parts += ["", "Same, with 8 GiB devices:", ""]
        parts += bench_plan(3, global_batch, seq, processes, memory="8GiB")
        parts += ["", "The whole `memflow.plan` on the real `examples/gpt2_medium.py` (batch 8 × 1024, 8 × V100): "
                  "profiling dominates a cold run; the plan cache makes the next one fast:", ""]
        parts += bench_real_plan(quick)
    parts += ["", "Optimality gap against the exact solver (enumeration) on small tight instances:", ""]
    parts += bench_gap(2 if quick else 5)
    write_section("search", "Search quality and speed", "\n".join(parts),
                  command="python -m bench search" + (" (quick)" if quick else ""))


if __name__ == "__main__":
    if sys.argv[1:] == ["real"]:
        update_real_plan_rows()
    elif sys.argv[1:2] == ["real"] and sys.argv[2:3] == ["--against"] and len(sys.argv) == 4:
        cold_cli_against(sys.argv[3])
    else:
        main()
