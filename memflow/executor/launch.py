"""Launching a planned run, and the plain-training reference.

:func:`run_plan` writes the :class:`RunConfig` to a JSON file in a work
directory and starts ``python -u -m memflow.executor.worker CFG`` once per
rank: on one machine directly, with torchrun's environment and the
rendezvous store hosted here on a socket bound before any rank starts
(:func:`_direct`); on several machines under torchrun (``python -m
memflow.executor.agent``, its stores bound to the addresses they serve:
:mod:`.agent`). The processes die with this one
(:mod:`memflow.procs`); their output goes to a log file, not the
terminal, and the ranks' progress events reach the ``progress`` callback as
they happen (:mod:`.progress`). A failed run raises
:class:`DeviceOutOfMemoryError` or :class:`ExecutionError` with one line
naming the failed rank: from the error JSON each rank writes on an exception,
or, for a rank that died without one (killed, ``os._exit``), from its exit
status (torchrun's failure summary on several machines). Gloo timeouts
(``comm_timeout_s``) and stopping the others when one fails end a run whose
rank died. The work directory is
removed afterwards, unless the run failed in a way only its log explains
(the error then says where it is). ``--resume`` is checked here, before any
rank starts (:func:`.checkpoint.resume_point`).
"""
from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Callable

import torch

from .. import errors, runlog
from ..forkserver import connect as served
from ..errors import DeviceOutOfMemoryError, ExecutionError
from ..graph.training import autocast
from ..model_file import flatten, load_model_file
from ..procs import ended_text, exit_text, popen, sigterm_raises, stop, watch
from .agent import STORE_FD_ENV, listening_socket
from .checkpoint import resume_point
from .config import RunConfig
from .progress import ProgressTail
from .report import RunReport, read_report
from .signing import key

__all__ = ["run_plan", "plain_losses", "free_port", "completed_report"]

_ROOT = str(Path(__file__).resolve().parents[2])


def free_port() -> int:
    """A port free now on 127.0.0.1 (another process may take it before it is used: multi-node
    endpoints are the user's to choose; a one-machine run binds its own, see :mod:`.agent`)."""
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


def _failure(out_json: str, log: str, failures: list[tuple[int, str]], rc: int, elapsed: float,
             log_path: str) -> tuple[Exception, bool]:
    """The run's error, and whether its log is needed to understand it (kept, and named in the message).
    ``failures``: the (rank, exit code) pairs of the ranks that failed, the first to fail first."""
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
        return DeviceOutOfMemoryError(e["message"]), False
    reported = {e["rank"] for e in errs}
    silent = [(r, c) for r, c in failures if r not in reported]
    if silent:
        r, code = silent[0]
        return ExecutionError(f"rank {r} {ended_text(int(code))} without an error report; the run stopped after "
                              f"{elapsed:.1f} s "
                              f"(log: {log_path})"), True
    if errs:
        primary = [e for e in errs if not _SECONDARY.search(e.get("message", ""))] or errs
        e = min(primary, key=lambda e: e.get("time", 0))
        msg = e["message"] if e["message"].startswith(f"rank {e['rank']}") else f"rank {e['rank']}: {e['message']}"
        cls = getattr(errors, e.get("type", ""), None)
        if isinstance(cls, type) and issubclass(cls, errors.MemflowError):
            return cls(msg), False  # the worker's own error class (plan mismatch, model load, ...)
        return ExecutionError(f"{e['type']} on {msg} (log: {log_path})"), True
    tail = " ".join(log.strip().splitlines()[-1:])[:300]
    return ExecutionError(f"the run failed ({exit_text(rc)}) with no rank reporting: {tail} (log: {log_path})"), True


def _loopback_interface() -> str | None:
    try:
        return next((name for _, name in socket.if_nameindex() if name in ("lo", "lo0")), None)
    except OSError:
        return None


