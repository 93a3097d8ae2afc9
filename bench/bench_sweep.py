"""``python -m bench sweep``: the search against the exact solver on many random small instances.

The search bench's gap table holds the test suite's 22 fixed instances; this one draws
instances at random from a fixed seed (graph kind and seed, 3–7 nodes, 2–4 devices, memory
from 25% to 85% of plain data parallel's peak, the host link shared or not, the search's own
seed) and counts where the default search misses the exact optimum, by how much, and where it
finds nothing that fits although something does, on the development draw and on four further
draws (``HELD_OUT``; the section says which of them prompted changes to the search). Instances the exact solver cannot finish in its time limit are skipped (and counted). Two
worker processes share the instances.
"""
from __future__ import annotations

import dataclasses
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

INSTANCES = 400
QUICK_INSTANCES = 40
EXACT_LIMIT_S = 20.0
SEED = 1
HELD_OUT = (2, 3, 4, 5)  # further draws of instances (see main: which of them changed the search)


def draw(count: int, seed: int = SEED) -> list[tuple]:
    """``count`` instances: (kind, nodes, devices, memory fraction, graph seed, shared link, search seed)."""
    import numpy as np

    rs = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        kind = ["random", "chain"][int(rs.integers(2))]
        n, ndev = int(rs.integers(3, 8)), int(rs.choice([2, 3, 4]))
        frac = float(rs.choice([0.25, 0.35, 0.45, 0.55, 0.7, 0.85]))
        out.append((kind, n, ndev, frac, int(rs.integers(1000)), bool(rs.integers(2)), int(rs.integers(100))))
    return out


def _one(inst: tuple) -> dict:
    tests = str(Path(__file__).resolve().parent.parent / "tests")
    if tests not in sys.path:  # once per worker process, not once per instance
        sys.path.insert(0, tests)
    from test_search import GB, provider, tight_cluster  # the test suite's instance builders

    from memflow.search import search, solve_exact

    kind, n, ndev, frac, gseed, shared, sseed = inst
    g = provider(kind, n, gseed)
    cl = tight_cluster(g, ndev, frac)
    if shared:
        cl = dataclasses.replace(cl, host_link_shared=True)
    ex = solve_exact(g, GB, cl, time_limit_s=EXACT_LIMIT_S)
    if not ex.complete:
        return {"inst": inst, "complete": False}
    t0 = time.perf_counter()
    r = search(g, GB, cl, seed=sseed, baselines=False)
    secs = time.perf_counter() - t0
    et = ex.best_eval.step_time_s if ex.best is not None else None
    rt = r.best_eval.step_time_s if r.best is not None else None
    return {"inst": inst, "complete": True, "exact": et, "search": rt, "exact_s": ex.seconds, "search_s": secs}


def _summary(res: list[dict], count: int) -> tuple[list, list]:
    """(value per row of the table, the instances more than 2% off or with nothing found)."""
    done = [x for x in res if x["complete"]]
    feasible = [x for x in done if x["exact"] is not None]
    none_fit = [x for x in done if x["exact"] is None]
    gaps = [x["search"] / x["exact"] - 1 for x in feasible if x["search"] is not None]
    missed_fit = [x for x in feasible if x["search"] is None]
    false_fit = [x for x in none_fit if x["search"] is not None]
    over2 = [x for x in feasible if x["search"] is None or x["search"] > x["exact"] * 1.02]
    values = [count, len(done), len(feasible),
              f"{sum(g < 1e-9 for g in gaps)}/{len(feasible)}",
              f"{sum(g <= 0.02 for g in gaps)}/{len(feasible)}",
              len(missed_fit), len(false_fit),
              f"{max(gaps) * 100:.2f}%" if gaps else "—",
              f"{statistics.median(x['exact_s'] for x in done):.2f} / {max(x['exact_s'] for x in done):.2f}",
              f"{statistics.median(x['search_s'] for x in done):.3f} / {max(x['search_s'] for x in done):.3f}"]
    return values, over2


ROWS = ["instances drawn", "exact solver finished (within its time limit)", "of those, something fits",
        "search at the optimum (gap < 1e-9)", "search within 2%",
        "search found nothing that fits, though something does", "search claimed a fit where nothing fits",
        "worst gap (where the search found a fit)", "exact solver s (median / max)", "search s (median / max)"]


def main(quick: bool = False) -> None:
    count = QUICK_INSTANCES if quick else INSTANCES
    seeds = [SEED] if quick else [SEED, *HELD_OUT]
    t0 = time.time()
    cols, misses = [], []
    with mp.get_context("spawn").Pool(2) as pool:
        for k, seed in enumerate(seeds):
            res = pool.map(_one, draw(count, seed), chunksize=4)
            values, over2 = _summary(res, count)
            cols.append(values)
            misses += [(seed, x) for x in over2]
            if k + 1 < len(seeds):  # each draw's column as it is done: a stopped run keeps the draws it finished
                _write(quick, count, seeds[:k + 1], cols, misses, t0, partial=True)
    _write(quick, count, seeds, cols, misses, t0)


def _write(quick: bool, count: int, seeds: list, cols: list, misses: list, t0: float, partial: bool = False) -> None:
    from .common import md_table, write_section

    heads = [f"seed {s}" + {SEED: " (development)", 5: " (held out)"}.get(s, "") for s in seeds]
    rows = [[label, *(c[i] for c in cols)] for i, label in enumerate(ROWS)]
    miss_rows = [[seed, *x["inst"][:6], x["inst"][6], f"{x['exact'] * 1e3:.2f}",
                  f"{x['search'] * 1e3:.2f}" if x["search"] is not None else "nothing fits",
                  f"{(x['search'] / x['exact'] - 1) * 100:+.2f}%" if x["search"] is not None else "—"]
                 for seed, x in misses]
    held = "" if quick else (
        f" Seed {SEED} is the draw the search's repair was developed against. Seeds 2, 3 and 4 were each "
        "first run as a held-out check, and their misses then prompted changes to the search "
        "(docs/design.md), so they are held out no longer; seed 5 was first run after the last of those "
        "changes and has prompted none.")
    body = [f"{count} instances drawn at random per seed: graph kind and seed, 3–7 nodes, 2–4 devices, memory "
            "25–85% of plain data parallel's peak, the host link shared or not, and the search's seed; the default "
            f"search against `search.solve_exact` (time limit {EXACT_LIMIT_S:g} s; unfinished instances skipped). "
            f"Global batch 8, the test suite's graph builders. Two worker processes; {time.time() - t0:.0f} s"
            + (f" for the {len(seeds)} draw(s) finished so far (the run goes on to the others)" if partial else "")
            + "." + held, "",
            md_table(["", *heads], rows), ""]
    if miss_rows:
        body += ["Instances where the search is more than 2% off (or finds nothing):", "",
                 md_table(["draw seed", "kind", "nodes", "devices", "memory", "graph seed", "shared link",
                           "search seed", "optimum ms", "search ms", "gap"], miss_rows)]
    else:
        body += ["The search is within 2% of the optimum on every instance where something fits."]
    write_section("sweep", "Search vs exact on random small instances", "\n".join(body),
                  command="python -m bench sweep" + (" --quick" if quick else ""))
