"""ZeRO-3 in bf16 on cpu-N: the units' cast-only parameters gathered in bf16 (issue 23's mixed precision).

Tiny GPT-2, Llama and BERT under bf16 autocast, ZeRO-3 plans forced (kept; every other node recomputed
over two micro-batches; two pipeline stages of two data-parallel ranks; the shards, gradients and
optimizer on the host, over two ranks and on one), each planned, predicted and
run (3 steps, gloo) by :func:`bench.bench_fidelity.run_case`. Per rank: the measured peak against the
prediction, and what the same plan is predicted to hold with fp32 gathers (the simulator on the same
graph without its cast parameters: the model that predicted the fp32-gather runs to within 0.03%);
per case the largest relative difference of its losses from plain single-process bf16 training's.

``python -m bench bf16`` (``quick``: the first case).
"""
from __future__ import annotations

import tempfile

from memflow.cluster import Cluster
from memflow.planner import GraphSource, resolve_spec

from .bench_fidelity import _strategy, run_case
from .common import ROOT, env, md_table, write_section

CASES = [("gpt2", "dp2-fsdp"), ("llama", "dp2-fsdp"), ("bert", "dp2-fsdp"), ("gpt2", "dp2-fsdp-rec-m2"),
         ("llama", "dp2-fsdp-rec-m2"), ("llama", "dp2-pp2-fsdp"), ("bert", "dp2-pp2-fsdp"),
         ("gpt2", "dp2-fsdp-offload"), ("gpt2", "offload"), ("bert", "dp2-pp2-fsdp-offload")]
BATCH = 8
# models the project was not built on (bench/unseen) and the suite's odd shapes (tests/models), each ZeRO-3
# kept, recomputed every other node over two micro-batches, and with the parameters on the host
UNSEEN = ["bench/unseen/t5.py", "bench/unseen/bart.py", "bench/unseen/mixtral.py", "bench/unseen/albert.py",
          "bench/unseen/qwen2_moe.py", "bench/unseen/whisper.py", "bench/unseen/neox.py", "bench/unseen/mamba.py",
          "bench/unseen/swin.py", "tests/models/tied.py", "tests/models/reuse.py", "tests/models/encdec.py",
          "tests/models/gru.py", "tests/models/frozen_lm.py", "tests/models/odd_cnn.py"]
UNSEEN_KINDS = ["dp2-fsdp", "dp2-fsdp-rec-m2", "dp2-fsdp-offload"]


def _fp32_gathers(model: str, kind: str) -> list[int]:
    """Per rank, the plan's predicted peak with every unit gathered in fp32."""
    from simulator import Simulator

    path = str(ROOT / "examples" / f"{model}.py")
    probe = _strategy(kind, 2)
    cl = Cluster.load(f"cpu-{probe.num_devices}")  # (as run_case plans it)
    with env(MEMFLOW_EXAMPLE_SCALE="tiny"):
        g = GraphSource(resolve_spec(path), cl, dtype="bf16")(BATCH // (probe.dp * probe.microbatches))
    st = _strategy(kind, g.n)
    plain = g.__class__.from_dict({**g.to_dict(), "cast_params": []})
    return Simulator(plain, cl).evaluate(st).peak_bytes


def main(quick: bool = False) -> None:
    from tests.reference import plain_losses

    rows = []
    with tempfile.TemporaryDirectory(prefix="memflow_bf16_") as tmp, env(MEMFLOW_CACHE_DIR=tmp):
        for model, kind in CASES[:1] if quick else CASES:
            path = str(ROOT / "examples" / f"{model}.py")
            got = run_case(path, {}, BATCH, kind, steps=3, runs=1, warmup=1, dtype="bf16")
            fp32 = _fp32_gathers(model, kind)
            with env(MEMFLOW_EXAMPLE_SCALE="tiny"):
                ref = plain_losses(path, BATCH, 3, seed=0, dtype="bf16",
                                   **({"pieces": 4} if "pp2" in kind else {}))
            dl = max(abs(a - b) / abs(b) for a, b in zip(got[0]["losses"], ref))
            for r in got:
                rank = r["rank"]
                rows.append([model, kind, rank, f"{r['mp']:,}", f"{r['pp']:,}", f"{100 * (r['pp'] / r['mp'] - 1):+.2f}%",
                             f"{fp32[rank]:,}", f"{100 * (1 - r['mp'] / fp32[rank]):.1f}%", f"{dl:.1e}"])
                print(" | ".join(str(x) for x in rows[-1]), flush=True)
    unseen = []
    if not quick:
        with tempfile.TemporaryDirectory(prefix="memflow_bf16_") as tmp, env(MEMFLOW_CACHE_DIR=tmp):
            for path in UNSEEN:
                for kind in UNSEEN_KINDS:
                    try:
                        got = run_case(str(ROOT / path), {}, 4, kind, steps=3, runs=1, warmup=1, dtype="bf16")
                    except Exception as e:  # noqa: BLE001 - a failure is a row of the table
                        unseen.append([path, kind, "—", "—", f"failed: {type(e).__name__}: {str(e)[:120]}"])
                        print(" | ".join(unseen[-1]), flush=True)
                        continue
                    errs = [100 * (r["pp"] / r["mp"] - 1) for r in got]
                    unseen.append([path, kind, f"{max(r['mp'] for r in got):,}", f"{min(errs):+.2f}…{max(errs):+.2f}%",
                                   " ".join(f"{x:.4f}" for x in got[0]["losses"])])
                    print(" | ".join(unseen[-1]), flush=True)
    body = ("Tiny examples under bf16 autocast, ZeRO-3 forced, on `cpu-N` (gloo), 3 steps each: every rank's "
            "measured peak live tensor bytes against its prediction, and the same plan's predicted peak with "
            "fp32 gathers (what it held before: autocast's unsharded bf16 copy of every cast weight saved "
            "for the backward, and the units gathered whole in fp32). 'losses': the largest relative "
            "difference from plain single-process bf16 training over the same batches (the pipeline case: "
            "over its four pieces).\n\n" +
            md_table(["model", "plan", "rank", "measured B", "predicted B", "error", "fp32 gathers predicted B",
                      "saved", "losses"], rows) +
            ("\n\nModels this project was not built on (bench/unseen) and the suite's odd shapes (tests/models), "
             "batch 4 over two ranks, the same three ZeRO-3 plans in bf16: the largest rank's measured peak, "
             "every rank's prediction error, the losses of the 3 steps.\n\n" +
             md_table(["model", "plan", "measured peak B", "error per rank", "losses"], unseen) if unseen else ""))
    write_section("bf16", "ZeRO-3 in bf16: cast-only parameters gathered in bf16", body,
                  command="python -m bench bf16" + (" (quick)" if quick else ""))


if __name__ == "__main__":
    main()
