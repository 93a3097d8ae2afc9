"""Single-GPU plans run on fake tensors as a GPU runs them, against the simulator, on models the project
was not built on (no GPU needed).

For each model of ``bench/unseen`` and ``tests/models`` (tiny, random weights), in fp32 and bf16, eight
single-stage plans for one H100 (keep; every node recomputed; every node selective; two micro-batches;
every other node swapped; kept with the parameters streamed from the host, ZeRO-3 offload; every other
node swapped and the rest recomputed with the parameters streamed; every node selective with them; the
optimizer on the host with them):
the simulator's peak from the GPU-semantics profile (CUDA's autocast, :mod:`memflow.graph.gpu_autocast`)
beside the peak of live bytes of the same plan's step run on fake tensors as the executor runs it on a
GPU (:mod:`memflow.reserved`: data copied per micro-batch, forward under autocast and backward outside
it, checkpoint's replays, the optimizer). The fake run was checked against real CPU runs of the
executor where the precision's semantics are the same (fp32; bf16 on the CPU's own rules). A negative
error is an under-prediction: a plan that says it fits could not.
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path

from memflow.cluster import Cluster
from memflow.model_file import load_model_file
from memflow.planner import swap_leave
from memflow.profile import profile_model
from memflow.reserved import fake_reserved
from memflow.simulator import Simulator
from memflow.strategy import RECOMPUTE, SELECTIVE, Strategy

from .bench_fidelity import run_case
from .common import ROOT, md_table, write_section

__all__ = ["main"]

#: (actions, repeated along the nodes; micro-batches; the parameters streamed from the host)
PLANS = (("keep", 1, False), (RECOMPUTE, 1, False), (SELECTIVE, 1, False), ("keep", 2, False),
         ("keep,swap", 1, False), ("keep", 1, True), ("recompute,swap", 1, True), (SELECTIVE, 1, True))


def _plan(g, cl, pattern: str, m: int, host: bool) -> tuple:
    """The plan's strategy and what the fake run needs of it (its actions, its swaps' timeline)."""
    acts = (pattern.split(",") * g.n)[:g.n]
    st = Strategy.single(g.n, microbatches=m).copy(actions=acts)
    if host:
        st = st.copy(sharding=["parameters"], offload=["optimizer+parameters"])
    return st, dict(optimizer_on_host=host, params_on_host=host, swap_leave=swap_leave(g, cl, st) or None)


BATCH = 4
# real runs of the executor on this host (cpu-1, the CPU's autocast) for the under-predictions and a few exact
# cases: whether a real run shows what the fake run shows where the two precisions' rules agree
CONFIRM = (("t5", "bf16", "R"), ("swin", "bf16", "R"), ("gru", "bf16", "R"), ("sac", "bf16", "R"),
           ("neox", "fp32", "K"), ("mixtral", "fp32", "K"), ("t5", "fp32", "R"))


def _files() -> list[Path]:
    return sorted((ROOT / "bench" / "unseen").glob("*.py")) + sorted(
        p for p in (ROOT / "tests" / "models").glob("*.py") if not p.name.startswith("_"))


def main() -> None:
    cl = Cluster.for_gpus(1, "h100-80gb")
    rows, errs, t0, nodes = [], [], time.time(), {}
    for f in _files():
        spec = load_model_file(f)
        for dt in ("fp32", "bf16"):
            for pattern, m, host in PLANS:
                act = pattern.replace(",", "/") + (", parameters on the host" if host else "")
                try:
                    g = profile_model(spec, BATCH // m, device=cl.device, dtype=dt, cache=False)
                    nodes[f.stem] = (f, g.n)
                    st, kw = _plan(g, cl, pattern, m, host)
                    pred = Simulator(g, cl).evaluate(st).peak_bytes[0]
                    got = fake_reserved(spec, BATCH // m, list(st.actions), microbatches=m, dtype=dt, workspace=0,
                                        **kw)["peak_live"]
                except Exception as e:  # noqa: BLE001 - a failure is a row
                    rows.append([f.stem, dt, act, m, "failed", " ".join(str(e).split())[:120], ""])
                    continue
                err = pred / got - 1
                errs.append(err)
                rows.append([f.stem, dt, act, m, f"{pred:,}", f"{got:,}", f"{100 * err:+.3f}%"])
                print(f"bench fakerun: {f.stem} {dt} {act} m{m}: {100 * err:+.3f}%", flush=True)
    under = [e for e in errs if e < -1e-4]
    over = [e for e in errs if e > 1e-4]
    body = (__doc__.split("\n\n", 1)[1].strip() + "\n\n"
            f"{len(errs)} plans on {len(_files())} models ({time.time() - t0:.0f} s): "
            f"{len(errs) - len(under) - len(over)} within 0.01%, {len(over)} over "
            f"(median {100 * statistics.median(over) if over else 0:+.2f}%, worst "
            f"{100 * max(over) if over else 0:+.2f}%), {len(under)} under"
            + (f" (worst {100 * min(under):+.2f}%)" if under else "") + ".\n\n"
            + md_table(["model", "precision", "action", "micro-batches", "predicted peak B", "fake run peak B",
                        "error"], rows))
    real = []
    for stem, dt, code in CONFIRM:
        f, n = nodes[stem]
        (r,) = run_case(str(f), {}, BATCH, f"pattern:{code * n}", steps=3, runs=1, warmup=1, dtype=dt)
        real.append([stem, dt, {"K": "keep", "R": "recompute"}[code], f"{r['mp']:,}", f"{r['pp']:,}",
                     f"{100 * (r['pp'] / r['mp'] - 1):+.3f}%"])
        print(f"bench fakerun: real run {stem} {dt} {code}: {real[-1][-1]}", flush=True)
    body += ("\n\nReal runs of the executor on this host (one rank, `bench.bench_fidelity.run_case(model, {}, 4, "
             "'pattern:' + action × nodes, dtype=...)`, 3 steps; predicted on `cpu-1` with the CPU's own autocast):\n\n"
             + md_table(["model", "precision", "action", "measured peak B", "predicted B", "error"], real))
    write_section("fakerun", "Single-GPU plans: the simulator against a fake run of the step", body)


if __name__ == "__main__":
    main()
