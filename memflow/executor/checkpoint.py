"""Checkpoints with ``torch.distributed.checkpoint``, signed so that only MemFlow's own are loaded.

Every rank saves its stage's parameters and buffers, its (local) optimizer
state and the number of steps done, under keys prefixed by its rank, into
``checkpoint_dir/step_NNNNNN``; rank 0 then signs the complete directory
(:mod:`.signing`). Resuming: the launcher picks the newest complete checkpoint
(:func:`resume_point`), refuses what cannot be resumed (no directory, no
checkpoint, every step already done, a digest missing or wrong) before any
rank starts, and every rank loads that checkpoint in place. Optimizer state
is created first (a zero-gradient step that is undone) so that it has tensors
to load into.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import torch

from ..errors import ConfigError, ExecutionError
from .signing import sign, verify

__all__ = ["save_checkpoint", "load_checkpoint", "latest_checkpoint", "resume_point"]


def _state(rank: int, tensors: list[torch.Tensor], opt_state: dict[str, torch.Tensor], step: torch.Tensor) -> dict:
    sd = {f"rank{rank}.state.{i}": t for i, t in enumerate(tensors)}
    sd.update({f"rank{rank}.optim.{k}": v for k, v in opt_state.items()})
    sd[f"rank{rank}.step"] = step
    return sd


def save_checkpoint(directory: str, steps_done: int, rank: int, tensors: list[torch.Tensor],
                    opt_state: dict[str, torch.Tensor], sign_key: bytes | None = None) -> str:
    """Save this rank's part (collective: every rank calls it); the rank given ``sign_key`` signs the
    whole checkpoint once it is complete."""
    path = os.path.join(directory, f"step_{steps_done:06d}")
    sd = _state(rank, [t.detach() for t in tensors], opt_state, torch.tensor([steps_done], dtype=torch.int64))
    import torch.distributed.checkpoint as dcp  # 0.7 s of imports, paid by a run that checkpoints

    dcp.save(sd, checkpoint_id=path)  # returns on rank 0 once every rank's file and the metadata are written
    if sign_key is not None:
        sign(path, sign_key)
    return path


def latest_checkpoint(directory: str) -> tuple[str, int] | None:
    """The newest complete checkpoint in ``directory`` and its steps done (None: none)."""
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


def resume_point(directory: str | None, steps: int) -> tuple[str, int]:
    """The checkpoint a resumed run of ``steps`` steps continues from, and its steps done: the newest
    complete one in ``directory``, its digest verified. One-line errors for a directory that does not exist
    or holds no checkpoint, a checkpoint that already holds every step, and a digest missing or wrong."""
    if not directory or not Path(directory).is_dir():
        raise ConfigError(f"cannot resume: the checkpoint directory {directory} does not exist")
    found = latest_checkpoint(directory)
    if found is None:
        raise ConfigError(f"cannot resume: {directory} holds no complete checkpoint (step_NNNNNN with .metadata)")
    path, done = found
    if done >= steps:
        raise ConfigError(f"nothing to run: the checkpoint {path} already holds {done} steps, and the run is "
                          f"{steps} steps long (ask for more steps to train further)")
    verify(path)
    return path, done


def _why(e: BaseException) -> str:
    """The innermost cause of a checkpoint error, one line (DCP wraps each rank's error with its traceback)."""
    inner: BaseException = e
    for failure in getattr(e, "failures", {}).values():  # CheckpointException: rank -> (exception, stack)
        inner = failure[0] if isinstance(failure, tuple) else failure
        break
    while inner.__cause__ is not None:
        inner = inner.__cause__
    text = (str(inner).strip().splitlines() or [""])[0][:300]
    return f"{type(inner).__name__}: {text}" if text else type(inner).__name__


def load_checkpoint(path: str, rank: int, tensors: list[torch.Tensor], opt_state: dict[str, torch.Tensor]) -> int:
    """Load checkpoint ``path`` in place (collective); returns its steps done. A checkpoint that does not
    load (damaged, or from another plan) is one line naming it."""
    import torch.distributed.checkpoint as dcp  # see save_checkpoint
    from torch.distributed.checkpoint.api import CheckpointException

    step = torch.zeros(1, dtype=torch.int64)
    try:
        with torch.no_grad():
            dcp.load(_state(rank, [t.detach() for t in tensors], opt_state, step), checkpoint_id=path)
    except (Exception, CheckpointException) as e:  # DCP's own is a BaseException; any: the file and the cause
        raise ExecutionError(f"cannot load the checkpoint {path} (written for another plan?): {_why(e)}") from None
    return int(step.item())
