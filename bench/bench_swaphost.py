"""``python -m bench swaphost``: a swapped node's device and host peaks, predicted against a run, on one rank.

Tiny-scale models (``MEMFLOW_EXAMPLE_SCALE=tiny``) of several shapes (a decoder, a Llama, an LSTM, a GRU,
an encoder-decoder, an MoE, torchvision's ResNet-50 with in-place ReLU), batch 8, on ``cpu-1``, with every
node but the last swapped: the graph profiled on this host (memory traced, no timing), the simulator's
peak device bytes and host bytes, and one run through the executor (two steps after a warm-up). The host
column is what the swap's pack hook copies there (and the batch): one copy per storage a node saves.
"""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ["examples/gpt2.py", "examples/llama.py", "examples/lstm.py", "tests/models/gru.py",
          "tests/models/encdec.py", "examples/moe.py", "examples/resnet50.py"]


def one(path: str, batch: int = 8) -> list:
    from memflow.cluster import Cluster
    from memflow.executor import RunConfig, run_plan
    from memflow.model_file import load_model_file
    from memflow.profile.build import capture_graph
    from memflow.simulator import Simulator
    from memflow.strategy import Strategy

    f = str(ROOT / path)
    g = capture_graph(load_model_file(f), batch, measure=True, repeats=0)
    st = Strategy(dp=1, pp=1, stage_of=[0] * g.n, actions=["swap"] * (g.n - 1) + ["keep"], microbatches=1)
    pred = Simulator(g, Cluster.load("cpu-1")).evaluate(st, detail=True)
    cfg = RunConfig(model_file=f, batch_size=batch, strategy=st, steps=2, warmup=1, device="cpu",
                    node_names=[nd.name for nd in g.nodes], capacity_bytes=None,
                    predicted={"peak_bytes": pred.peak_bytes, "step_time_s": pred.end_s})
    (r,) = run_plan(cfg, nproc=1, timeout_s=300).ranks
    err = lambda p, m: f"{(p / m - 1) * 100:+.2f}%" if m else "—"  # noqa: E731
    return [path, g.n, f"{r.measured_peak_bytes:,}", f"{r.predicted_peak_bytes:,}",
            err(r.predicted_peak_bytes, r.measured_peak_bytes), f"{r.host_peak_bytes:,}", f"{pred.host_bytes[0]:,}",
            err(pred.host_bytes[0], r.host_peak_bytes)]


def main(quick: bool = False) -> None:
    from .common import md_table, write_section

    os.environ["MEMFLOW_EXAMPLE_SCALE"] = "tiny"
    rows = [one(m) for m in (MODELS[:2] if quick else MODELS)]
    body = (" ".join(__doc__.split("\n\n", 1)[1].split()) + "\n\n" + md_table(
        ["model", "nodes", "device peak B (run)", "predicted", "error", "host peak B (run)", "predicted", "error"],
        rows) + "\n\nError = predicted / measured − 1 (negative: under-predicted).")
    write_section("swaphost", "Swap plans: device and host peaks, predicted against a run",
                  body, command="python -m bench swaphost")


if __name__ == "__main__":
    main()
