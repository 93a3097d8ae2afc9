"""Prediction vs execution on a real GPU (runs only where torch sees CUDA).

GPT-2 small (full config: 12 layers, d_model 768, sequence 1024) at batch 8 on
one GPU (the ``h100-80gb`` preset, memory set to the GPU's own), one rank with
NCCL. Each strategy is run by the executor; its median step time, accounted
peak live tensor bytes and the caching allocator's peak are set beside two
predictions of the simulator: from the fake-mode trace with roofline times
(what a plan for a GPU you do not have rests on) and from costs measured on
this GPU (CUDA events, real tensors).
"""
from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import torch

from memflow.alloc_trace import ENV as ALLOC_TRACE
from memflow.cluster import Cluster, Link
from memflow.devices import measure_cuda_host_link
from memflow.planfile import Plan
from memflow.records import PlanSettings
from memflow.strategy import RECOMPUTE, SWAP, Strategy

from .common import ROOT, machine, md_table, write_section

__all__ = ["main"]

PRESET = "h100-80gb"
BATCH = 8
STEPS = 8  # one warm-up, seven timed
# the executor's allocator setting (expandable segments), then torch's own default beside it
ALLOC = {"expandable": "expandable_segments:True", "default": "expandable_segments:False"}
# (MEMFLOW_BENCH_GPU_ALLOC=expandable runs only the first: half the bench's time)
RAW = ROOT / "bench" / "runs" / "gpu-rows.json"  # every row's figures, rewritten after each run
TRACES = ROOT / "bench" / "runs" / "gpu-alloc"  # each run's allocator events (memflow.alloc_trace)
# the predictions made without the GPU (``--predict``, on the planning host): the roofline simulation and
# the reserved peak each plan records; a GPU run takes them from here, so it spends its time measuring
PREDICTED = ROOT / "bench" / "runs" / "gpu-predicted.json"
NOTE = ("Where the measured-cost prediction is still off, it is swap on the GPU: while copies to the host are pending the executor paces the host to the GPU at node boundaries (so memory is allocated and freed in the GPU's order, as the simulator assumes), which exposes kernel-launch time the simulator does not model; and the swap hook moves about 3% more than the trace counts as the swapped nodes' saved bytes (swap all: 10,361 MiB to the host against 10,073 in the fake trace; not yet pinned down).")

_PROBE = r"""
import json, torch
torch.cuda.init()
d = torch.device("cuda")
x = torch.randn(1024, 1024, device=d, requires_grad=True)
torch.cuda.synchronize()
a0 = torch.cuda.memory_allocated()
y = x @ x
torch.cuda.synchronize()
a1 = torch.cuda.memory_allocated() - y.numel() * 4
y.sum().backward()
torch.cuda.synchronize()
a2 = torch.cuda.memory_allocated() - y.numel() * 4 - x.numel() * 4
free, total = torch.cuda.mem_get_info()
print(json.dumps(dict(workspace_forward=a1 - a0, workspace_backward=a2 - a1, total=total,
                      outside=total - free - torch.cuda.memory_reserved(), sm=list(torch.cuda.get_device_capability()))))
"""


def _probe() -> dict:
    """A fresh process's cuBLAS workspaces (allocated bytes a first matmul leaves, on the forward's thread
    and on autograd's) and the device memory used outside the allocator (context, libraries)."""
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {"error": out.stderr[-500:]}


def _strategies(n: int) -> list[tuple[str, Strategy]]:
    alt = [SWAP if k % 2 else "keep" for k in range(n)]
    return [
        # (the plans the last GPU run left least settled first: a run cut short by its time limit keeps them)
        ("swap all", Strategy.single(n, action=SWAP)),
        ("swap every other node", Strategy.from_boundaries(n, [], dp=1, actions=alt)),
        ("swap every other node, copied back 2 nodes ahead", Strategy.from_boundaries(n, [], dp=1, actions=alt,
                                                                                    prefetch=2)),
        # bf16 autocast: the weights autocast casts rounded on the host into pinned buffers (memflow.executor.zero3)
        ("FSDP units, parameters + optimizer on host, bf16", Strategy.single(n).copy(
            sharding=["parameters"], optimizer_on_host=[True], params_on_host=[True])),
        ("recompute all", Strategy.single(n, action=RECOMPUTE)),
        ("keep", Strategy.single(n)),
        ("optimizer on host", Strategy.single(n).copy(optimizer_on_host=[True])),
        ("FSDP units, parameters + optimizer on host", Strategy.single(n).copy(
            sharding=["parameters"], optimizer_on_host=[True], params_on_host=[True])),
        ("keep, 2 micro-batches", Strategy.single(n, microbatches=2)),
    ]


