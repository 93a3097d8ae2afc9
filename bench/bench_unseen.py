"""Plans for models this project was not built on, run: does a plan that says it fits run, and is every
rank's peak where the plan said?

Each model (bench/unseen: a DenseNet, a MobileNetV2, a T5 encoder-decoder, a Mixtral MoE, HF's BART,
Whisper (a convolutional audio front end), Swin (shifted windows), GPT-NeoX (parallel residual, partial
rotary), DistilBERT, ALBERT (one layer's weights at every depth), Qwen2-MoE (routed and shared experts),
Mamba (a selective scan, no attention), a GPT-2 with HF's own gradient checkpointing on, wav2vec2 (a
convolutional feature encoder, a weight-normed positional convolution), Falcon (multi-query, parallel
attention and MLP) and SegFormer (overlapping patch merges, spatially reduced attention); and the
suite's own shapes in tests/models: tied weights across stages, a block reused in depth, an
encoder-decoder, a GRU, a stacked LSTM, HF's ViT and ConvNeXt, whose constructors read tensor values)
is planned on ``cpu-2`` with each device's memory set to a fraction of plain data parallel's peak (a 1 s
search, costs measured on this host), then run for two steps under that capacity (uncapped where nothing
fits). Reported per plan: the strategy, each
rank's predicted / measured peak − 1, and the losses against plain training's (equal where the
model draws no random masks).

``python -m bench unseen [--quick]`` (quick: the first four unseen models at 0.35 only).
"""
from __future__ import annotations

import collections
import dataclasses
import math
import tempfile
from pathlib import Path

from memflow.cluster import Cluster
from memflow.errors import ConfigError, DeviceOutOfMemoryError
from memflow.executor import RunConfig, plain_losses, run_plan
from memflow.graph.build import capture_program
from memflow.model_file import load_model_file
from memflow.planner import plan, resolve_spec
from memflow.profile.build import capture_graph
from memflow.simulator import Simulator
from memflow.strategy import Strategy

from .bench_fidelity import run_case
from .common import env, md_table, write_section

__all__ = ["main", "planned_run", "plain_dp_peak"]

ROOT = Path(__file__).resolve().parents[1]
UNSEEN = [ROOT / "bench" / "unseen" / f"{m}.py" for m in ("densenet", "mobilenet", "t5", "mixtral", "bart", "whisper",
                                                           "swin", "neox", "distilbert", "albert", "qwen2_moe",
                                                           "mamba", "gpt2_checkpointed", "wav2vec2", "falcon",
                                                           "segformer")]
# (vit and convnext: constructors that read tensor values, built in fake mode by memflow.graph.fakebuild)
SHAPES = [ROOT / "tests" / "models" / f"{m}.py" for m in ("tied", "reuse", "encdec", "gru", "stacked_lstm", "vit",
                                                          "convnext")]
RANDOM_MASKS = {"stacked_lstm"}  # dropout between its layers: another draw than plain training's
BATCH_NORM = {"densenet", "mobilenet"}  # statistics over each rank's micro-batch: plain's only at dp 1 × 1 micro-batch
BATCH = 4
FRACTIONS = (0.6, 0.35)


