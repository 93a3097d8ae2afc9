"""Tensor-parallel plans run (issue 24, acceptance 1), with sequence parallelism: GPT-2, BERT and Llama tiny forced to tp 2 on
``cpu-2`` and to tp 2 with dp 2 (and with pp 2) on ``cpu-4``, gloo ranks, 3 steps; per rank the
measured peak live tensor bytes beside the prediction, and the losses beside plain single-process
training over the same pieces of each batch.

``python -m bench tp-runs``.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from memflow.executor import plain_losses

from .bench_fidelity import run_case
from .common import env, md_table, write_section

ROOT = Path(__file__).resolve().parents[1]
CASES = [("gpt2", "tp2"), ("bert", "tp2"), ("llama", "tp2"), ("bert", "tp2-rec-m2"),
         ("gpt2", "dp2-tp2"), ("bert", "dp2-tp2"), ("llama", "dp2-tp2"), ("gpt2", "pp2-tp2"),
         ("gpt2", "dp2-tp2-fsdp"),
         # sequence parallelism's borders: a position table split alike, a gate's partial gradient, a
         # token-mixing node between the blocks (tests/models/sp_mix.py)
         ("sp_mix", "tp2"),
         # a hand-written attention (fused QKV viewed into heads, unbound; dropout off) and T5 (its
         # relative-position bias per head split with the heads)
         ("sac", "tp2"), ("t5", "tp2"),
         # every node selective, every node swapped: the policies and hooks around the collectives
         ("gpt2", "tp2-sel"), ("gpt2", "tp2-swap")]
PATHS = {"sp_mix": "tests/models/sp_mix.py", "sac": "tests/models/sac.py", "t5": "bench/unseen/t5.py"}
MODEL_ENV = {"sac": {"MEMFLOW_SAC_DROPOUT": "0"}}
PIECES = {"dp2-tp2": 2, "tp2-rec-m2": 2, "pp2-tp2": 2, "dp2-tp2-fsdp": 2}  # (the pieces of each batch the ranks train on)
BATCH, STEPS = 8, 3


def main() -> None:
    rows, worst_peak, worst_loss = [], 0.0, 0.0
    with tempfile.TemporaryDirectory(prefix="memflow_tp_") as tmp, env(MEMFLOW_CACHE_DIR=tmp):
        for model, kind in CASES:
            path = str(ROOT / PATHS.get(model, f"examples/{model}.py"))
            got = run_case(path, MODEL_ENV.get(model, {}), BATCH, kind, steps=STEPS, runs=1, warmup=1)
            with env(MEMFLOW_EXAMPLE_SCALE="tiny", **MODEL_ENV.get(model, {})):
                ref = plain_losses(path, BATCH, STEPS, seed=0, pieces=PIECES.get(kind, 1))
            loss_err = max(abs(a - b) / abs(b) for a, b in zip(got[0]["losses"], ref))
            worst_loss = max(worst_loss, loss_err)
            for r in got:
                pe = 100 * (r["pp"] / r["mp"] - 1)
                worst_peak = max(worst_peak, abs(pe))
                rows.append([model, kind, r["rank"], f"{r['mp'] / 2**20:.3f}", f"{r['pp'] / 2**20:.3f}", f"{pe:+.1f}%",
                             f"{loss_err:.1e}" if r["rank"] == 0 else ""])
            print(rows[-1], flush=True)
    body = ("Sequence parallelism is on in every case (the default with tp > 1: the norms and residuals "
            "split by tokens between Megatron's pairs). "
            f"Tiny examples, batch {BATCH}, {STEPS} steps (the first a warm-up), costs measured on this host "
            f"(`cpu-N`, gloo). 'loss rel. err': the largest relative difference of the run's per-step losses "
            f"from plain single-process training's (target 1e-4); peaks: live tensor bytes, MiB (target 5%). "
            f"Worst peak error {worst_peak:.1f}%, worst loss error {worst_loss:.1e}.\n\n" +
            md_table(["model", "strategy", "rank", "measured peak", "predicted peak", "err", "loss rel. err"], rows))
    write_section("tp-runs", "Tensor-parallel runs: losses and peaks against plain training", body)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