def _dtype(name: str) -> str:
    return "bf16" if name.endswith("bf16") else "fp32"


def _err(pred: float, meas: float) -> str:
    return f"{100 * (pred / meas - 1):+.1f}%" if meas else "—"


def main(quick: bool = False, rows_file: str | None = None) -> None:
    """Measure on this GPU (or, with ``rows_file``, write the section again from a run's saved rows)."""
    if rows_file:
        data = json.loads(Path(rows_file).read_text())
        write_section("gpu", "Prediction vs execution on a GPU", render(data),
                      command=data.get("command", "python -m bench gpu"))
        return
    if not torch.cuda.is_available():
        print("bench gpu: no CUDA GPU here; nothing measured (the section in BENCHMARKS.md is left as it is)")
        return
    from memflow.model_file import load_model_file
    from memflow.profile import profile_model
    from memflow.planner import prediction
    from memflow.runner import run as run_plan_file
    from memflow.simulator import Simulator

    probe = _probe()  # before this process holds the GPU
    print("bench gpu: probe", probe, flush=True)
    os.environ["MEMFLOW_EXAMPLE_SCALE"] = "full"
    spec = load_model_file(ROOT / "examples" / "gpt2.py")
    props = torch.cuda.get_device_properties(0)
    preset = Cluster.for_gpus(1, PRESET).with_memory(int(props.total_memory))
    d2h, h2d = measure_cuda_host_link()
    # the measured-costs prediction also takes this host's measured pinned copy rate
    here = dataclasses.replace(preset, host_link=Link(min(d2h, h2d), preset.host_link.latency))
    clusters = {"roofline": preset, "measured": here}
    cl = preset
    graphs: dict[tuple[str, int], object] = {}

    def graph(source: str, mb: int, dtype: str = "fp32"):
        if (source, mb, dtype) not in graphs:
            graphs[(source, mb, dtype)] = profile_model(spec, mb, device=cl.device, measure=source == "measured",
                                                        cache=False, dtype=dtype)
        return graphs[(source, mb, dtype)]

    data = dict(command="python -m bench gpu" + (" (quick)" if quick else ""), machine=machine(), probe=probe,
                device=props.name, total_memory=int(props.total_memory), torch=torch.__version__,
                cuda=torch.version.cuda, d2h=d2h, h2d=h2d, preset_link=preset.host_link.bandwidth, rows=[])
    before = os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
    n = graph("measured", BATCH).n
    saved = _predicted_here(props, n)
    if saved:
        data["predicted_on"] = f"`python -m bench.bench_gpu --predict`, on {next(iter(saved.values()))['made_on']}"
    for name, st in _strategies(n)[: 3 if quick else None]:
        mb, dt = st.microbatch_size(BATCH), _dtype(name)
        here_pred = saved.get(name) if saved.get(name, {}).get("strategy_dict") == st.to_dict() else None
        pred = {src: Simulator(graph(src, mb, dt), clusters[src]).evaluate(st, detail=True)
                for src in (("measured",) if here_pred else ("roofline", "measured"))}
        g = graph("measured", mb, dt)
        plan = Plan(settings=PlanSettings(dtype=dt), model_file=str(spec.path), model_name=spec.name, batch_size=BATCH, strategy=st,
                    cluster=cl.to_dict(), node_names=[nd.name for nd in g.nodes], fingerprint=g.fingerprint,
                    predicted=prediction(pred["measured"], BATCH, st))
        # what memflow plan records for such a plan (the rank reports it as predicted reserved)
        planned = here_pred["planned_reserved"] if here_pred else _planned(spec, graph("roofline", mb, dt), preset,
                                                                            st, dt, props.name)
        if planned is not None:
            plan.predicted.reserved_bytes = [planned]
        runs: dict[str, object] = {}
        for alloc, conf in ALLOC.items():
            if alloc not in os.environ.get("MEMFLOW_BENCH_GPU_ALLOC", ",".join(ALLOC)).split(","):
                continue
            os.environ["PYTORCH_CUDA_ALLOC_CONF"] = conf
            # the allocator's events of each run (memflow.alloc_trace), for the reserved-memory model
            os.environ[ALLOC_TRACE] = str(TRACES / _slug(name, alloc))
            try:
                res = run_plan_file(plan, steps=STEPS, check=False)
                runs[alloc] = dict(dataclasses.asdict(res.ranks[0]), losses=res.losses)
            except Exception as e:  # noqa: BLE001 - a failed strategy is a row, not the end of the table
                runs[alloc] = f"failed: {' '.join(str(e).split())[:300]}"
            print(f"bench gpu: {name} ({alloc}):", runs[alloc], flush=True)
        os.environ.pop(ALLOC_TRACE, None)
        if before is None:
            os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        else:
            os.environ["PYTORCH_CUDA_ALLOC_CONF"] = before
        predicted = {src: dict(step_time_s=pred[src].step_time_s, peak_bytes=pred[src].peak_bytes[0]) for src in pred}
        if here_pred:
            predicted = dict(roofline=dict(step_time_s=here_pred["step_time_s"], peak_bytes=here_pred["peak_bytes"],
                                           made_on=here_pred["made_on"]), **predicted)
        data["rows"].append(dict(strategy=name, strategy_dict=st.to_dict(), runs=runs, predicted=predicted,
            planned_reserved=plan.predicted.reserved_bytes[0] if plan.predicted.reserved_bytes else None))
        RAW.parent.mkdir(parents=True, exist_ok=True)
        RAW.write_text(json.dumps(data, indent=1))  # (a run stopped part way keeps its rows)
    write_section("gpu", "Prediction vs execution on a GPU", render(data), command=data["command"])