def plain_dp_peak(path: Path, batch: int = BATCH) -> int:
    """Plain data parallel's peak on cpu-2 (dp 2, one micro-batch, every node kept): memory only."""
    g = capture_graph(resolve_spec(str(path)), batch // 2, measure=True, repeats=0)
    return max(Simulator(g, Cluster.load("cpu-2")).evaluate(Strategy.single(g.n, dp=2)).peak_bytes)


def planned_run(path: Path, frac: float, *, batch: int = BATCH, compare_losses: bool = True) -> dict:
    """Plan ``path`` on cpu-2 at ``frac`` of plain data parallel's peak per device (a 1 s search) and run
    it two steps under that capacity (uncapped where nothing fits). Returns the plan (``fits``,
    ``strategy`` and its ``summary``), ``oom`` (the error, where the run ran out of memory), the run's
    ``ranks`` and ``losses``, ``errors`` (each rank's predicted / measured peak − 1) and, with
    ``compare_losses``, ``loss_diff``: the largest relative difference from plain training's losses."""
    cl = Cluster.load("cpu-2").with_memory(int(frac * plain_dp_peak(path, batch)))
    p = plan(str(path), cluster=cl, batch_size=batch, time_budget_s=1.0)
    st, pred = p.strategy, p.predicted
    cfg = RunConfig(model_file=p.model_file, batch_size=batch, strategy=st, steps=2, warmup=1, device="cpu",
                    node_names=list(p.node_names), capacity_bytes=cl.device.memory_bytes if pred.fits else None,
                    predicted={"peak_bytes": pred.peak_bytes, "step_time_s": pred.rank_step_time_s})
    row = dict(model=path.stem, frac=frac, fits=pred.fits, strategy=st, summary=st.summary(), oom="", ranks=[],
               losses=[], errors=[], loss_diff=None)
    try:
        rep = run_plan(cfg, nproc=st.num_devices, timeout_s=300)
    except DeviceOutOfMemoryError as e:
        row["oom"] = str(e)
        return row
    row.update(ranks=rep.ranks, losses=list(rep.losses),
               errors=[r.predicted_peak_bytes / r.measured_peak_bytes - 1 for r in rep.ranks])
    if compare_losses and rep.losses and all(math.isfinite(x) for x in rep.losses):
        want = plain_losses(str(path), batch, len(rep.losses))
        row["loss_diff"] = max(abs(a - b) / abs(b) for a, b in zip(rep.losses, want))
    return row


def tp_run(path: Path, batch: int = 8) -> dict:
    """``path`` forced to tensor parallelism over cpu-2's two ranks (``--tp 2``, the fidelity bench's
    ``tp2`` case: one group, sequence parallelism where the graph allows), three steps: each rank's
    predicted / measured peak − 1, the largest relative difference from plain training's losses, and
    how many nodes each partitioning label covers; or the one-line error where nothing splits."""
    try:
        rows = run_case(str(path), {}, batch, "tp2", steps=3, runs=1, warmup=1)
    except ConfigError as e:
        return dict(model=path.stem, error=str(e))
    want = plain_losses(str(path), batch, 3, seed=0)
    got = rows[0]["losses"]
    spec = dataclasses.replace(load_model_file(path, guard=False), tp=2)
    parts = collections.Counter(capture_program(spec, batch, fake=True)[1].partitioning)
    return dict(model=path.stem, errors=[r["pp"] / r["mp"] - 1 for r in rows],
                loss_diff=max(abs(a - b) / abs(b) for a, b in zip(got, want)), parts=dict(parts))


def main(quick: bool = False) -> None:
    models, fracs = (UNSEEN[:4], (0.35,)) if quick else (UNSEEN + SHAPES, FRACTIONS)
    rows = []
    with tempfile.TemporaryDirectory(prefix="memflow_unseen_") as tmp, env(MEMFLOW_CACHE_DIR=tmp):
        for path in models:
            rows.extend(planned_run(path, f, compare_losses=path.stem not in RANDOM_MASKS) for f in fracs)
    table = []
    for r in rows:
        errs = " / ".join(f"{100 * e:+.2f}%" for e in r["errors"]) or "—"
        st = r["strategy"]
        loss = ("draws dropout masks" if r["model"] in RANDOM_MASKS else
                "—" if r["loss_diff"] is None else "equal" if r["loss_diff"] <= 1e-5 else f"{r['loss_diff']:.1e}")
        if r["model"] in BATCH_NORM and st.dp * st.microbatches > 1 and loss != "equal":
            loss += f" (batch norm over {BATCH // (st.dp * st.microbatches)} of the {BATCH} samples, as any data parallel run without SyncBatchNorm)"
        table.append([r["model"], f"{r['frac']:.2f}", "yes" if r["fits"] else "no (run uncapped)", r["summary"],
                      f"out of memory: {r['oom'][:120]}" if r["oom"] else errs, loss])
    errs = [abs(e) for r in rows for e in r["errors"]]
    ooms = sum(1 for r in rows if r["oom"])
    under = sum(1 for r in rows for e in r["errors"] if e < -0.01)
    body = ("Models planned on `cpu-2` with each device's memory set to a fraction of plain data parallel's peak "
            f"(batch {BATCH}, a 1 s search, costs measured on this host), then run two steps under that "
            "capacity (uncapped where nothing fits). Peak error = predicted / measured − 1 per rank "
            "(negative: under-predicted); losses against plain training's (one process, the whole batch) at "
            "relative 1e-5.\n\n"
            f"{len(rows)} plans: {ooms} ran out of memory; {under} rank(s) more than 1% under their prediction; "
            f"worst |peak error| {100 * max(errs, default=0):.2f}%.\n\n"
            + md_table(["model", "fraction of plain", "fits", "plan", "peak error per rank", "losses vs plain"],
                       table))
    if not quick:
        tps = [tp_run(path) for path in UNSEEN + SHAPES]
        for r in tps:
            if "error" not in r and set(r["parts"]) == {"replicated"}:
                r["error"] = "nothing splits (run replicated here; `memflow plan --tp 2` refuses it in one line)"
        ttable = [[r["model"], "—", "—", "—", r["error"]] if "errors" not in r else
                  [r["model"], ", ".join(f"{k} {v}" for k, v in sorted(r["parts"].items())),
                   " / ".join(f"{100 * e:+.2f}%" for e in r["errors"]),
                   "equal" if r["loss_diff"] <= 1e-5 else f"{r['loss_diff']:.1e}", r.get("error", "")] for r in tps]
        terrs = [abs(e) for r in tps for e in r.get("errors", ())]
        body += ("\n\nThe same models forced to tensor parallelism over cpu-2's two ranks (`--tp 2`: one group, "
                 "sequence parallelism where the graph allows; batch 8, three steps, every node kept): nodes per "
                 "partitioning label, each rank's peak error, losses against plain training's at relative 1e-5; a "
                 f"model with nothing to split gets its one-line error. Worst |peak error| "
                 f"{100 * max(terrs, default=0):.2f}% over {len(terrs)} ranks.\n\n"
                 + md_table(["model", "nodes by partitioning", "peak error per rank", "losses vs plain",
                             "error"], ttable))
    write_section("unseen", "Plans run on models this project was not built on", body,
                  command="python -m bench unseen" + (" --quick" if quick else ""))


if __name__ == "__main__":
    main()
