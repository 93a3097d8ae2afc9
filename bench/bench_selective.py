"""Selective recompute (issue 25): what a transformer block holds and what its replay costs.

Table 1: per block, the bytes its forward leaves for its backward when kept, when selective (the
matmul / attention outputs) and when recomputed (none of its own: only its inputs, which every
action holds), and the replay's time as a share of the forward's: from its costs (what the planner
takes where the selective step is not timed), as the planner takes it (a timed step with every node
selective, less the kept one), and measured apart (the fastest of steps taken in turn). Table 2: one CPU device,
the executor's measured peak and step time beside the prediction with every node kept,
selective, or recomputed but the first and last. Table 3: GPT-2 small at full scale, fake tensors,
roofline times on a V100. Table 4: the search suite's transformer cases under tight memory, the
search's best step with selective and without it.
"""
from __future__ import annotations

import copy
import os
import sys
import tempfile
import time

from memflow.cluster import Cluster
from memflow.graph.actions import make_wrap
from memflow.kinds import KEEP, RECOMPUTE, SELECTIVE, SWAP
from memflow.model_file import load_model_file
from memflow.graph.build import capture_program
from memflow.graph.training import opt_params
from memflow.profile import profile_model
from memflow.profile.build import capture_graph
from memflow.planner import GraphSource
from memflow.profile.roofline import replay_share
from memflow.search import SearchContext, search
from memflow.simulator import Simulator
from memflow.strategy import Strategy

from .bench_fidelity import run_case
from .common import ROOT, env, md_table, write_section

MODELS = [("gpt2", str(ROOT / "examples" / "gpt2.py"), 32), ("sac", str(ROOT / "tests" / "models" / "sac.py"), 32)]


def _phase_times(spec, batch: int, repeats: int) -> dict:
    """Per action (keep, selective), the fastest seconds of each forward/backward phase over ``repeats``
    steps taken in turn (other load on a shared host only slows a step)."""
    captured, program, _, model = capture_program(spec, batch, fake=False)
    opt = spec.make_optimizer(opt_params(model, captured.split))
    n = program.n
    wraps = {KEEP: None, SELECTIVE: make_wrap([SELECTIVE] * n, None)}
    best = {a: [float("inf")] * (2 * n) for a in wraps}
    for i in range(repeats + 1):
        for a, wrap in wraps.items():
            marks = []
            program.run_step(captured.flat_inputs, on_phase=lambda p: marks.append((p, time.perf_counter())),
                             wrap=wrap)
            marks.append((2 * n, time.perf_counter()))
            opt.zero_grad(set_to_none=True)
            for (p, t0), (_, t1) in zip(marks, marks[1:]):
                if i and p < 2 * n:
                    best[a][p] = min(best[a][p], t1 - t0)
    return best


#: the search suite's transformer cases (bench_suite.CASES): model, cluster, global batch
SEARCH_CASES = [("gpt2_medium", "titan-x-4", 8), ("gpt2_large", "titan-x-4", 8), ("bert_large", "v100-4-pcie", 8)]