def _planned(spec, graph, cl: Cluster, st: Strategy, dt: str, device_name: str) -> int | None:
    """The reserved peak ``memflow plan`` records for the plan (memflow.reserved), None where not covered."""
    from memflow.planner import swap_leave
    from memflow.reserved import not_covered, plan_reserved
    from memflow.simulator import Simulator

    if not_covered(st):
        return None
    return plan_reserved(spec, st, BATCH, device_name=device_name, dtype=dt, swap_leave=swap_leave(graph, cl, st),
                         live_peak=Simulator(graph, cl).evaluate(st).peak_bytes[0])


def predict(device_name: str, total_memory: int, out: Path = PREDICTED) -> None:
    """Every row's predictions made without the GPU, here: the fake-trace (roofline) simulation and the
    reserved peak its plan records, for a ``device_name`` GPU of ``total_memory`` bytes. A GPU run of
    :func:`main` uses them where its GPU, node count and strategies match (else it predicts them itself)."""
    from memflow.model_file import load_model_file
    from memflow.profile import profile_model
    from memflow.simulator import Simulator

    os.environ["MEMFLOW_EXAMPLE_SCALE"] = "full"
    spec = load_model_file(ROOT / "examples" / "gpt2.py")
    cl = Cluster.for_gpus(1, PRESET).with_memory(int(total_memory))
    graphs: dict = {}

    def graph(mb: int, dt: str):
        if (mb, dt) not in graphs:
            graphs[(mb, dt)] = profile_model(spec, mb, device=cl.device, dtype=dt, cache=False)
        return graphs[(mb, dt)]

    n = graph(BATCH, "fp32").n
    rows = []
    for name, st in _strategies(n):
        dt, mb = _dtype(name), st.microbatch_size(BATCH)
        g = graph(mb, dt)
        ev = Simulator(g, cl).evaluate(st, detail=True)
        rows.append(dict(strategy=name, strategy_dict=st.to_dict(), step_time_s=ev.step_time_s,
                         peak_bytes=int(ev.peak_bytes[0]), planned_reserved=_planned(spec, g, cl, st, dt, device_name)))
        print(f"bench gpu: predicted {name}: {ev.peak_bytes[0] / 2**20:,.0f} MiB live, reserved "
              f"{(rows[-1]['planned_reserved'] or 0) / 2**20:,.0f} MiB", flush=True)
    out.write_text(json.dumps(dict(machine=machine(), device=device_name, total_memory=int(total_memory), n=n,
                                   fingerprints={f"{k[0]}-{k[1]}": v.fingerprint for k, v in graphs.items()},
                                   rows=rows), indent=1))


