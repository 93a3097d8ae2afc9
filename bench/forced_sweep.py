"""Forced strategies on model files: each rank's predicted peak against a run's (no search).

``python -m bench.forced_sweep bench/outside5/*.py`` prints one ``ROW`` line per model and strategy:
the per-rank error (predicted / measured - 1), measured - predicted bytes per rank, and ``UNDER`` (a rank
more than 4 bytes above its prediction) or ``OVER`` (more than 5% below it) with where the peaks were.
Eleven strategies a searched plan may never pick (the search avoids what the model over-prices): two
pipeline stages with every node recomputed; every node swapped on one device; dp 2 with ZeRO-3 and
nodes kept and recomputed in turn; GPipe with swap and recompute in turn; dp 2 with ZeRO-2, every node
selective and the optimizer on the host; two stages with selective / swap / keep in turn, ZeRO-3 and the
optimizer and parameters on the host; every node selective on one device; two stages with selective and
keep in turn; two stages with keep / selective / recompute in turn; dp 2 with ZeRO-2 over two micro-batches,
nodes kept, recomputed, swapped and selective in turn; two stages, every node kept, over two micro-batches.
``--cases A,B`` runs those alone.
Not a section of BENCHMARKS.md: a search for rules the memory model misses (the 2026-12-03 sweeps over
bench/outside5 and bench/outside6 found tests/test_checkpoint_holds.py's, and the selective ones in
tests/test_phase_peaks.py and tests/test_selective_first.py).
"""
from __future__ import annotations

import importlib.util
import sys

from memflow.cluster import Cluster
from memflow.planner import GraphSource, resolve_spec
from memflow.strategy import Strategy
from tests.onerank import predicted_ranks

ACTION = {"K": "keep", "R": "recompute", "S": "swap", "L": "selective"}
# name, cluster, dp, pp, micro-batches, schedule, action pattern, sharding, optimizer on host, parameters on host
CASES = [
    ("pp2-m2-rec", "cpu-2", 1, 2, 2, "1f1b", "R", "none", False, False),
    ("pp1-swap", "cpu-1", 1, 1, 1, "1f1b", "S", "none", False, False),
    ("dp2-z3-m2-KR", "cpu-2", 2, 1, 2, "1f1b", "KR", "parameters", False, False),
    ("pp2-gpipe-m2-SR", "cpu-2", 1, 2, 2, "gpipe", "SR", "none", False, False),
    ("dp2-z2-sel-host", "cpu-2", 2, 1, 1, "1f1b", "L", "gradients", True, False),
    ("pp2-m2-LSK-z3host", "cpu-2", 1, 2, 2, "1f1b", "LSK", "parameters", True, True),
    ("pp1-sel", "cpu-1", 1, 1, 1, "1f1b", "L", "none", False, False),
    ("pp2-m2-LK", "cpu-2", 1, 2, 2, "1f1b", "LK", "none", False, False),
    ("pp2-m2-KLR", "cpu-2", 1, 2, 2, "1f1b", "KLR", "none", False, False),
    ("dp2-z2-m2-KRSL", "cpu-2", 2, 1, 2, "1f1b", "KRSL", "gradients", False, False),
    ("pp2-m2-K", "cpu-2", 1, 2, 2, "1f1b", "K", "none", False, False),
]


def sweep(path: str, only: set | None = None) -> None:
    spec = resolve_spec(path)
    loader = importlib.util.spec_from_file_location("forced_sweep_model", path)
    mod = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(mod)
    batch = max(4, getattr(mod, "BATCH_SIZE", 4) // 4 * 4)
    name = path.rsplit("/", 1)[-1][:-3]
    for case, cl, dp, pp, m, sched, pat, sh, oh, ph in CASES:
        if only and case not in only:
            continue
        try:
            g = GraphSource(spec, Cluster.load(cl))(batch // (dp * m))
            if g.n < pp:
                continue
            so = [0] * g.n if pp == 1 else [0] * (g.n // 2) + [1] * (g.n - g.n // 2)
            st = Strategy(dp=dp, pp=pp, stage_of=so, actions=[ACTION[c] for c in (pat * g.n)[:g.n]],
                          microbatches=m, schedule=sched, sharding=[sh] * pp, optimizer_on_host=[oh] * pp,
                          params_on_host=[ph] * pp)
            _, rep = predicted_ranks(path, g, st, batch=batch, cluster=cl, steps=2)
        except Exception as e:  # noqa: BLE001 - one strategy a model cannot take (micro-batch 1 under BatchNorm)
            print("ROW", name, case, "ERROR", (str(e).splitlines() or [type(e).__name__])[0][:200], flush=True)
            continue
        errs = [r.predicted_peak_bytes / r.measured_peak_bytes - 1 for r in rep.ranks]
        under = [r.measured_peak_bytes - r.predicted_peak_bytes for r in rep.ranks]
        flag = "UNDER" if any(u > 4 for u in under) else "OVER" if any(e > 0.05 for e in errs) else ""
        print("ROW", name, case, " / ".join(f"{100 * e:+.2f}%" for e in errs), under, flag,
              [r.peak_at for r in rep.ranks] if flag else "", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    picked = None
    if args[:1] == ["--cases"]:  # (a comma-separated subset of CASES' names)
        picked, args = set(args[1].split(",")), args[2:]
        unknown = picked - {c[0] for c in CASES}
        if unknown:
            sys.exit(f"forced_sweep: no case {', '.join(sorted(unknown))}; the cases: {', '.join(c[0] for c in CASES)}")
    for p in args:
        sweep(p, picked)
