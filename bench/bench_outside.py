"""Plans run on models written from the outside, the way a new user writes a model file (2026-12-02).

Each file in ``bench/outside`` was written for this check, not for the project's own tests: HF encoder-
decoders (Pegasus, M2M100, Switch Transformers' routed experts), a vision encoder with a GPT-2 decoder,
CLIP's two towers, BLOOM (ALiBi) and OPT; torch's own ``nn.Transformer`` returning ``(loss, logits)``; an
EfficientNet-like CNN (in-place SiLU, ``y += x``, squeeze-excite), a feature pyramid whose head is one
module applied at three scales, a tied bidirectional GRU, an FNet block (complex FFT), a SimSiam pair
(one encoder twice, ``detach``), a hand-unrolled ``LSTMCell`` loop. A second round (2026-12-02): a
binarised MLP with a straight-through ``autograd.Function`` and ``BatchNorm1d``, a WaveNet-like stack with
weight-norm parametrizations, LoRA adapters on a frozen HF GPT-2, a convolutional VAE (noise drawn in
``forward``), torch's ``nn.TransformerEncoder`` with a padding mask, ``nn.MultiheadAttention`` cross-attention
from a learned query set (handed on as a view), an LSTM over ``pack_padded_sequence`` (not capturable: its
one line), a small diffusion U-Net (timestep embedding, ``mse_loss``, noise drawn in ``forward``), a model
updating buffers of its own and an ``Embedding(max_norm=...)`` in ``forward``, HF ViTMAE (random masking)
and a channels-last CNN. Most return their loss from ``forward``. Each is planned on ``cpu-2`` at two fractions of plain data parallel's peak and run two steps
under that capacity, as ``python -m bench unseen`` does (:func:`bench.bench_unseen.planned_run`); a model
that cannot be captured gets its one-line error.

``python -m bench outside``.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from memflow.errors import MemflowError

from .bench_unseen import planned_run
from .common import env, md_table, write_section

__all__ = ["main", "run_models"]

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted((ROOT / "bench" / "outside").glob("*.py"))
BATCH_NORM = {"effnet", "simsiam", "binarised", "chlast"}  # statistics over each rank's micro-batch: plain's only at one rank, one micro-batch
RANDOM = {"vae", "diffusion", "vitmae", "visencdec"}  # draw random numbers in forward (noise, masks, GPT-2's dropout): one rank's draws are not plain's
STATEFUL = {"counter"}  # update buffers of their own (and an Embedding's max_norm rows) in forward: once per micro-batch
FRACTIONS = (0.6, 0.35)


def main() -> None:
    run_models(MODELS, "outside", "Plans run on models written from the outside", "python -m bench outside",
               BATCH_NORM, RANDOM, STATEFUL)


def run_models(models: list, section: str, title: str, command: str, batch_norm: set, random: set,
               stateful: set, per_microbatch: set = frozenset(), noisy: dict | None = None) -> None:
    """Plan and run each of ``models`` (see the module docstring) into ``section`` of BENCHMARKS.md; the
    sets name the models whose losses part from plain training's with micro-batches, and why; ``noisy``
    maps a model whose training amplifies float rounding to the measurement that shows it."""
    rows, errors = [], []
    with tempfile.TemporaryDirectory(prefix="memflow_outside_") as tmp, env(MEMFLOW_CACHE_DIR=tmp):
        for path in models:
            for f in FRACTIONS:
                try:
                    rows.append(planned_run(path, f))
                except MemflowError as e:
                    errors.append((path.stem, str(e)))
                    break
    table = []
    for r in rows:
        st = r["strategy"]
        errs = " / ".join(f"{100 * e:+.2f}%" for e in r["errors"]) or "—"
        loss = "—" if r["loss_diff"] is None else "equal" if r["loss_diff"] <= 1e-5 else f"{r['loss_diff']:.1e}"
        if r["model"] in batch_norm and st.dp * st.microbatches > 1 and loss != "equal":
            loss += " (batch norm over each rank's micro-batch)"
        elif r["model"] in random and st.dp * st.microbatches * st.pp > 1 and loss != "equal":
            loss += " (random draws in forward: per micro-batch, from each rank's own generator)"
        elif r["model"] in stateful and st.dp * st.microbatches > 1 and loss != "equal":
            loss += " (its own buffers updated per micro-batch)"
        elif r["model"] in per_microbatch and st.dp * st.microbatches > 1 and loss != "equal":
            loss += " (a loss term nonlinear in each micro-batch's statistics: the router's load balance)"
        elif r["model"] in (noisy or {}) and loss != "equal":
            loss += f" ({noisy[r['model']]})"
        table.append([r["model"], f"{r['frac']:.2f}", "yes" if r["fits"] else "no (run uncapped)", r["summary"],
                      f"out of memory: {r['oom'][:120]}" if r["oom"] else errs, loss])
    errs = [e for r in rows for e in r["errors"]]
    body = ("Models written for this check the way a new user writes a model file (see the module docstring of "
            "`bench/bench_outside.py`), planned on `cpu-2` with each device's memory set to a fraction of plain "
            "data parallel's peak (batch 4, a 1 s search, costs measured on this host) and run two steps under "
            "that capacity (uncapped where nothing fits). Peak error = predicted / measured − 1 per rank; losses "
            "against plain training's at relative 1e-5.\n\n"
            f"{len(rows)} plans on {len({r['model'] for r in rows})} models: "
            f"{sum(1 for r in rows if r['oom'])} ran out of memory; "
            f"{sum(1 for r in rows for x in r['ranks'] if x.predicted_peak_bytes < x.measured_peak_bytes - 4)} "
            f"rank(s) under their prediction by more than 4 bytes ({sum(1 for e in errs if e < -0.01)} by more than "
            f"1%); worst peak error "
            f"{100 * max(errs, key=abs, default=0):+.2f}%; {len(errors)} model(s) not captured.\n\n"
            + md_table(["model", "fraction of plain", "fits", "plan", "peak error per rank", "losses vs plain"],
                       table))
    if errors:
        body += "\n\nNot captured (the user's one line):\n\n" + "\n".join(f"- `{m}`: {e}" for m, e in errors)
    write_section(section, title, body, command=command)


if __name__ == "__main__":
    main()