def _predicted_here(props, n: int) -> dict:
    """The saved predictions (:func:`predict`) by strategy name, where they were made for this GPU."""
    if not PREDICTED.exists():
        return {}
    d = json.loads(PREDICTED.read_text())
    # (the device's memory moves no figure predicted here: the peaks and reserved peaks are the plan's own)
    if d.get("device") != props.name or d.get("n") != n:
        print(f"bench gpu: {PREDICTED.name} was made for another GPU or graph; predicting here", flush=True)
        return {}
    return {r["strategy"]: dict(r, made_on=d["machine"]) for r in d["rows"]}


def phases(rows_file: str, names: list[str]) -> None:
    """Print, phase by phase, each named row's peak measured on the GPU (the rank's ``phase_peaks``)
    beside the simulator's from a fake trace made by this code on this host (``Simulator.phase_bytes``,
    the run's roofline cluster): where in the step a prediction is off, not only at the peak."""
    from memflow.model_file import load_model_file
    from memflow.profile import profile_model
    from memflow.simulator import Simulator

    data = json.loads(Path(rows_file).read_text())
    os.environ["MEMFLOW_EXAMPLE_SCALE"] = "full"
    spec = load_model_file(ROOT / "examples" / "gpt2.py")
    cl = Cluster.for_gpus(1, PRESET).with_memory(int(data["total_memory"]))
    for row in data["rows"]:
        run = row["runs"].get("expandable")
        if row["strategy"] not in names or not isinstance(run, dict):
            continue
        st = Strategy.from_dict(row["strategy_dict"])
        g = profile_model(spec, st.microbatch_size(BATCH), device=cl.device, dtype=_dtype(row["strategy"]))
        sim = Simulator(g, cl).phase_bytes(st)[0]
        measured = [(k, v) for k, v in run["phase_peaks"].items() if k.startswith(("forward", "backward"))]
        print(row["strategy"])
        for (where, v), p in zip(measured, sim):
            print(f"  {where.split(', micro-batch')[0]:42s} measured {v / 2**20:8,.0f} MiB  predicted "
                  f"{p / 2**20:8,.0f} MiB  {_err(p, v):>7s}")


def repredict(rows_file: str) -> None:
    """Predict every row's peak again from a fake trace made by this code, on this host (no GPU needed):
    what the fixes made after a GPU run change in the prediction a plan for that GPU rests on. Saved in
    the rows (``repredicted``) and shown beside the run's measurements."""
    from memflow.model_file import load_model_file
    from memflow.profile import profile_model
    from memflow.simulator import Simulator

    data = json.loads(Path(rows_file).read_text())
    os.environ["MEMFLOW_EXAMPLE_SCALE"] = "full"
    spec = load_model_file(ROOT / "examples" / "gpt2.py")
    cl = Cluster.for_gpus(1, PRESET).with_memory(int(data["total_memory"]))
    graphs: dict = {}
    for row in data["rows"]:
        st, dt = Strategy.from_dict(row["strategy_dict"]), _dtype(row["strategy"])
        mb = st.microbatch_size(BATCH)
        if (mb, dt) not in graphs:
            graphs[(mb, dt)] = profile_model(spec, mb, device=cl.device, dtype=dt, cache=False)
        row["repredicted"] = int(Simulator(graphs[(mb, dt)], cl).evaluate(st, detail=True).peak_bytes[0])
        print(f"bench gpu: {row['strategy']}: fake-trace peak {row['repredicted'] / 2**20:,.1f} MiB", flush=True)
    data["repredicted_with"] = machine()
    Path(rows_file).write_text(json.dumps(data, indent=1))


def _slug(name: str, alloc: str = "expandable") -> str:
    return f"{'-'.join(name.replace(',', '').split())}-{alloc}"


