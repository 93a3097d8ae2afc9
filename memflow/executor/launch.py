"""Launching a planned run with torchrun, and the plain-training reference.

:func:`run_plan` writes the :class:`RunConfig` to a JSON file and runs
``python -m torch.distributed.run ... -m memflow.executor.worker CFG`` as a
subprocess (its output goes to a log file, not the terminal). A failed run
raises :class:`DeviceOutOfMemoryError` or :class:`ExecutionError` with one
line naming the failed rank: from the error JSON each rank writes on an
exception, or, for a rank that died without one (killed, ``os._exit``),
from torchrun's failure summary. Gloo timeouts (``comm_timeout_s``) and
torchrun's stop-the-others-on-failure end a run whose rank died.
"""
from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

from .. import errors, runlog
from ..errors import DeviceOutOfMemoryError, ExecutionError
from ..graph.training import autocast
from ..model_file import load_model_file
from .config import RunConfig
from .report import RunReport, read_report

__all__ = ["run_plan", "plain_losses", "free_port", "completed_report"]

_ROOT = str(Path(__file__).resolve().parents[2])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun_failures(log: str) -> list[tuple[int, str]]:
    """(rank, exit code) pairs from torchrun's failure summary, root cause first."""
    pat = re.compile(r"^\s*rank\s*:\s*(\d+)[^\n]*\n\s*exitcode\s*:\s*(-?\d+)", flags=re.M)
    out = []
    root_at = log.find("Root Cause")
    root = pat.search(log, root_at) if root_at >= 0 else None
    if root:
        out.append((int(root.group(1)), root.group(2)))
    for m in pat.finditer(log):
        f = (int(m.group(1)), m.group(2))
        if f not in out:
            out.append(f)
    return out


# errors a rank sees because another rank died first
_SECONDARY = re.compile(r"Connection (reset|closed)|Broken pipe|timed? ?out|Socket Timeout|peer", re.I)


def _read_report(out_json: str) -> RunReport | None:
    """Rank 0's report in ``out_json`` (None: missing or unreadable)."""
    try:
        with open(out_json) as f:
            return read_report(json.load(f), out_json)
    except (OSError, ValueError, errors.ConfigError):
        return None


def completed_report(out_json: str, world: int) -> RunReport | None:
    """Rank 0's report when the run completed (every rank's record in it, no rank's error file), else None."""
    if glob.glob(glob.escape(out_json) + ".rank*.error.json") or not os.path.exists(out_json):
        return None
    report = _read_report(out_json)
    return report if report is not None and len(report.ranks) == world else None


def _failure(out_json: str, log: str, rc: int, elapsed: float) -> Exception:
    errs = []
    for path in glob.glob(glob.escape(out_json) + ".rank*.error.json"):
        try:
            with open(path) as f:
                errs.append(json.load(f))
        except (OSError, ValueError):
            continue
    oom = [e for e in errs if e.get("type") == "DeviceOutOfMemoryError"]
    if oom:
        e = min(oom, key=lambda e: e.get("time", 0))
        return DeviceOutOfMemoryError(e["message"])
    reported = {e["rank"] for e in errs}
    failures = _torchrun_failures(log)
    silent = [(r, c) for r, c in failures if r not in reported]
    if silent:
        r, code = silent[0]
        return ExecutionError(f"rank {r} died (exit code {code}) without an error report; "
                              f"the run stopped after {elapsed:.1f} s")
    if errs:
        primary = [e for e in errs if not _SECONDARY.search(e.get("message", ""))] or errs
        e = min(primary, key=lambda e: e.get("time", 0))
        msg = e["message"] if e["message"].startswith(f"rank {e['rank']}") else f"rank {e['rank']}: {e['message']}"
        cls = getattr(errors, e.get("type", ""), None)
        if isinstance(cls, type) and issubclass(cls, errors.MemflowError):
            return cls(msg)  # the worker's own error class (plan mismatch, model load, ...)
        return ExecutionError(f"{e['type']} on {msg}")
    tail = " ".join(log.strip().splitlines()[-1:])[:300]
    return ExecutionError(f"the run failed (exit code {rc}) with no rank reporting: {tail}")


