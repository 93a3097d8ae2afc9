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
import os
import statistics

import torch

from memflow.cluster import Cluster, Link
from memflow.devices import measure_cuda_host_link
from memflow.planfile import Plan
from memflow.strategy import RECOMPUTE, SWAP, Strategy

from .common import ROOT, md_table, write_section

__all__ = ["main"]

PRESET = "h100-80gb"
BATCH = 8
STEPS = 8  # one warm-up, seven timed
NOTE = ("\n\nWhere the measured-cost prediction is still off, it is swap on the GPU: while copies to the host are pending the executor paces the host to the GPU at node boundaries (so memory is allocated and freed in the GPU's order, as the simulator assumes), which exposes kernel-launch time the simulator does not model; and the swap hook moves about 3% more than the trace counts as the swapped nodes' saved bytes (swap all: 10,361 MiB to the host against 10,073 in the fake trace; not yet pinned down).")


def _strategies(n: int) -> list[tuple[str, Strategy]]:
    alt = [SWAP if k % 2 else "keep" for k in range(n)]
    return [
        ("keep", Strategy.single(n)),
        ("keep, 2 micro-batches", Strategy.single(n, microbatches=2)),
        ("recompute all", Strategy.single(n, action=RECOMPUTE)),
        ("swap every other node", Strategy.from_boundaries(n, [], dp=1, actions=alt)),
        ("swap all", Strategy.single(n, action=SWAP)),
    ]


def _err(pred: float, meas: float) -> str:
    return f"{100 * (pred / meas - 1):+.1f}%" if meas else "—"


def main(quick: bool = False) -> None:
    if not torch.cuda.is_available():
        print("bench gpu: no CUDA GPU here; nothing measured (the section in BENCHMARKS.md is left as it is)")
        return
    from memflow.model_file import load_model_file
    from memflow.profile import profile_model
    from memflow.planner import prediction
    from memflow.runner import run as run_plan_file
    from memflow.simulator import Simulator

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

    def graph(source: str, mb: int):
        if (source, mb) not in graphs:
            graphs[(source, mb)] = profile_model(spec, mb, device=cl.device, measure=source == "measured",
                                                 cache=False)
        return graphs[(source, mb)]

    rows, terr, perr = [], {"roofline": [], "measured": []}, {"roofline": [], "measured": []}
    for name, st in _strategies(graph("roofline", BATCH).n)[: 2 if quick else None]:
        mb = st.microbatch_size(BATCH)
        pred = {src: Simulator(graph(src, mb), clusters[src]).evaluate(st, detail=True)
                for src in ("roofline", "measured")}
        g = graph("measured", mb)
        plan = Plan(model_file=str(spec.path), model_name=spec.name, batch_size=BATCH, strategy=st,
                    cluster=cl.to_dict(), node_names=[nd.name for nd in g.nodes], fingerprint=g.fingerprint,
                    predicted=prediction(pred["measured"], BATCH, st))
        try:
            r = run_plan_file(plan, steps=STEPS, check=False).ranks[0]
        except Exception as e:  # noqa: BLE001 - a failed strategy is a row, not the end of the table
            rows.append([name, f"failed: {' '.join(str(e).split())[:120]}"] + [""] * 9)
            continue
        mt, mp = r.measured_step_time_s, r.measured_peak_bytes
        for src in pred:
            terr[src].append(abs(pred[src].step_time_s / mt - 1))
            perr[src].append(abs(pred[src].peak_bytes[0] / mp - 1))
        rows.append([name, f"{mt * 1e3:.1f}",
                     f"{pred['roofline'].step_time_s * 1e3:.1f} ({_err(pred['roofline'].step_time_s, mt)})",
                     f"{pred['measured'].step_time_s * 1e3:.1f} ({_err(pred['measured'].step_time_s, mt)})",
                     f"{mp / 2**20:,.0f}", f"{r['cuda_peak_allocated_bytes'] / 2**20:,.0f}",
                     f"{r['cuda_peak_reserved_bytes'] / 2**20:,.0f}",
                     f"{pred['roofline'].peak_bytes[0] / 2**20:,.0f} ({_err(pred['roofline'].peak_bytes[0], mp)})",
                     f"{pred['measured'].peak_bytes[0] / 2**20:,.0f} ({_err(pred['measured'].peak_bytes[0], mp)})",
                     f"{r['host_peak_bytes'] / 2**20:,.0f}"])

    def med(xs):
        return f"{100 * statistics.median(xs):.1f}%" if xs else "—"

    summary = md_table(["prediction from", "median |error| step time", "worst", "median |error| peak", "worst"], [
        [src, med(terr[src]), f"{100 * max(terr[src]):.1f}%" if terr[src] else "—",
         med(perr[src]), f"{100 * max(perr[src]):.1f}%" if perr[src] else "—"] for src in ("roofline", "measured")])
    body = (f"GPU: {props.name} ({props.total_memory / 2**30:.1f} GiB), CUDA {torch.version.cuda}, one rank "
            f"(NCCL); pinned host link measured at {d2h / 1e9:.1f} GB/s device→host and {h2d / 1e9:.1f} GB/s "
            f"host→device (the preset says {preset.host_link.bandwidth / 1e9:.0f} GB/s). GPT-2 small (full config) at batch {BATCH} × 1024, fp32 (TF32 off, PyTorch's default for "
            f"matmul); {STEPS} steps, median of the last {STEPS - 1}. Predictions: *roofline* = fake-mode trace "
            f"on CPU semantics with times from the `{PRESET}` spec; *measured* = every node timed on this GPU "
            "with CUDA events, its memory traced on real tensors and the measured host link "
            "(`memflow plan --measure`). Accounted peak = live tensor bytes on the GPU, a swapped tensor "
            "counted until its copy to the host has finished (what the simulator predicts); allocated / "
            "reserved = `torch.cuda.max_memory_allocated` / `max_memory_reserved` (the caching allocator's "
            "view: allocated drops at a tensor's free even while a copy still reads it; reserved includes "
            "its cache). Error = predicted / measured − 1.\n\n" + summary + "\n\n" +
            md_table(["strategy", "measured ms", "predicted ms (roofline)", "predicted ms (measured costs)",
                      "accounted peak MiB", "allocated MiB", "reserved MiB", "predicted peak MiB (fake trace)",
                      "predicted peak MiB (measured trace)", "host peak MiB"], rows) + NOTE)
    write_section("gpu", "Prediction vs execution on a GPU", body,
                  command="python -m bench gpu" + (" (quick)" if quick else ""))


if __name__ == "__main__":
    main()