def _search_rows() -> list:
    """Per case and memory (60% and 45% of plain data parallel's simulated peak, all of it usable):
    the search's best step time with selective and without it (the same graphs with its figures
    taken out), same seed and default iterations."""
    rows = []
    for model, cl_name, batch in SEARCH_CASES:
        spec = load_model_file(ROOT / "examples" / f"{model}.py")
        cl = Cluster.load(cl_name)
        graphs = SearchContext(GraphSource(spec, cl), batch, cl).graphs_dict()
        nd_ = cl.num_devices
        g = graphs[batch // nd_]
        peak = max(Simulator(g, cl).evaluate(Strategy.single(g.n, dp=nd_)).peak_bytes)
        without = {}
        for mb, gg in graphs.items():
            gg = copy.deepcopy(gg)
            for nd in gg.nodes:
                nd.sel_saved_bytes = -1
            without[mb] = gg
        # the space's ceiling on these devices: the fastest step the search finds with memory ignored
        free = search(graphs, batch, cl, seed=0, baselines=False, memory_aware=False).best_eval.step_time_s
        for frac in (0.6, 0.45):
            capped = cl.with_memory(int(peak * frac))
            a, b = (search(gs, batch, capped, seed=0, baselines=False) for gs in (graphs, without))
            if a.best is None or b.best is None:
                continue
            w, s = b.best_eval.step_time_s, a.best_eval.step_time_s
            rows.append([model, cl_name, batch, f"{100 * frac:.0f}%", f"{w * 1e3:.1f}", f"{s * 1e3:.1f}",
                         f"{w / s:.3f}×", f"{free * 1e3:.1f}", f"{w / free:.3f}×",
                         f"{a.best.actions.count(SELECTIVE)} selective, {a.best.actions.count(RECOMPUTE)} recompute, "
                         f"{a.best.actions.count(SWAP)} swap"])
    return rows


def main(quick: bool = False) -> None:
    repeats = 5 if quick else 15
    load0 = os.getloadavg()[0]
    t1, t2 = [], []
    with env(MEMFLOW_EXAMPLE_SCALE="tiny"), tempfile.TemporaryDirectory(prefix="memflow_sel_") as tmp, \
            env(MEMFLOW_CACHE_DIR=tmp):
        for name, path, batch in MODELS:
            spec = load_model_file(path)
            g = capture_graph(spec, batch, measure=True, repeats=repeats, accounted=True)
            t = _phase_times(spec, batch, 3 * repeats)
            keep, sel = t[KEEP], t[SELECTIVE]
            n = g.n
            for nd in g.nodes:
                if nd.fwd_flops <= 0 or "." not in nd.name or not nd.name.split(".")[-1].isdigit():
                    continue  # the blocks only
                k = nd.index
                bp = 2 * n - 1 - k
                measured = (sel[k] - keep[k] + sel[bp] - keep[bp]) / keep[k]
                t1.append([name, batch, nd.name, f"{nd.saved_bytes / 2**20:.3f}", f"{nd.sel_saved_bytes / 2**20:.3f}",
                           "0", f"{100 * nd.sel_saved_bytes / nd.saved_bytes:.0f}%",
                           f"{100 * replay_share(nd):.0f}%", f"{100 * nd.sel_replay_time_s / nd.fwd_time_s:.0f}%",
                           f"{100 * measured:.0f}%"])
            for kind in ("single", "selective", "rec-blocks"):
                for r in run_case(path, {}, batch, kind, steps=6, runs=1, warmup=2):
                    t2.append([name, batch, kind, f"{r['mp'] / 2**20:.2f}", f"{r['pp'] / 2**20:.2f}",
                               f"{100 * (r['pp'] / r['mp'] - 1):+.1f}%", f"{r['mt'] * 1e3:.1f}",
                               f"{r['pt'] * 1e3:.1f}", f"{100 * (r['pt'] / r['mt'] - 1):+.1f}%"])
    t3 = []
    if not quick:  # GPT-2 small at full scale: fake tensors, times by roofline on a V100
        with env(MEMFLOW_EXAMPLE_SCALE="full"), tempfile.TemporaryDirectory(prefix="memflow_sel_") as tmp, \
                env(MEMFLOW_CACHE_DIR=tmp):
            g = profile_model(load_model_file(ROOT / "examples" / "gpt2.py"), 1, device="v100-16gb", cache=False)
            for nd in g.nodes:
                if nd.name in ("transformer.h.0", "lm_head"):
                    t3.append([nd.name, f"{nd.saved_bytes / 2**20:.1f}", f"{nd.sel_saved_bytes / 2**20:.1f}", "0",
                               f"{100 * nd.sel_saved_bytes / nd.saved_bytes:.0f}%", f"{nd.fwd_time_s * 1e3:.3f}",
                               f"{nd.sel_replay_time_s * 1e3:.3f}", f"{100 * nd.sel_replay_time_s / nd.fwd_time_s:.0f}%"])
    with env(MEMFLOW_EXAMPLE_SCALE="full"):
        t4 = [] if quick else _search_rows()
    load = (f"Load average {load0:.1f} before and {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} cores: on a "
            "shared host the times are only as good as that allows (the bytes are exact).\n\n")
    body = load + ("Tiny-scale models on this host's CPU (`MEMFLOW_EXAMPLE_SCALE=tiny`; `sac` is "
            "`tests/models/sac.py`, a pre-norm decoder with fused QKV, `scaled_dot_product_attention`, GELU and "
            "dropout). Per block: bytes held from its forward to its backward under each action (MiB; "
            "recompute holds none of its own), and its replay's time as a share of its forward's, estimated "
            "from its costs (the replay's bytes and FLOPs at 10 FLOP/byte, times the measured forward: the "
            "planner's figure where the selective step is not timed), as the planner takes it (the node's forward "
            "and backward timed with every node selective, less the kept ones, medians; `repeats` "
            f"{repeats}) and measured here apart (the same, fastest of {3 * repeats} steps taken in turn with kept "
            "ones).\n\n"
            + md_table(["model", "batch", "block", "keep MiB", "selective MiB", "recompute MiB", "selective/keep",
                        "replay from costs", "replay as planned", "replay measured"], t1)
            + "\n\nOne CPU device, the executor (accounted peak, median step after 2 warm-up steps) beside the "
              "prediction; `rec-blocks` recomputes every node but the first and last.\n\n"
            + md_table(["model", "batch", "actions", "measured peak MiB", "predicted MiB", "error", "measured ms",
                        "predicted ms", "error"], t2))
    if t3:
        body += ("\n\nGPT-2 small (full scale, batch 1 × 1024 tokens, fp32) traced with fake tensors, times by the "
                 "roofline on a V100 (predicted, not measured): a block and the output head (whose one matmul "
                 "output, the logits, is all it holds either way).\n\n"
                 + md_table(["node", "keep MiB", "selective MiB", "recompute MiB", "selective/keep", "forward ms",
                             "replay ms", "replay/forward"], t3))
    if t4:
        body += _search_table(t4)
    write_section("selective", "Selective recompute: held bytes and replay time per block", body)


_SEARCH_INTRO = "\n\nThe search suite's transformer cases"


def _search_table(rows: list, note: str = "") -> str:
    return (_SEARCH_INTRO + " (full scale, fake tensors, roofline times; the SAC "
            "dispatch modes' per-op Python cost not modelled), device memory 60% and 45% of plain data "
            "parallel's simulated peak (all of it usable): the search's best step with and without selective "
            "(the same graphs, its figures taken out; seed 0, default iterations). 'memory ignored': the fastest "
            "step the search finds with the devices' memory ignored (at full memory, any action: the space's "
            "ceiling), and 'most any policy could gain': the step without selective over it, the most any "
            "memory choice, per-op or not, could speed that plan up." + note + "\n\n"
            + md_table(["model", "cluster", "batch", "memory", "without ms", "with ms", "speed-up",
                        "memory ignored ms", "most any policy could gain", "the plan's actions"], rows))


def update_search_rows() -> None:
    """Re-measure only the last table of the selective section (``python -m bench.bench_selective search``)."""
    import datetime as dt
    import re

    from .common import BENCH_FILE

    with env(MEMFLOW_EXAMPLE_SCALE="full"):
        rows = _search_rows()
    text = BENCH_FILE.read_text()
    sec = re.search(r"<!-- bench:selective -->.*?<!-- /bench:selective -->", text, re.S)
    if sec is None or _SEARCH_INTRO not in sec.group(0):
        raise SystemExit("BENCHMARKS.md has no selective search table: run `python -m bench selective`")
    old = sec.group(0)
    head = old[:old.index(_SEARCH_INTRO)]
    note = f" This table alone: `python -m bench.bench_selective search`, {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC."
    BENCH_FILE.write_text(text.replace(old, head + _search_table(rows, note) + "\n<!-- /bench:selective -->"))


if __name__ == "__main__":
    if sys.argv[1:] == ["search"]:
        update_search_rows()
    else:
        main("--quick" in sys.argv[1:])