def run_plan(config: RunConfig, nproc: int, nnodes: int = 1, node_rank: int = 0,
             rdzv_endpoint: str | None = None, timeout_s: float = 600.0,
             log_path: str | None = None) -> RunReport | None:
    """Run ``config`` on ``nproc`` processes per node; returns rank 0's report.

    Multi-node: ``nnodes`` > 1 with ``rdzv_endpoint`` ``HOST:PORT`` (c10d
    rendezvous); call it once per node. The call on a node without rank 0
    returns None (or rank 0's report when it can see the file). Raises :class:`DeviceOutOfMemoryError` /
    :class:`ExecutionError` (one line, naming the failed rank) on failure.
    """
    if nproc * nnodes != config.world_size:
        raise ExecutionError(
            f"the plan needs dp × pp = {config.world_size} processes, launching {nnodes} node(s) × {nproc}"
        )
    work = tempfile.mkdtemp(prefix="memflow_run_")
    if not config.out_json:
        config = dataclasses.replace(config, out_json=os.path.join(work, "result.json"))
    out_json = config.out_json
    for p in glob.glob(glob.escape(out_json) + ".rank*.error.json"):
        os.remove(p)
    if nnodes == 1 and os.path.exists(out_json):
        os.remove(out_json)
    cfg_path = os.path.join(work, "config.json")
    config.save(cfg_path)
    log_path = log_path or os.path.join(work, f"torchrun_node{node_rank}.log")

    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", "--max-restarts=0",
           "--monitor-interval=0.5"]
    if nnodes > 1:
        if not rdzv_endpoint:
            raise ExecutionError("a multi-node run needs rdzv_endpoint HOST:PORT")
        cmd += [f"--nnodes={nnodes}", f"--node-rank={node_rank}", "--rdzv-backend=c10d",
                f"--rdzv-endpoint={rdzv_endpoint}", "--rdzv-id=memflow"]
    else:
        port = rdzv_endpoint.rsplit(":", 1)[1] if rdzv_endpoint else str(free_port())
        cmd += ["--nnodes=1", "--master-addr=127.0.0.1", f"--master-port={port}"]
    cmd += ["-m", "memflow.executor.worker", cfg_path]

    env = dict(os.environ)
    env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # each rank gets its share of this host's cores, as the planner's CPU profile assumed
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    env.pop("TORCHELASTIC_ERROR_FILE", None)
    env["PYTHONUNBUFFERED"] = "1"
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        try:
            proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=timeout_s)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = None
    elapsed = time.perf_counter() - t0
    text = Path(log_path).read_text(errors="replace")
    if rc is None:
        raise ExecutionError(f"the run did not finish within {timeout_s:.0f} s (log: {log_path})")
    if rc != 0:
        report = completed_report(out_json, config.world_size) if nnodes == 1 else None
        if report is None:
            raise _failure(out_json, text, rc, elapsed) from None
        # every rank's record was gathered and written before this exit: the run itself completed,
        # and a process died tearing down (seen once: gloo, "terminate called without an active exception")
        failed = ", ".join(f"rank {r} (exit code {c})" for r, c in _torchrun_failures(text)) or f"exit code {rc}"
        report.teardown_failure = f"{failed} after the run's report was written (log: {log_path})"
        warnings.warn(f"the run completed, but {report.teardown_failure}", stacklevel=2)
    else:
        report = _read_report(out_json) if os.path.exists(out_json) else None
        if report is None:
            if node_rank == 0:
                raise ExecutionError(f"the run ended without a readable report (log: {log_path})")
            return None
    if node_rank == 0:  # one line per run, from the node that holds rank 0
        runlog.record(config, report)
    return report


def plain_losses(model_file: str, batch_size: int, steps: int, seed: int = 0, device: str = "cpu",
                 dtype: str = "fp32") -> list[float]:
    """The reference: plain single-process eager training, same init and batches as a planned run
    (built and batched on the CPU, then moved to ``device``, as the executor does; ``bf16``: the
    forward under autocast)."""
    spec = load_model_file(model_file)
    torch.manual_seed(seed)
    model = spec.build()
    model.train()
    model.to(device)
    opt = spec.make_optimizer(model.parameters())
    losses = []
    for t in range(steps):
        torch.manual_seed(seed + 1000 + t)
        batch = torch.utils._pytree.tree_map(lambda x: x.to(device) if isinstance(x, torch.Tensor) else x,
                                             spec.batch(batch_size))
        opt.zero_grad(set_to_none=True)
        with autocast(dtype, torch.device(device).type):
            loss = spec.loss(model, batch)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses
