"""Deeper models under a memory cap (the TensorFlowMem experiment).

Part 1 (real runs, CPU): the tiny-width ResNet-like CNN
(``MEMFLOW_EXAMPLE_SCALE=tiny``, 32² images, width 16) at batch 16 under a
fixed accounted cap; the deepest network (``MEMFLOW_RESNET_DEPTH``, depth =
2·blocks + 2) that trains plain (ordinary PyTorch steps under the same
live-bytes counter and cap, in the bench's process) vs with a MemFlow plan on
``cpu-1`` with the cap. Plain: doubling the number of blocks, then exact
bisection. MemFlow: doubling, then probes placed by interpolating the smallest
peak the search saw, until a fitting and a non-fitting depth are within 1/8;
the depth reported is the largest predicted-fitting plan that also completes
a real run through the executor under its capacity. Throughput (samples/s) of
each at its deepest depth, measured through the executor.

Part 2 (simulation): one Titan X 12 GB at full scale (224², width 64, batch
16; fake-mode graphs, roofline times), beside TensorFlowMem's 504 → 1916
layers. Plain all-keep: steps of ×8 blocks, then probes at the interpolated
crossing of its peak with the capacity. MemFlow: a full plan (every
micro-batch size, captured by two worker processes while plain's depth is
searched) at 1026 layers, and the depth beyond which no plan can exist
(parameters + gradients alone exceed what a plan may use), from a meta-device
build.

Run: ``python -m bench deeper`` (``quick``: no simulation).
"""
from __future__ import annotations

import math
import multiprocessing as mp
import os
import statistics
import sys
import time

from memflow.cluster import Cluster
from memflow.strategy import Strategy

from .bench_maxbatch import (cpu_seconds, describe, env, largest_fitting, largest_true, make_plan, n_nodes,
                             peak_of, plain_peak, run_memflow, run_strategy)
from .common import ROOT, md_table, write_section

MiB = 2**20
GiB = 2**30
MF = ROOT / "examples" / "resnet.py"
BATCH = 16
HEADROOM = 0.9  # a plan may use 90% of a device (memflow.planner.DEFAULT_HEADROOM)


def log(msg: str) -> None:
    print(f"[deeper] {msg}", file=sys.stderr, flush=True)


def depth(blocks: int) -> int:
    return 2 * blocks + 2


def min_peak(p) -> int:
    """The smallest max-peak the plan's search saw (its Pareto front includes the non-fitting points)."""
    return min([int(x.max_peak_bytes) for x in p.pareto] + [max(p.predicted.peak_bytes)])


def _plan_probe(cl, plans: dict, plan_budget: float, label: str):
    """blocks -> (MemFlow plans that depth under ``cl``, the smallest peak its search saw); plans kept."""

    def probe(blocks):
        t = time.time()
        with env(MEMFLOW_RESNET_DEPTH=depth(blocks)):
            p = make_plan(MF, cluster=cl, batch_size=BATCH, seed=0, time_budget_s=plan_budget)
        plans[blocks] = p
        log(f"{label} depth {depth(blocks)}: {'fits' if p.fits else 'no fit'} ({describe(p.strategy)}; "
            f"smallest peak seen {min_peak(p) / MiB:.2f} MiB; {time.time() - t:.1f} s)")
        return p.fits, min_peak(p)

    return probe


# ---------------------------------------------------------------- part 1: real runs
def _spread(runs: tuple[list[float], list[float]]) -> str:
    """The per-run throughputs, for the reader to see the noise: 'plain a–b, MemFlow c–d samples/s'."""
    def rng(ts):
        xs = sorted(BATCH / t for t in ts)
        return f"{xs[0]:.1f}–{xs[-1]:.1f}" if xs else "—"
    return f"runs: plain {rng(runs[0])}, MemFlow {rng(runs[1])} samples/s"


