"""Measure the link between local processes (gloo over loopback): the α–β of a ``cpu-N`` cluster.

Two processes (``python -m memflow.linkprobe``, a file rendezvous) time
``send``/``recv`` ping-pongs and two-rank ``all_reduce`` calls at several
sizes, one thread each, as the executor's ranks run. Both fit one α–β link
by least squares, with the simulator's own models of the two collectives:

* point-to-point: ``t = α + n / β`` (half a ping-pong);
* ring all-reduce over two ranks: ``t = 2(p−1)·α + 2(p−1)/p · n / β`` = ``2α + n / β``.

The result is cached per host (``$MEMFLOW_CACHE_DIR``); if the probe cannot
run, the approximate :data:`memflow.cluster.GLOO_LOOPBACK` figures are used
with a warning.
"""
from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from .devices import cache_dir
from .fileio import atomic_write_text
from .procs import ended_text, last_line, popen, sigterm_raises, stop, watch

__all__ = ["measured_gloo_link", "fit_alpha_beta", "SIZES"]

SIZES = (4 << 10, 256 << 10, 2 << 20, 8 << 20)
_FORMAT = 1


def fit_alpha_beta(rows: list[tuple[float, float, float]]) -> tuple[float, float]:
    """Least squares over rows ``(latency multiplier, bytes, seconds)`` of ``t = k·α + n/β``.

    Returns ``(α seconds, β bytes/s)``, α clamped at ≥ 0."""
    import numpy as np

    a = np.array([[k, n] for k, n, _ in rows], dtype=float)
    t = np.array([s for _, _, s in rows], dtype=float)
    (alpha, inv_beta), *_ = np.linalg.lstsq(a, t, rcond=None)
    inv_beta = max(float(inv_beta), 1e-15)
    return max(float(alpha), 0.0), 1.0 / inv_beta


def _child(directory: str, rank: int, repeats: int) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{directory}/store", rank=rank, world_size=2)
    rows = []
    for n in SIZES:
        x = torch.ones(n // 4)
        for kind in ("p2p", "allreduce"):
            samples = []
            for r in range(repeats + 2):
                dist.barrier()
                t0 = time.perf_counter()
                if kind == "p2p":  # ping-pong: rank 0 -> 1 -> 0
                    if rank == 0:
                        dist.send(x, 1)
                        dist.recv(x, 1)
                    else:
                        dist.recv(x, 0)
                        dist.send(x, 0)
                    dt = (time.perf_counter() - t0) / 2
                else:
                    dist.all_reduce(x)
                    dt = time.perf_counter() - t0
                if r >= 2:
                    samples.append(dt)
            rows.append((1.0 if kind == "p2p" else 2.0, float(n), statistics.median(samples)))
    if rank == 0:
        tmp = Path(directory) / "rows.json.tmp"
        tmp.write_text(json.dumps(rows))
        os.replace(tmp, Path(directory) / "rows.json")
    dist.barrier()
    dist.destroy_process_group()


def probe(repeats: int = 15, timeout_s: float = 120.0) -> tuple[float, float, list]:
    """Run the two-process probe now: ``(α, β, rows)``. Its processes die with this one (memflow.procs)."""
    with tempfile.TemporaryDirectory(prefix="memflow_link_") as tmp, sigterm_raises():
        env = dict(os.environ, OMP_NUM_THREADS="1")
        procs: list[subprocess.Popen] = []
        try:
            for r in range(2):
                with open(Path(tmp) / f"err{r}.txt", "w") as err:
                    procs.append(popen([sys.executable, "-m", "memflow.linkprobe", tmp, str(r), str(repeats)],
                                       env=env, stdout=subprocess.DEVNULL, stderr=err))
            try:
                failed = watch(procs, timeout_s)
            except TimeoutError as e:
                raise RuntimeError(f"the link probe is {e}") from None
            if failed is not None:
                r, rc = failed
                words = last_line((Path(tmp) / f"err{r}.txt").read_text(errors="replace"))
                raise RuntimeError(f"link probe process {r} {ended_text(rc)}" + (f": {words}" if words else ""))
        finally:
            stop(procs)
        rows = json.loads((Path(tmp) / "rows.json").read_text())
    alpha, beta = fit_alpha_beta(rows)
    return alpha, beta, rows


def measured_gloo_link(*, remeasure: bool = False) -> tuple[float, float] | None:
    """``(bandwidth bytes/s, latency s)`` of this host's loopback gloo link, measured (cached);
    None, with a warning, where the probe cannot run."""
    key = f"{socket.gethostname()}-{os.cpu_count()}cpu"
    path = cache_dir() / f"gloo-link-{key}.json"
    if not remeasure and path.exists():
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
            if d.get("format") == _FORMAT and d.get("key") == key:
                return float(d["bandwidth"]), float(d["latency"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    try:
        alpha, beta, rows = probe()
    except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as e:
        warnings.warn(f"could not measure gloo over loopback ({e}); using approximate link figures", stacklevel=2)
        return None
    try:
        atomic_write_text(path, json.dumps({"format": _FORMAT, "key": key, "measured_at": time.time(),
                                            "bandwidth": beta, "latency": alpha, "rows": rows}, indent=1))
    except OSError as e:
        warnings.warn(f"could not write the link measurement cache {path}: {e}", stacklevel=2)
    return beta, alpha


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
