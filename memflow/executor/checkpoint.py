"""Checkpoints with ``torch.distributed.checkpoint``.

Every rank saves its stage's parameters and buffers, its (local) optimizer
state and the number of steps done, under keys prefixed by its rank, into
``checkpoint_dir/step_NNNNNN``; resuming loads the newest complete one in
place. Optimizer state is created first (a zero-gradient step that is
undone) so that it has tensors to load into.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp

__all__ = ["save_checkpoint", "load_latest", "latest_checkpoint"]


def _state(rank: int, tensors: list[torch.Tensor], opt_state: dict[str, torch.Tensor], step: torch.Tensor) -> dict:
    sd = {f"rank{rank}.state.{i}": t for i, t in enumerate(tensors)}
    sd.update({f"rank{rank}.optim.{k}": v for k, v in opt_state.items()})
    sd[f"rank{rank}.step"] = step
    return sd


def save_checkpoint(directory: str, steps_done: int, rank: int, tensors: list[torch.Tensor],
                    opt_state: dict[str, torch.Tensor]) -> str:
    path = os.path.join(directory, f"step_{steps_done:06d}")
    sd = _state(rank, [t.detach() for t in tensors], opt_state, torch.tensor([steps_done], dtype=torch.int64))
    dcp.save(sd, checkpoint_id=path)
    return path


def latest_checkpoint(directory: str) -> tuple[str, int] | None:
    best = None
    p = Path(directory)
    if not p.is_dir():
        return None
    for d in p.iterdir():
        m = re.fullmatch(r"step_(\d+)", d.name)
        if m and (d / ".metadata").exists():
            n = int(m.group(1))
            if best is None or n > best[1]:
                best = (str(d), n)
    return best


def load_latest(directory: str, rank: int, tensors: list[torch.Tensor], opt_state: dict[str, torch.Tensor]) -> int:
    """Load the newest checkpoint in place; returns the steps done (0: none found)."""
    found = latest_checkpoint(directory)
    if found is None:
        return 0
    path, _ = found
    step = torch.zeros(1, dtype=torch.int64)
    with torch.no_grad():
        sd = _state(rank, [t.detach() for t in tensors], opt_state, step)
        dcp.load(sd, checkpoint_id=path)
    return int(step.item())