def cpu_part(quick: bool, plan_budget: float, max_blocks: int, timed_steps: int, rounds: int = 3) -> dict:
    out = {}
    with env(MEMFLOW_EXAMPLE_SCALE="tiny"):
        base_blocks = 8  # ResNet-18 layout
        with env(MEMFLOW_RESNET_DEPTH=depth(base_blocks)):
            n = n_nodes(MF)
            peak0 = plain_peak(MF, BATCH, None)
        cap = int(math.ceil(peak0 / (MiB / 4)) * (MiB / 4))
        out["cap"] = cap
        plain_peaks = {base_blocks: peak0}

        def plain_ok(blocks):  # plain PyTorch in this process under the cap
            with env(MEMFLOW_RESNET_DEPTH=depth(blocks)):
                pk = plain_peak(MF, BATCH, cap)
            log(f"plain depth {depth(blocks)}: {'ok' if pk else 'OOM'}")
            if pk:
                plain_peaks[blocks] = pk
            return pk is not None

        bp, bp_fail = largest_true(plain_ok, base_blocks, limit=max_blocks, rel=0)
        cl = Cluster.load("cpu-1").with_memory(cap)
        plans = {}
        probe = _plan_probe(cl, plans, plan_budget, "MemFlow")
        bm, bm_fail, _ = largest_fitting(probe, bp, HEADROOM * cap, limit=max_blocks, rel=1 / 8, probe_lo=False)
        # confirm by a real run (which also times it): the deepest predicted-fitting plan, then the next
        # deepest probed one on a real OOM
        verified, vrep, ooms = None, None, []
        for cand in sorted((b for b, p in plans.items() if p.fits), reverse=True):
            with env(MEMFLOW_RESNET_DEPTH=depth(cand)):
                r = run_memflow(plans[cand], steps=1 + timed_steps, warmup=1)
            log(f"MemFlow depth {depth(cand)} run: {'ok' if r else 'OOM'}")
            if r:
                verified, vrep = cand, r
                break
            ooms.append(depth(cand))
            if len(ooms) >= 2:
                break
        # plain's throughput at its deepest depth, through the executor as MemFlow's plans run (not capped:
        # the executor runs the exported graph, which may hold a little more than eager PyTorch); the two
        # timed side by side, runs interleaved (the confirming run is MemFlow's first), median per side
        t_plain, t_mf = [], [vrep.measured_step_time_s] if vrep else []
        for i in range(rounds):
            with env(MEMFLOW_RESNET_DEPTH=depth(bp)):
                rp = run_strategy(MF, Strategy.single(n_nodes(MF)), BATCH, None, steps=1 + timed_steps, warmup=1)
            t_plain.append(rp.measured_step_time_s)
            if verified and i + 1 < rounds:
                with env(MEMFLOW_RESNET_DEPTH=depth(verified)):
                    r = run_memflow(plans[verified], steps=1 + timed_steps, warmup=1)
                if r:
                    t_mf.append(r.measured_step_time_s)
        log(f"plain depth {depth(bp)} in the executor: peak {peak_of(rp)} (in-process {plain_peaks[bp]}, cap {cap})")
        out.update(plain_blocks=bp, plain_fail=bp_fail, mf_pred_blocks=bm, mf_pred_fail=bm_fail, mf_blocks=verified,
                   mf_ooms=ooms, plan=describe(plans[verified].strategy) if verified else "—",
                   mf_peak=peak_of(vrep) if vrep else None,
                   mf_pred_peak=max(plans[verified].predicted.peak_bytes) if verified else None,
                   plain_peak=plain_peaks[bp], plain_exec_peak=peak_of(rp), probed=sorted(depth(b) for b in plans),
                   t_plain=statistics.median(t_plain), t_mf=statistics.median(t_mf) if t_mf else math.nan,
                   t_runs=(t_plain, t_mf), nodes=n)
    return out


# ---------------------------------------------------------------- part 2: simulation
def _capture(args) -> tuple[int, float]:
    """In a worker process: profile (fake mode, roofline) one micro-batch size into the profile cache."""
    model_file, env_vars, threads, mb, device = args
    import torch

    from memflow.model_file import load_model_file
    from memflow.profile import profile_model

    for k in [k for k in os.environ if k.startswith("MEMFLOW_") and k != "MEMFLOW_CACHE_DIR"]:
        del os.environ[k]
    os.environ.update(env_vars)
    torch.set_num_threads(threads)  # part of the cache key
    t = time.time()
    profile_model(load_model_file(model_file), mb, device=device, cache=True)
    return mb, time.time() - t