def replay_traces(rows_file: str, tgz: Path = TRACES.with_suffix(".tgz")) -> None:
    """Replay each row's allocator trace (the run's ``gpu-alloc.tgz``) through :mod:`memflow.cuda_alloc`:
    the model's reserved peak and placements beside the measured ones, and the largest mapping of the
    timed steps (what made reserved memory exceed the live peak). Saved in the rows (``replay``)."""
    import gzip
    import tarfile

    from memflow.cuda_alloc import replay

    data = json.loads(Path(rows_file).read_text())
    with tarfile.open(tgz) as tf:
        traces = {m.name.split("/")[-2]: json.loads(gzip.decompress(tf.extractfile(m).read()))
                  for m in tf.getmembers() if m.name.endswith("rank0.json.gz")}
    for row in data["rows"]:
        t = traces.get(_slug(row["strategy"]))
        if t is None:
            continue
        r = replay(t["events"], t["timed_from"])
        row["replay"] = dict(measured=t["peak_reserved"], reserved=r["peak_reserved"], placed=r["placed_alike"],
                             maps_same=r["maps"] == [e[2] for e in t["events"] if e[0] == "segment_map"],
                             allocated=t["peak_allocated"], grew=r["grew"])
        print(f"bench gpu: {row['strategy']}: replayed {r['peak_reserved'] / 2**20:,.0f} MiB reserved "
              f"(measured {t['peak_reserved'] / 2**20:,.0f}), {100 * r['placed_alike']:.2f}% placed alike", flush=True)
    # and where a fake run of the plan's step can stand for the GPU's (memflow.reserved): its events replayed
    from memflow.model_file import load_model_file
    from memflow.planner import swap_leave
    from memflow.profile import profile_model
    from memflow.reserved import not_covered, plan_reserved
    from memflow.simulator import Simulator

    os.environ["MEMFLOW_EXAMPLE_SCALE"] = "full"
    spec = load_model_file(ROOT / "examples" / "gpt2.py")
    cl = Cluster.for_gpus(1, PRESET).with_memory(int(data["total_memory"]))  # (the run's roofline cluster)
    for row in data["rows"]:
        st = Strategy.from_dict(row["strategy_dict"])
        if row.get("replay") is None or not_covered(st):
            continue
        dt = _dtype(row["strategy"])
        g = profile_model(spec, st.microbatch_size(BATCH), device=cl.device, dtype=dt)
        r = plan_reserved(spec, st, BATCH, device_name="h200", dtype=dt, swap_leave=swap_leave(g, cl, st),
                          live_peak=Simulator(g, cl).evaluate(st).peak_bytes[0])
        row["replay"]["fake"] = dict(reserved=r)
        print(f"bench gpu: {row['strategy']}: a fake run replayed (what the plan now predicts): "
              f"{r / 2**20:,.0f} MiB reserved", flush=True)
    data["replayed_with"] = machine()
    Path(rows_file).write_text(json.dumps(data, indent=1))


def _replay_section(data: dict) -> str:
    rows = []
    for row in data["rows"]:
        r = row.get("replay")
        if not r:
            continue
        g = r["grew"]
        rows.append([row["strategy"], f"{r['allocated'] / 2**20:,.0f}", f"{r['measured'] / 2**20:,.0f}",
                     f"{r['reserved'] / 2**20:,.0f} ({_err(r['reserved'], r['measured'])})",
                     f"{100 * r['placed']:.2f}%", "yes" if r["maps_same"] else "no"] + (
                        [f"{r['fake']['reserved'] / 2**20:,.0f} ({_err(r['fake']['reserved'], r['measured'])})"]
                        if r.get("fake") else ["—"]) + [
                     f"{100 * (r['measured'] / r['allocated'] - 1):.1f}%"] + (
            [f"{g['request'] / 2**20:,.1f}", f"{g['mapped'] / 2**20:,.0f}", f"{g['free'] / 2**20:,.0f}"]
            if g else ["—"] * 3))
    if not rows:
        return ""
    return ("\n\n**The allocator's own events, replayed** (`python -m bench.bench_gpu --replay bench/runs/gpu-rows.json`"
            f", on {data.get('replayed_with', 'this host')}; the traces in `bench/runs/gpu-alloc.tgz`, written by "
            "`MEMFLOW_CUDA_ALLOC_TRACE`, `memflow/alloc_trace.py`): each run's alloc and free events, in order, through "
            "`memflow.cuda_alloc` (PyTorch's caching allocator with expandable segments, from its documented rules). "
            "*Placed alike*: allocations the model put at the trace's own offset in their segment. *A fake run "
            "replayed*: no GPU; the plan's step run on fake tensors on this host as one GPU runs it (CUDA's autocast, "
            "the cuBLAS workspaces at the first matmuls, CUDA's reduction staging buffers as PyTorch sizes them) "
            "and its allocations replayed the same way "
            "(`memflow.reserved`; single-stage plans without swap, offload or sharding). The last three "
            "columns: the largest mapping of the timed steps, the request that made it, and the free bytes mapped "
            "then, none of them in one piece large enough.\n\n" + md_table(
                ["strategy", "allocated MiB", "reserved MiB (measured)", "reserved MiB (replayed)", "placed alike",
                 "same mappings", "reserved MiB (a fake run of the plan's step, replayed)", "reserved over allocated", "largest mapping's request MiB", "mapped MiB",
                 "free then MiB"], rows))