def run_plan(config: RunConfig, nproc: int, nnodes: int = 1, node_rank: int = 0,
             rdzv_endpoint: str | None = None, timeout_s: float = 600.0,
             log_path: str | None = None, progress: Callable[[str], None] | None = None) -> RunReport | None:
    """Run ``config`` on ``nproc`` processes per node; returns rank 0's report.

    Multi-node: ``nnodes`` > 1 with ``rdzv_endpoint`` ``HOST:PORT`` (c10d
    rendezvous, its stores bound to that address and to this node's); call it once
    per node. The call on a node without rank 0 returns None (or rank 0's report
    when it can see the file). One machine: the rendezvous store listens on
    127.0.0.1 only, on a port bound before the launch (no race for it). Raises
    :class:`DeviceOutOfMemoryError` / :class:`ExecutionError` (one line, naming the
    failed rank) on failure, a ConfigError for a ``resume`` that cannot be. ``progress``
    receives lines as the run goes (launch, ranks ready, every step's loss and time).
    """
    if nproc * nnodes != config.world_size:
        raise ExecutionError(
            f"the plan needs dp × pp = {config.world_size} processes, launching {nnodes} node(s) × {nproc}"
        )
    if nnodes > 1 and not rdzv_endpoint:
        raise ExecutionError("a multi-node run needs rdzv_endpoint HOST:PORT")
    if config.resume and not config.resume_from:
        config = dataclasses.replace(config, resume_from=resume_point(config.checkpoint_dir, config.steps)[0])
    if config.checkpoint_dir and config.checkpoint_every:
        key()  # made here, before the ranks that sign with it start
    work = tempfile.mkdtemp(prefix="memflow_run_")
    keep = False
    try:
        config = dataclasses.replace(config, out_json=config.out_json or os.path.join(work, "result.json"),
                                     progress_file=config.progress_file or os.path.join(work, "progress.jsonl"))
        out_json = config.out_json
        for p in glob.glob(glob.escape(out_json) + ".rank*.error.json"):
            os.remove(p)
        if nnodes == 1 and os.path.exists(out_json):
            os.remove(out_json)
        cfg_path = os.path.join(work, "config.json")
        config.save(cfg_path)
        log_path = log_path or os.path.join(work, f"torchrun_node{node_rank}.log")
        if nnodes == 1:
            rc, elapsed, failures = _direct(config, cfg_path, nproc, rdzv_endpoint, timeout_s, log_path, progress)
            text = Path(log_path).read_text(errors="replace")
        else:
            rc, elapsed = _torchrun(config, cfg_path, nproc, nnodes, node_rank, rdzv_endpoint, timeout_s, log_path,
                                    progress)
            text = Path(log_path).read_text(errors="replace")
            failures = _torchrun_failures(text)
        if rc is None:
            keep = True
            raise ExecutionError(f"the run did not finish within {timeout_s:.0f} s (log: {log_path})")
        if rc != 0:
            report = completed_report(out_json, config.world_size) if nnodes == 1 else None
            if report is None:
                err, keep = _failure(out_json, text, failures, rc, elapsed, log_path)
                raise err from None
            # every rank's record was gathered and written before this exit: the run itself completed,
            # and a process died tearing down (seen once: gloo, "terminate called without an active exception")
            failed = ", ".join(f"rank {r} ({exit_text(int(c))})" for r, c in failures) \
                or exit_text(rc)
            keep = True
            report.teardown_failure = f"{failed} after the run's report was written (log: {log_path})"
            warnings.warn(f"the run completed, but {report.teardown_failure}", stacklevel=2)
        else:
            report = _read_report(out_json) if os.path.exists(out_json) else None
            if report is None:
                if node_rank == 0:
                    keep = True
                    raise ExecutionError(f"the run ended without a readable report (log: {log_path})")
                return None
        if node_rank == 0:  # one line per run, from the node that holds rank 0
            runlog.record(config, report)
        return report
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def _rank_env(nproc: int, host: str, port: int) -> dict[str, str]:
    """The environment every rank of a one-machine run gets (each adds its RANK and LOCAL_RANK):
    torchrun's variables, the rendezvous store hosted by this process (``TORCHELASTIC_USE_AGENT_STORE``:
    the ranks connect to it as clients), gloo on loopback, and each rank's share of the cores."""
    env = dict(os.environ)
    env.pop(STORE_FD_ENV, None)
    env.pop("TORCHELASTIC_ERROR_FILE", None)
    env.update(WORLD_SIZE=str(nproc), LOCAL_WORLD_SIZE=str(nproc), GROUP_RANK="0", GROUP_WORLD_SIZE="1",
               ROLE_NAME="default", ROLE_WORLD_SIZE=str(nproc), MASTER_ADDR=host, MASTER_PORT=str(port),
               TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RESTART_COUNT="0",
               TORCHELASTIC_MAX_RESTARTS="0", TORCHELASTIC_RUN_ID="memflow", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    lo = _loopback_interface()
    if lo and "GLOO_SOCKET_IFNAME" not in env:
        env["GLOO_SOCKET_IFNAME"] = lo  # the ranks' gloo pairs listen on loopback only
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    cuda_alloc_conf(env)
    return env


def cuda_alloc_conf(env: dict[str, str]) -> None:
    """On CUDA the ranks' caching allocator maps *expandable segments* (2 MiB pages for small blocks, 20 MiB
    for large ones) unless the user set the allocator's configuration: a step's reserved memory is then its
    live bytes rounded up to pages, not a pool of fixed-size segments each partly used
    (:mod:`memflow.gpumem`, measured in BENCHMARKS.md's GPU section). No effect on the CPU."""
    if "PYTORCH_CUDA_ALLOC_CONF" not in env and "PYTORCH_ALLOC_CONF" not in env:
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"


def _direct(config: RunConfig, cfg_path: str, nproc: int, rdzv_endpoint: str | None, timeout_s: float,
            log_path: str, progress: Callable[[str], None] | None) -> tuple[int | None, float, list[tuple[int, str]]]:
    """One machine: start the ``nproc`` ranks here, without torchrun's agent process (a Python and a torch
    import less before any rank starts, ~1.5 s of every run). This process hosts the rendezvous store on a
    socket bound to 127.0.0.1 (or ``rdzv_endpoint``) before any rank starts; the ranks die with it; when
    one fails the others are stopped (SIGTERM, then SIGKILL after 10 s), as torchrun does. Returns (return
    code or None on timeout, seconds, the failed ranks' (rank, exit code), the first to fail first)."""
    import torch.distributed as dist

    host, port = rdzv_endpoint.rsplit(":", 1) if rdzv_endpoint else ("127.0.0.1", "0")
    try:
        sock = listening_socket(host, int(port))
    except (OSError, ValueError) as e:
        raise ExecutionError(f"cannot listen on {host}:{port} for the run's rendezvous: {e}") from None
    tail = ProgressTail(config.progress_file, progress)
    t0 = time.perf_counter()
    procs: list[subprocess.Popen] = []
    failures: list[tuple[int, str]] = []
    rc: int | None = 0
    store = None
    try:
        port_n = sock.getsockname()[1]
        store = dist.TCPStore(host, port_n, nproc, True, timedelta(seconds=max(60.0, timeout_s)),
                              wait_for_workers=False, master_listen_fd=sock.fileno())
        sock.detach()  # the store owns the listening socket now (and closes it)
        env = _rank_env(nproc, host, port_n)
        if progress:
            progress(f"launching {nproc} rank(s)")
        cmd = [sys.executable, "-u", "-m", "memflow.executor.worker", cfg_path]
        with open(log_path, "w") as log, sigterm_raises():
            try:
                for r in range(nproc):
                    renv = {**env, "RANK": str(r), "LOCAL_RANK": str(r), "ROLE_RANK": str(r)}
                    # a warm fork server where one is named (memflow.forkserver), else a new process
                    procs.append(served(cmd, renv, log_path, log_path)
                                 or popen(cmd, death_signal=signal.SIGKILL, stdout=log, stderr=subprocess.STDOUT,
                                          env=renv))
                try:
                    first = watch(procs, timeout_s, poll_s=0.05, tick=tail)
                except TimeoutError:
                    rc, first = None, None
                if first is not None:  # (the ranks that failed by then; those stopped below are not failures)
                    rc = first[1]
                    # a rank that dies takes its peers down within milliseconds (their collectives fail), and
                    # the peer's exit may be seen first: let the others' ends arrive before naming the cause
                    settle = time.monotonic() + 2.0
                    while time.monotonic() < settle and any(p.poll() is None for p in procs):
                        time.sleep(0.02)
                    failures.append((first[0], str(first[1])))
                    failures += [(r, str(p.returncode)) for r, p in enumerate(procs)
                                 if r != first[0] and p.returncode not in (None, 0)]
                tail()
            finally:
                stop(procs, grace_s=10.0)
    finally:
        del store
        if sock.fileno() >= 0:
            sock.close()
    return rc, time.perf_counter() - t0, failures


def _torchrun(config: RunConfig, cfg_path: str, nproc: int, nnodes: int, node_rank: int, rdzv_endpoint: str | None,
              timeout_s: float, log_path: str, progress: Callable[[str], None] | None) -> tuple[int | None, float]:
    """Run torchrun (our agent) to its end: (return code or None on timeout, seconds). It is stopped, with
    its ranks, on every way out (Ctrl-C and SIGTERM included) and dies with this process."""
    cmd = [sys.executable, "-m", "memflow.executor.agent", f"--nproc-per-node={nproc}", "--max-restarts=0",
           "--monitor-interval=0.5"]
    env = dict(os.environ)
    sock = None
    if nnodes > 1:
        cmd += [f"--nnodes={nnodes}", f"--node-rank={node_rank}", "--rdzv-backend=c10d",
                f"--rdzv-endpoint={rdzv_endpoint}", "--rdzv-id=memflow"]
    else:
        host, port = rdzv_endpoint.rsplit(":", 1) if rdzv_endpoint else ("127.0.0.1", "0")
        try:
            sock = listening_socket(host, int(port))
        except (OSError, ValueError) as e:
            raise ExecutionError(f"cannot listen on {host}:{port} for the run's rendezvous: {e}") from None
        cmd += ["--nnodes=1", f"--master-addr={host}", f"--master-port={sock.getsockname()[1]}"]
        env[STORE_FD_ENV] = str(sock.fileno())
        lo = _loopback_interface()
        if lo and "GLOO_SOCKET_IFNAME" not in env:
            env["GLOO_SOCKET_IFNAME"] = lo  # the ranks' gloo pairs listen on loopback only
    cmd += ["-m", "memflow.executor.worker", cfg_path]
    env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # each rank gets its share of this host's cores, as the planner's CPU profile assumed
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    env.pop("TORCHELASTIC_ERROR_FILE", None)
    env["PYTHONUNBUFFERED"] = "1"
    cuda_alloc_conf(env)
    tail = ProgressTail(config.progress_file, progress)
    if progress:
        where = f" (node {node_rank} of {nnodes})" if nnodes > 1 else ""
        progress(f"launching {nproc} rank(s){where} with torchrun")
    t0 = time.perf_counter()
    proc = None
    with open(log_path, "w") as log, sigterm_raises():
        try:
            proc = popen(cmd, death_signal=signal.SIGTERM, stdout=log, stderr=subprocess.STDOUT, env=env,
                         pass_fds=(sock.fileno(),) if sock else ())
            if sock is not None:
                sock.close()  # the agent holds it now
            try:
                watch([proc], timeout_s, poll_s=0.1, tick=tail)
                rc = proc.returncode
            except TimeoutError:
                rc = None
            tail()
        finally:
            if sock is not None:
                sock.close()
            if proc is not None:
                stop([proc], grace_s=10.0)
    return rc, time.perf_counter() - t0


def plain_losses(model_file: str, batch_size: int, steps: int, seed: int = 0, device: str = "cpu",
                 dtype: str = "fp32", pieces: int = 1) -> list[float]:
    """The reference: plain single-process eager training, same init and batches as a planned run
    (built and batched on the CPU, then moved to ``device``, as the executor does; ``bf16``: the
    forward under autocast).

    ``pieces``: each step's batch split into that many equal contiguous pieces of rows (a run's
    data-parallel ranks × micro-batches take exactly these), the loss the mean of the pieces' losses
    and its gradient accumulated over them: what data parallelism and micro-batching compute. It equals
    the whole batch's loss where the loss is a mean over equally many terms per row; a mean over the
    rows' valid tokens (a masked LM's labels) differs, and a run's losses equal this one's."""
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
        if pieces == 1:
            with autocast(dtype, torch.device(device).type):
                loss = spec.loss(model, batch)
            loss.backward()
            total = float(loss.detach())
        else:
            flat, tree = flatten(batch)
            total = 0.0
            for i in range(pieces):
                part = [t.chunk(pieces)[i] if t.dim() > 0 and t.shape[0] == batch_size else t for t in flat]
                with autocast(dtype, torch.device(device).type):
                    loss = spec.loss(model, torch.utils._pytree.tree_unflatten(part, tree)) / pieces
                loss.backward()
                total += float(loss.detach())
        opt.step()
        losses.append(total)
    return losses