def prewarm(model_file, sizes: list[int], device: str, processes: int = 2):
    """Start capturing ``sizes`` in ``processes`` worker processes into the profile cache, so that the
    planner's own (sequential) profiling finds them there: the same graphs, made on both cores while this
    process does other work. Fake-mode capture is single-threaded Python and roofline times do not depend
    on this host, so nothing predicted changes. Returns a function that waits for them."""
    import torch

    env_vars = {k: v for k, v in os.environ.items() if k.startswith("MEMFLOW_") and k != "MEMFLOW_CACHE_DIR"}
    tasks = [(str(model_file), env_vars, torch.get_num_threads(), b, device) for b in sizes]
    pool = mp.get_context("spawn").Pool(min(processes, len(tasks)))
    res = pool.map_async(_capture, tasks, chunksize=1)

    def wait() -> None:
        try:
            for mb, dt in res.get():
                log(f"captured micro-batch {mb} in a worker ({dt:.0f} s)")
        finally:
            pool.close()
            pool.join()

    return wait


def param_bytes(blocks: int) -> int:
    """Parameter + buffer bytes of the full-scale network (built on the meta device: no memory, no time)."""
    import torch

    from memflow.model_file import load_model_file

    with env(MEMFLOW_RESNET_DEPTH=depth(blocks)):
        spec = load_model_file(MF)
        with torch.device("meta"):
            m = spec.build()
    return (sum(p.numel() * p.element_size() for p in m.parameters())
            + sum(b.numel() * b.element_size() for b in m.buffers()))


def sim_part(plan_budget: float, max_blocks: int, mf_blocks: int = 512) -> dict:
    from memflow.model_file import load_model_file
    from memflow.planner import GraphSource, micro_batch_sizes
    from memflow.simulator import Simulator

    cl = Cluster.for_gpus(1, "titan-x-12gb")
    cap = cl.device.memory_bytes
    out = {"cap": cap}
    with env(MEMFLOW_EXAMPLE_SCALE="full"):
        steps, peaks = {}, {}

        def plain_probe(blocks):
            t = time.time()
            with env(MEMFLOW_RESNET_DEPTH=depth(blocks)):
                g = GraphSource(load_model_file(MF), cl)(BATCH)
            ev = Simulator(g, cl).evaluate(Strategy.single(g.n))
            steps[blocks], peaks[blocks] = ev.step_time_s, max(ev.peak_bytes)
            log(f"sim plain depth {depth(blocks)}: peak {peaks[blocks] / GiB:.2f} GiB "
                f"({'fits' if ev.fits else 'no fit'}; {time.time() - t:.0f} s)")
            return ev.fits, peaks[blocks]

        # MemFlow: one full plan at 1026 layers (512 blocks: TensorFlowMem's plain depth, about, doubled), its
        # micro-batch sizes captured by two worker processes while plain's depth is searched here
        bm = mf_blocks
        t = time.time()
        with env(MEMFLOW_RESNET_DEPTH=depth(bm)):
            wait = prewarm(MF, micro_batch_sizes(BATCH, 1), cl.device.name)
        try:
            bp, bp_fail, _ = largest_fitting(plain_probe, 8, cap, limit=max_blocks, rel=1 / 8, growth=8)
            out.update(plain_blocks=bp, plain_fail=bp_fail, plain_step=steps[bp], plain_peak=peaks[bp],
                       plain_probed=sorted(depth(b) for b in peaks))
            # no plan can hold more than this: parameters + gradients, 2 × the parameter bytes, must fit
            # what a plan may use; the deepest such network, by bisection over meta-device builds
            usable = HEADROOM * cap
            ub, _ = largest_true(lambda b: 2 * param_bytes(b) <= usable, 8, limit=1 << 14, rel=0)
            out.update(bound_blocks=ub, bound_bytes=2 * param_bytes(ub + 1))
        finally:
            wait()
        log(f"sim MemFlow depth {depth(bm)}: graphs captured ({time.time() - t:.0f} s, with plain's search)")
        if bm <= bp:  # not deeper than plain: plan twice plain's depth instead (captured here, slowly)
            bm = min(2 * bp, ub)
        plans = {}
        probe = _plan_probe(cl, plans, plan_budget, "sim MemFlow")
        fits, _ = probe(bm)
        p = plans[bm]
        out.update(mf_blocks=bm if fits else None, mf_tried=bm, plan=describe(p.strategy),
                   mf_step=p.predicted.step_time_s if fits else None,
                   mf_peak=max(p.predicted.peak_bytes), mf_min_peak=min_peak(p), mf_usable=usable)
    return out


