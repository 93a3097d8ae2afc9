"""Random plans run: is a plan's peak where the simulator says, whatever the plan?

The search and the other benches run the plans the search likes; this one draws plans no search would
pick, to find the accounting a good plan never meets: per model (the suite's and unseen shapes: a tied
decoder, a reused block, a GRU, an encoder-decoder, T5, BART, Mixtral, GPT-NeoX, Swin, DenseNet, ...),
``PLANS`` seeded random strategies on ``cpu-2``: dp 2 or pp 2 with a random cut, 1 or 2 micro-batches,
either schedule, a random action per node (keep twice as likely as recompute, selective or swap), and
per stage a random sharding level, optimizer on the host or not, parameters on the host under ZeRO-3.
Each is run two steps after a warm-up, uncapped; reported per plan: each rank's predicted / measured
peak − 1 and where the run peaked. Under by more than 4 bytes (optimizer step counters) is a fault.

``python -m bench random [--quick]`` (quick: four models, two plans each).
"""
from __future__ import annotations

import random
import statistics
import tempfile
from pathlib import Path

from memflow.cluster import Cluster
from memflow.errors import MemflowError
from memflow.executor import RunConfig, run_plan
from memflow.planner import resolve_spec
from memflow.profile.build import capture_graph
from memflow.simulator import Simulator
from memflow.strategy import Strategy

from .common import env, md_table, write_section

__all__ = ["main", "draw"]

ROOT = Path(__file__).resolve().parents[1]
MODELS = (["tests/models/" + m for m in ("tied", "reuse", "gru", "encdec", "stacked_lstm", "sent_mask")]
          + ["bench/unseen/" + m for m in ("t5", "bart", "mixtral", "neox", "swin", "densenet", "albert",
                                           "qwen2_moe", "whisper")]
          + ["examples/" + m for m in ("gpt2", "resnet", "lstm")]
          # values sent across a cut as copies: a slice a stage returns, a concatenation's gradients, U-Net skips
          + ["tests/models/sliced", "tests/models/concat_grad", "examples/unet3d", "tests/models/shared_grad",
             "bench/unseen/wav2vec2"])
PLANS = 3
BATCH = 4
SEED = 0


def draw(rng: random.Random, n: int, batch: int) -> Strategy:
    """One random strategy for a graph of ``n`` nodes on two devices."""
    dp = rng.choice([1, 2])
    pp = 2 // dp
    m = rng.choice([1, 2]) if batch // dp >= 2 else 1
    cut = rng.randrange(1, n) if pp > 1 else n
    sharding, opt_host, params_host = [], [], []
    for _ in range(pp):
        lvl = rng.choice(["none", "optimizer", "gradients", "parameters"]) if dp > 1 else \
            rng.choice(["none", "none", "parameters"])
        host = rng.random() < 0.4 or (dp == 1 and lvl == "parameters")  # (dp 1: ZeRO-3 only as offload)
        sharding.append(lvl)
        opt_host.append(host)
        params_host.append(lvl == "parameters" and host and (dp == 1 or rng.random() < 0.6))
    return Strategy(dp=dp, pp=pp, stage_of=[0 if k < cut else 1 for k in range(n)],
                    actions=[rng.choice(["keep", "keep", "recompute", "selective", "swap"]) for _ in range(n)],
                    microbatches=m, schedule=rng.choice(["1f1b", "gpipe"]), sharding=sharding,
                    optimizer_on_host=opt_host, params_on_host=params_host)


def main(quick: bool = False) -> None:
    models = [MODELS[i] for i in (0, 2, 9, 11)] if quick else MODELS
    plans = 2 if quick else PLANS
    rng = random.Random(SEED)
    rows, errs, unders = [], [], []
    cl = Cluster.load("cpu-2")
    with tempfile.TemporaryDirectory(prefix="memflow_random_") as tmp, \
            env(MEMFLOW_CACHE_DIR=tmp, MEMFLOW_EXAMPLE_SCALE="tiny"):
        for rel in models:
            model = str(ROOT / f"{rel}.py")
            spec = resolve_spec(model)
            graphs = {BATCH: capture_graph(spec, BATCH, measure=True, repeats=0)}
            n = graphs[BATCH].n
            done = tries = 0
            while done < plans and tries < 50:
                tries += 1
                st = draw(rng, n, BATCH)
                mb = BATCH // (st.dp * st.microbatches)
                if mb not in graphs:
                    graphs[mb] = capture_graph(spec, mb, measure=True, repeats=0)
                g = graphs[mb]
                try:
                    pred = Simulator(g, cl).evaluate(st)
                except MemflowError:  # (a level or an action this graph does not allow)
                    continue
                done += 1
                cfg = RunConfig(model_file=model, batch_size=BATCH, strategy=st, steps=2, warmup=1, device="cpu",
                                node_names=[nd.name for nd in g.nodes], capacity_bytes=None,
                                predicted={"peak_bytes": pred.peak_bytes})
                rep = run_plan(cfg, nproc=st.num_devices, timeout_s=300)
                e = [r.predicted_peak_bytes / r.measured_peak_bytes - 1 for r in rep.ranks]
                errs += e
                under = [r for r in rep.ranks if r.predicted_peak_bytes < r.measured_peak_bytes - 4]
                unders += [(Path(rel).name, r.measured_peak_bytes - r.predicted_peak_bytes, r.peak_at) for r in under]
                rows.append([Path(rel).name, st.summary() + f"; actions {','.join(a[:3] for a in st.actions)}"
                             + (f"; cut before {st.stage_of.index(1)}" if st.pp > 1 else ""),
                             " / ".join(f"{100 * x:+.2f}%" for x in e),
                             "; ".join(r.peak_at for r in rep.ranks)])
    body = (f"Seeded random plans (seed {SEED}) on `cpu-2`, batch {BATCH}, each run two steps after a warm-up, "
            "uncapped (tiny scale; costs measured on this host). Peak error = predicted / measured − 1 per rank.\n\n"
            f"{len(rows)} plans, {len(errs)} ranks: {len(unders)} under by more than 4 bytes"
            + (" (" + "; ".join(f"{m} {b} bytes at {at}" for m, b, at in unders) + ")" if unders else "")
            + f"; median |error| {100 * statistics.median(abs(x) for x in errs):.2f}%, "
            f"worst over {100 * max(errs):+.2f}%, worst under {100 * min(errs):+.2f}%.\n\n"
            + md_table(["model", "plan", "peak error per rank", "run's peak at"], rows))
    write_section("random", "Random plans: predicted vs measured peaks", body,
                  command="python -m bench random" + (" --quick" if quick else ""))


if __name__ == "__main__":
    main()
