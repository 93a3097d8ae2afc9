"""``python -m bench patterns``: forced memory-action patterns on one rank, the simulator's peak against the
executor's.

Each model (tiny scale, batch 8, ``cpu-1``) is profiled once; for each pattern of per-node actions
(``K`` keep, ``R`` recompute, ``S`` swap: a block recomputed, every other node, recompute and swap in
turn, …) the simulator predicts the step's peak and the executor runs it two steps and measures it.
Patterns find what a searched plan may never pick (the search avoids what the model over-prices):
three rules of the memory model were found this way (docs/design.md, *Rules the model follows*).
"""
from __future__ import annotations

from memflow.cluster import Cluster
from memflow.planner import GraphSource, resolve_spec

from .bench_fidelity import run_case
from .common import ROOT, env, md_table, write_section

BATCH = 8
MODELS = ["tests/models/gru.py", "examples/lstm.py", "examples/resnet.py", "tests/models/stacked_lstm.py",
          "tests/models/encdec.py", "tests/models/tied.py", "tests/models/reuse.py", "examples/gpt2.py",
          "examples/llama.py", "examples/bert.py", "tests/models/odd_cnn.py", "tests/models/frozen_lm.py"]


def patterns(n: int, quick: bool = False) -> list[str]:
    """Blocks recomputed (all but the ends; all but the last), one node recomputed, and alternations."""
    pats = ["K" + "R" * (n - 3) + "KK", "R" * (n - 1) + "K", "KR" + "K" * (n - 2), ("KR" * n)[:n],
            ("RS" * n)[:n], ("SKR" * n)[:n], ("SR" * n)[:n], ("RRS" * n)[:n]]
    return list(dict.fromkeys(pats))[:3 if quick else None]


def main(quick: bool = False) -> None:
    rows = []
    with env(MEMFLOW_EXAMPLE_SCALE="tiny"):
        for model in MODELS[:3] if quick else MODELS:
            n = GraphSource(resolve_spec(str(ROOT / model)), Cluster.load("cpu-1"))(BATCH).n
            for pat in patterns(n, quick):  # (bench_fidelity's harness: the pattern simulated, then run)
                (r,) = run_case(str(ROOT / model), {}, BATCH, f"pattern:{pat}", steps=2, runs=1, warmup=1)
                rows.append(dict(r, pattern=pat))
    errs = [r["pp"] / r["mp"] - 1 for r in rows]
    table = [[r["model"], r["pattern"], f"{r['pp']:,}", f"{r['mp']:,}", f"{100 * e:+.2f}%", r["peak_at"]]
             for r, e in zip(rows, errs)]
    body = (f"One rank (`cpu-1`), batch {BATCH}, tiny scale; per node K keep, R recompute, S swap. Predicted: the "
            "simulator's peak of live tensor bytes; measured: the executor's accounted peak over a two-step run. "
            "Error = predicted / measured − 1 (negative: under-predicted).\n\n"
            f"{len(rows)} patterns on {len({r['model'] for r in rows})} models: errors from "
            f"{100 * min(errs):+.2f}% to {100 * max(errs):+.2f}%; {sum(e < -0.01 for e in errs)} more than 1% under, "
            f"{sum(e > 0.01 for e in errs)} more than 1% over.\n\n"
            + md_table(["model", "pattern", "predicted B", "measured B", "error", "measured peak at"], table))
    write_section("patterns", "Forced action patterns: predicted vs measured peak", body,
                  command="python -m bench patterns" + (" --quick" if quick else ""))


if __name__ == "__main__":
    main()