# ---------------------------------------------------------------- main
NOT_TFMEM = (
    "Not TensorFlowMem's network: examples/resnet.py grows every stage with basic blocks (436 M "
    'parameters at 616 layers; theirs, a bottleneck ResNet grown in the third stage only, has 172 M '
    "at 504), and MemFlow's plan here may use micro-batches. Their 504 → 1916 layers measured like "
    "for like (examples/resnet_deep.py, one pass per step) is in *The seeds' results like for like* "
    '(`python -m bench seeds`).'
)


def main(quick: bool = False) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    t0, c0 = time.time(), cpu_seconds()
    plan_budget = 1.0
    timed = 2 if quick else 3
    max_blocks = 64
    body = ["**Deepest ResNet-like network that trains at batch 16 under a fixed memory cap on one device: plain "
            "PyTorch vs MemFlow's plan, and the throughput of each at its deepest depth.**", ""]
    try:
        rounds = 2 if quick else 3
        c = cpu_part(quick, plan_budget=plan_budget, max_blocks=max_blocks, timed_steps=timed, rounds=rounds)
        tc = time.time() - t0
        log(f"part 1 done in {tc:.0f} s (cpu {cpu_seconds() - c0:.0f} s)")
        thr_p = BATCH / c["t_plain"]
        thr_m = BATCH / c["t_mf"] if c["mf_blocks"] else math.nan
        rows = [["plain (all kept)", depth(c["plain_blocks"]),
                 f"OOM at {depth(c['plain_fail'])}" if c["plain_fail"] else "bench limit",
                 "1 device, all keep", f"{c['plain_peak'] / MiB:.2f}", f"{thr_p:.1f}"],
                ["MemFlow", depth(c["mf_blocks"]) if c["mf_blocks"] else "—",
                 (f"predicted max {depth(c['mf_pred_blocks'])}"
                  + (f", predicted no fit at {depth(c['mf_pred_fail'])}" if c["mf_pred_fail"] else ", bench limit")
                  + (f"; real OOM at {', '.join(map(str, c['mf_ooms']))}" if c["mf_ooms"] else "")),
                 c["plan"], f"{c['mf_peak'] / MiB:.2f} (predicted {c['mf_pred_peak'] / MiB:.2f})" if c["mf_peak"] else "—",
                 f"{thr_m:.1f}"]]
        exec_note = ""
        if c["plain_exec_peak"] > c["cap"]:
            exec_note = (f" (The executor's uncapped plain run at depth {depth(c['plain_blocks'])} peaked at "
                         f"{c['plain_exec_peak'] / MiB:.2f} MiB, above the cap: it runs the exported graph.)")
        body += [f"Real runs, CPU: tiny-width CNN (`MEMFLOW_EXAMPLE_SCALE=tiny`, 32² images, base width 16), depth "
                 f"via `MEMFLOW_RESNET_DEPTH` (= 2·blocks + 2), batch {BATCH}, cap {c['cap'] / MiB:.2f} MiB (plain "
                 "peak of the depth-18 network, rounded up to 0.25 MiB). Plain = ordinary PyTorch training steps "
                 "in the bench's process under `memflow.memory.LiveBytes` with the cap (the executor's counter and "
                 "cap); its depth: doubling the number of blocks, then exact bisection. MemFlow = "
                 f"`memflow.planner.plan` on `cpu-1` with the cap (search budget {plan_budget:g} s): doubling the "
                 "blocks from plain's deepest, then probes placed by interpolating the smallest peak each search "
                 f"saw, until a fitting and a non-fitting depth are within 1/8 (depths planned: "
                 f"{', '.join(map(str, c['probed']))}; bench limit {depth(max_blocks)}); the deepest fitting plan "
                 "confirmed by a real run through the executor (gloo, 1 process) under its capacity (the cap less "
                 f"the planner's 10% headroom). The graph has {c['nodes']} nodes at every depth (auto granularity "
                 "groups each of the four stages into one node). Throughput, both through the executor (plain: "
                 f"`Strategy.single`, not capped), side by side: {rounds} runs each, interleaved (MemFlow's first is "
                 f"its confirming run), each giving the median of its {timed} timed steps after 1 warm-up step; "
                 f"the table gives the median run ({_spread(c['t_runs'])}).{exec_note}", "",
                 md_table(["", "deepest depth", "search bound", "plan", "peak MiB (plain: in-process; MemFlow: run)",
                           "samples/s"], rows), "",
                 (f"Depth gain {depth(c['mf_blocks']) / depth(c['plain_blocks']):.2f}× "
                  f"({depth(c['plain_blocks'])} → {depth(c['mf_blocks'])} layers) at "
                  f"{100 * (thr_m / thr_p - 1):+.0f}% throughput (the deeper network does more work per sample, "
                  f"and MemFlow's plan runs it in micro-batches). Part 1 took {tc:.0f} s.")
                 if c["mf_blocks"] else "MemFlow found no deeper network."]
    except Exception as e:
        log(f"cpu part failed: {type(e).__name__}: {e}")
        body += [f"CPU part failed: `{type(e).__name__}: {str(e)[:200]}`"]
    if not quick:
        t1, c1 = time.time(), cpu_seconds()
        try:
            s = sim_part(plan_budget=3.0, max_blocks=1024)
            log(f"part 2 done in {time.time() - t1:.0f} s (cpu {cpu_seconds() - c1:.0f} s, its workers included)")
            mf_depth = f"≥ {depth(s['mf_blocks'])}" if s["mf_blocks"] else f"no plan at {depth(s['mf_tried'])}"
            rows = [["plain (all kept)", depth(s["plain_blocks"]),
                     f"OOM at {depth(s['plain_fail'])}" if s["plain_fail"] else "bench limit",
                     "1 device, all keep", f"{s['plain_peak'] / GiB:.2f}", f"{BATCH / s['plain_step']:.1f}"],
                    ["MemFlow", mf_depth, f"no plan can fit beyond {depth(s['bound_blocks'])}", s["plan"],
                     f"{s['mf_peak'] / GiB:.2f}", f"{BATCH / s['mf_step']:.1f}" if s["mf_step"] else "—"]]
            gain = (f"Depth gain ≥ {depth(s['mf_blocks']) / depth(s['plain_blocks']):.2f}× "
                    f"({depth(s['plain_blocks'])} → {depth(s['mf_blocks'])}+ layers; at most "
                    f"{depth(s['bound_blocks']) / depth(s['plain_blocks']):.1f}× by the parameter bound; at "
                    f"{depth(s['mf_blocks'])} layers the search saw plans down to {s['mf_min_peak'] / GiB:.2f} GiB "
                    f"of the {s['mf_usable'] / GiB:.2f} GiB usable, so deeper networks would likely fit too: not probed)"
                    if s["mf_blocks"] else f"MemFlow found no plan at {depth(s['mf_tried'])} layers")
            body += ["", "**Simulated, one Titan X (Pascal) 12 GB**, full scale (224² images, base width 64, 1000 "
                     f"classes, batch {BATCH}, fp32; fake-mode graphs, roofline times). Plain: single-device "
                     "all-keep, simulated on the micro-batch-16 graph; its depth: steps of ×8 blocks from 18 "
                     "layers, then probes at the interpolated crossing of its peak with the 12 GiB until a fitting "
                     "and a non-fitting depth are within 1/8 (depths captured: "
                     f"{', '.join(map(str, s['plain_probed']))}). MemFlow: one full `memflow.planner.plan` "
                     "(every micro-batch size, search budget 3 s, 10% headroom) at "
                     f"{depth(s['mf_tried'])} layers, a depth fixed in advance (TensorFlowMem's plain depth, about, "
                     "doubled) so that two worker processes capture its five micro-batch sizes while plain's "
                     "depth is searched; a fake-mode capture that deep takes over a minute per micro-batch size, "
                     "so MemFlow's depth is not searched further and is a lower bound. Upper bound: beyond the "
                     "depth given, the parameters and their gradients alone (2 × the parameter bytes of a "
                     f"meta-device build: {s['bound_bytes'] / GiB:.3f} GiB one block deeper) exceed the "
                     f"{s['mf_usable'] / GiB:.3f} GiB a plan may use, whatever it swaps or recomputes.", "",
                     md_table(["", "deepest depth", "search bound", "plan", "predicted peak GiB",
                               "predicted samples/s"], rows), "",
                     gain + f"; part 2 took {time.time() - t1:.0f} s. " + NOT_TFMEM]
        except Exception as e:
            log(f"sim part failed: {type(e).__name__}: {e}")
            body += ["", f"Simulated part failed: `{type(e).__name__}: {str(e)[:200]}`"]
    body += ["", f"Total bench time {time.time() - t0:.0f} s."]
    write_section("deeper", "Deeper models under a memory cap", "\n".join(body),
                  command="python -m bench deeper" + (" (quick)" if quick else ""))


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
