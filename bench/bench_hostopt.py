"""The optimizer step on the host: the simulator's figures (``simulator.hostopt``) against steps
measured.

1. On this host: torch's AdamW stepping CPU tensors (as the executor's host optimizer does) on
   1,000 one-element tensors (the time per tensor) and on one 64 Mi-element tensor (the bytes' rate);
   then the parameters of GPT-2 at tiny and full scale, measured beside what ``host_step_s``
   predicts with the simulator's defaults and with this host's two figures.
2. From the lent H200 machine's run (``bench/runs/gpu-rows.json``, 16 CPU cores): the rate its
   host steps streamed, read off the rows that step on the host (the step's part of the time, less
   what the same run's keep row spent waiting for the GPU and the copies at the measured link).

``python -m bench hostopt``.
"""
from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import torch

from memflow.model_file import load_model_file
from simulator.hostopt import HOST_MEM_BANDWIDTH, HOST_TENSOR_S, host_step_s

from .common import env, md_table, write_section

ROOT = Path(__file__).resolve().parents[1]
ROWS = ROOT / "bench" / "runs" / "gpu-rows.json"


def timed_step(params: list[torch.nn.Parameter], reps: int = 5) -> float:
    """Median seconds of AdamW's step over ``params`` (their gradients set; the state made by a first
    step that is not timed)."""
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(params, lr=1e-4)
    opt.step()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        opt.step()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def state_bytes(params: list[torch.nn.Parameter]) -> int:
    """Parameter, gradient and AdamW's two moments, fp32: 16 bytes an element."""
    return sum(16 * p.numel() for p in params)


def this_host() -> tuple[float, float]:
    """``(seconds per tensor, bytes per second)`` of AdamW on this host's CPU."""
    small = [torch.nn.Parameter(torch.zeros(1)) for _ in range(1000)]
    per_tensor = timed_step(small) / len(small)
    big = [torch.nn.Parameter(torch.zeros(1 << 26))]
    t = timed_step(big, reps=3)
    return per_tensor, state_bytes(big) / max(t - per_tensor, 1e-9)


def gpt2_params(scale: str) -> list[torch.nn.Parameter]:
    with env(MEMFLOW_EXAMPLE_SCALE=scale):
        model = load_model_file(ROOT / "examples" / "gpt2.py", guard=False).build_model()
    return [torch.nn.Parameter(p.detach().clone()) for p in model.parameters() if p.requires_grad]


def h200_rates(elements: int) -> list[list[str]]:
    """Rows of the H200 run (GPT-2 small, ``elements`` trainable elements): the rate of its host steps."""
    if not ROWS.exists():
        return []
    d = json.loads(ROWS.read_text())
    runs = {r["strategy"]: r["runs"]["expandable"] for r in d["rows"] if "expandable" in r["runs"]}
    keep = runs.get("keep")
    if keep is None:
        return []
    wait = keep["measured_parts_s"]["optimizer"]  # the keep row's optimizer part: the GPU's backward finishing
    out = []
    for row in d["rows"]:
        name, run, sd = row["strategy"], runs.get(row["strategy"]), row["strategy_dict"]
        if run is None:
            continue
        offload = sd.get("offload", ["none"])[0]
        on_host = sd.get("optimizer_on_host", [False])[0] or offload != "none"
        if not on_host:
            continue
        nbytes = 16 * elements
        part = run["measured_parts_s"]["optimizer"]
        if "parameters" in offload:  # shards and state on the host: the step copies nothing
            step, how = part, "the step's part (no copies; the GPU idle by then)"
        else:  # gradients out, parameters back at the measured link, after the GPU's backward
            copies = nbytes / 4 / d["d2h"] + nbytes / 4 / d["h2d"]
            step, how = part - wait - copies, (f"the step's part {part * 1e3:.1f} ms less keep's wait "
                                               f"{wait * 1e3:.1f} ms and the copies {copies * 1e3:.1f} ms")
        out.append([name, f"{part * 1e3:.1f}", how, f"{step * 1e3:.1f}", f"{nbytes / step / 1e9:.1f}"])
    return out


def main() -> None:
    per_tensor, rate = this_host()
    rows = []
    for scale in ("tiny", "full"):
        ps = gpt2_params(scale)
        n, nb = len(ps), state_bytes(ps)
        elements = sum(p.numel() for p in ps)  # (the last: GPT-2 small's, what the H200 run trained)
        meas = timed_step(ps, reps=3 if scale == "full" else 5)
        d = host_step_s(n, nb)
        h = host_step_s(n, nb, rate, per_tensor)
        old = nb / 20e9
        rows.append([f"GPT-2 {scale}", str(n), f"{nb / 2**20:,.1f}", f"{meas * 1e3:.2f}",
                     f"{old * 1e3:.2f} ({100 * (old / meas - 1):+.0f}%)",
                     f"{d * 1e3:.2f} ({100 * (d / meas - 1):+.0f}%)", f"{h * 1e3:.2f} ({100 * (h / meas - 1):+.0f}%)"])
        del ps
    body = (
        "torch's optimizers step CPU tensors one at a time (`foreach` is CUDA-only by default), so a host "
        "step costs a time per tensor and its state's bytes at the host's rate: `simulator.hostopt.host_step_s` "
        f"= tensors × {HOST_TENSOR_S * 1e6:.0f} µs + (parameter + gradient + state bytes) / "
        f"{HOST_MEM_BANDWIDTH / 1e9:.0f} GB/s (before: bytes / 20 GB/s, no per-tensor time). "
        f"**This host** (AdamW, median of repeated steps): {per_tensor * 1e6:.1f} µs per tensor "
        f"(1,000 one-element tensors), {rate / 1e9:.1f} GB/s of that accounting (one 64 Mi-element tensor, "
        "16 bytes an element: fp32 parameter, gradient and two moments).\n\n"
        + md_table(["parameters of", "tensors", "state MiB", "measured ms", "predicted ms (before: 20 GB/s)",
                    "predicted ms (defaults)", "predicted ms (this host's two figures)"], rows))
    h = h200_rates(elements)
    if h:
        body += ("\n\n**The lent H200 machine** (16 CPU cores; its run's rows, `bench/runs/gpu-rows.json`): GPT-2 "
                 f"small, {elements / 1e6:.1f} M elements, {16 * elements / 1e6:,.0f} MB of that accounting per step; "
                 "the CPU-timed parts of a CUDA step include waiting for the GPU, so each row's step is read as "
                 "said.\n\n"
                 + md_table(["row", "optimizer part ms", "read as", "host step ms", "GB/s"], h))
    write_section("hostopt", "The optimizer step on the host", body)
