"""Plain single-process training's losses (:func:`memflow.executor.plain_losses`), computed once a session.

Many tests compare a run's losses with plain training's for the same model file, batch, seed and
settings (GPT-2 tiny at batch 8 over 3 steps in six of them); each computation costs a model build
and its library imports. A reference is kept per model file (path and contents), batch, seed,
device, precision, pieces and ``MEMFLOW_*`` environment (what the model files read), and computed
for at least :data:`MIN_STEPS` steps: the first n losses of a longer reference are the n-step
reference's to the bit (the model is built under ``seed``, and step t's batch drawn under
``seed + 1000 + t``, whatever comes after), so one computation serves every shorter request.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from memflow.executor import plain_losses as compute

__all__ = ["plain_losses", "MIN_STEPS"]

MIN_STEPS = 4

_DONE: dict[tuple, list[float]] = {}


def plain_losses(model_file: str, batch_size: int, steps: int, seed: int = 0, device: str = "cpu",
                 dtype: str = "fp32", pieces: int = 1) -> list[float]:
    """:func:`memflow.executor.plain_losses`'s losses, from this session's reference where it has one."""
    path = Path(model_file).resolve()
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("MEMFLOW_") and k != "MEMFLOW_CACHE_DIR"))
    key = (str(path), hashlib.sha256(path.read_bytes()).hexdigest(), batch_size, seed, device, dtype, pieces, env)
    have = _DONE.get(key, [])
    if len(have) < steps:
        have = _DONE[key] = compute(str(path), batch_size, max(steps, MIN_STEPS), seed=seed, device=device,
                                    dtype=dtype, pieces=pieces)
    return list(have[:steps])