def render(data: dict) -> str:
    """The section's text from a run's rows (what :func:`main` saved in ``bench/runs/gpu-rows.json``)."""
    from memflow.gpumem import CUBLAS_HANDLES, reserved_bytes

    probe = data["probe"]
    ws = probe.get("workspace_forward")
    rows, terr, perr, rerr, nerr = [], {"roofline": [], "measured": []}, {"roofline": [], "measured": []}, [], []
    again = all("repredicted" in row for row in data["rows"])
    for row in data["rows"]:
        name, pred, got = row["strategy"], row["predicted"], row["runs"]
        r, dflt = got.get("expandable"), got.get("default", "not run")
        if not isinstance(r, dict):
            rows.append([name, str(r)] + [""] * (10 + 2 * again))
            continue
        mt, mp, res = r["measured_step_time_s"], r["measured_peak_bytes"], r["cuda_peak_reserved_bytes"]
        for src in pred:
            terr[src].append(abs(pred[src]["step_time_s"] / mt - 1))
            perr[src].append(abs(pred[src]["peak_bytes"] / mp - 1))
        # the plan's own (memflow.reserved, runs after this change) or the rule of the measured-trace peak
        pres = row.get("planned_reserved") or reserved_bytes(pred["measured"]["peak_bytes"], ws)
        rerr.append(abs(pres / res - 1))
        # what a plan predicts now: the fake run through the allocator model where it covers the plan
        # (memflow.reserved), else the rule above of the fake-trace peak predicted again
        fake = (row.get("replay") or {}).get("fake") or (
            {"reserved": row["planned_reserved"]} if row.get("planned_reserved") else None)
        now = fake["reserved"] if fake else reserved_bytes(row["repredicted"], ws) if again else None
        if now:
            nerr.append(abs(now / res - 1))
        rows.append([name, f"{mt * 1e3:.1f}"] + [
            f"{pred[src]['step_time_s'] * 1e3:.1f} ({_err(pred[src]['step_time_s'], mt)})" for src in pred] + [
            f"{mp / 2**20:,.0f}", f"{r['cuda_peak_allocated_bytes'] / 2**20:,.0f}", f"{res / 2**20:,.0f}",
            dflt if isinstance(dflt, str) else f"{dflt['cuda_peak_reserved_bytes'] / 2**20:,.0f}"] + [
            f"{pred[src]['peak_bytes'] / 2**20:,.0f} ({_err(pred[src]['peak_bytes'], mp)})" for src in pred] + [
            f"{pres / 2**20:,.0f} ({_err(pres, res)})", f"{r['host_peak_bytes'] / 2**20:,.0f}"] + (
            [f"{row['repredicted'] / 2**20:,.0f} ({_err(row['repredicted'], mp)})",
             f"{now / 2**20:,.0f} ({_err(now, res)})" + (" ·" if fake else "")] if again else []))

    def med(xs):
        return f"{100 * statistics.median(xs):.1f}%" if xs else "—"

    def worst(xs):
        return f"{100 * max(xs):.1f}%" if xs else "—"

    summary = md_table(["prediction from", "median |error| step time", "worst", "median |error| peak", "worst"], [
        [src, med(terr[src]), worst(terr[src]), med(perr[src]), worst(perr[src])] for src in ("roofline", "measured")])
    wsf = f"{ws / 2**20:.1f} MiB" if isinstance(ws, int) else "not measured"
    ctx = f"{probe['outside'] / 2**20:,.0f} MiB" if "outside" in probe else "not measured"
    return (
        f"{data.get('machine', '')}\n\n"
        f"GPU: {data['device']} ({data['total_memory'] / 2**30:.1f} GiB), CUDA {data['cuda']}, torch {data['torch']}, "
        f"one rank (NCCL); pinned host link measured at {data['d2h'] / 1e9:.1f} GB/s device→host and "
        f"{data['h2d'] / 1e9:.1f} GB/s host→device (the preset says {data.get('preset_link', 50e9) / 1e9:.0f} GB/s). "
        f"GPT-2 small (full config) at batch {BATCH} × 1024, fp32 unless the row says bf16 (TF32 off, PyTorch's default for matmul); "
        f"{STEPS} steps, median of the last {STEPS - 1}. Predictions: *roofline* = fake-mode trace (bf16 cast by "
        f"CUDA's autocast lists) with times from the `{PRESET}` spec; *measured* = every node timed on this GPU with CUDA "
        "events, its memory traced on real tensors and the measured host link (`memflow plan --measure`). "
        "Accounted peak = live tensor bytes on the GPU, a swapped tensor counted until its copy to the host "
        "has finished (what the simulator predicts); allocated / reserved = `torch.cuda.max_memory_allocated` "
        "/ `max_memory_reserved` with the executor's allocator setting (expandable segments), and reserved "
        "once more with torch's default allocator (the same plan run again). *Predicted reserved* = "
        f"`memflow.gpumem.reserved_bytes` of the measured-trace peak: {CUBLAS_HANDLES} cuBLAS workspaces of "
        f"{wsf} each (a first matmul's, forward and backward, in a fresh process) beside the live bytes, rounded "
        "up to 20 MiB pages, plus one 2 MiB small page. Outside the allocator, a fresh process's CUDA context "
        f"with cuBLAS loaded held {ctx} (`memflow.gpumem.CONTEXT_BYTES`). Error = predicted / measured − 1. "
        "A run made after the one-GPU reserved prediction (`memflow.reserved`) predicts reserved by it where it "
        "covers the plan, as `memflow plan` does: the reserved peak the plan records, a fake run of its step "
        "through the allocator model (every one-GPU plan since 2026-12-01), made before the run without the GPU"
        + (f" ({data['predicted_on']})" if data.get("predicted_on") else "") + ". "
        f"Predicted reserved against reserved: median |error| {med(rerr)}, worst {worst(rerr)}."
        + (f" The last column: the fake trace made again by the code after this run, on "
           f"{data.get('repredicted_with', 'this host')} (`python -m bench.bench_gpu --repredict "
           "bench/runs/gpu-rows.json`), against the same accounted peak; and the reserved peak a plan predicts "
           "now, against the measured reserved: marked · where a fake run of the step through the allocator model "
           "stands for the GPU (`memflow.reserved`, what `memflow plan` records for a one-GPU plan it covers, now "
           "the optimizer on the host and swap too, a swapped node's buffers freed on the simulator's timeline of "
           "its copies; the replays below), else the rule above of the fake-trace peak predicted again. "
           + (data.get("fault", "") + " " if data.get("fault") else "") + "Median |error| "
           f"{med(nerr)}, worst {worst(nerr)}." if again else "") + "\n\n"
        + summary + "\n\n" +
        md_table(["strategy", "measured ms", "predicted ms (roofline)", "predicted ms (measured costs)",
                  "accounted peak MiB", "allocated MiB", "reserved MiB", "reserved MiB (torch's default allocator)",
                  "predicted peak MiB (fake trace)", "predicted peak MiB (measured trace)",
                  "predicted reserved MiB", "host peak MiB"] + (
                     ["predicted peak MiB (fake trace, predicted again after the run's fixes)",
                      "predicted reserved MiB (as planned now)"] if again else []),
                 rows) + _replay_section(data) + "\n\n" + data.get("note", NOTE).strip())


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", help="write the section from a run's saved rows (bench/runs/gpu-rows.json)")
    ap.add_argument("--repredict", help="predict a run's rows again with this code (no GPU), then write the section")
    ap.add_argument("--replay", help="replay a run's allocator traces (bench/runs/gpu-alloc.tgz) into its rows, "
                                     "then write the section")
    ap.add_argument("--predict", metavar="GPU_NAME:TOTAL_BYTES",
                    help="make every row's predictions here, without the GPU, into bench/runs/gpu-predicted.json "
                         "(e.g. 'NVIDIA H200:150109880320', torch.cuda.get_device_properties' name and total_memory)")
    ap.add_argument("--phases", nargs="+", metavar="ROWS_FILE STRATEGY",
                    help="print each named row's measured and predicted peak phase by phase")
    a = ap.parse_args()
    if a.phases:
        phases(a.phases[0], a.phases[1:])
        raise SystemExit(0)
    if a.predict:
        name, total = a.predict.rsplit(":", 1)
        predict(name, int(total))
        raise SystemExit(0)
    if a.repredict:
        repredict(a.repredict)
    if a.replay:
        replay_traces(a.replay)
    main(a.quick, a.rows or a.repredict or a.replay)
