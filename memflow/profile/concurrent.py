"""Time a step's phases in N processes at once, as N ranks of a cpu-N plan run.

N processes on one host contend for its cores, caches and memory bandwidth,
so a phase timed alone is faster than the same phase inside an N-rank run.
For a ``cpu-N`` cluster the profiler therefore times the step in N processes
started together (``python -m memflow.profile.concurrent``, a file barrier
per micro-batch size), each with its share of the cores and under the
live-bytes counter, and takes the median over processes. Plain subprocesses,
not multiprocessing: a user's script needs no ``__main__`` guard.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from ..errors import CaptureError
from ..graph.build import capture_program
from ..graph.training import autocast, opt_params
from ..model_file import load_model_file
from .timing import measure_phase_times, over_processes

__all__ = ["concurrent_phase_times"]


def _barrier(directory: Path, name: str, rank: int, n: int, timeout_s: float = 600.0) -> None:
    (directory / f"{name}.{rank}").touch()
    t0 = time.time()
    while sum(1 for i in range(n) if (directory / f"{name}.{i}").exists()) < n:
        if time.time() - t0 > timeout_s:
            raise TimeoutError(f"barrier {name}: not every process arrived")
        time.sleep(0.005)


def _child(job: dict, rank: int) -> None:
    torch.set_num_threads(job["threads"])
    spec = load_model_file(job["model_file"])
    d = Path(job["dir"])
    out = {}
    for b in job["sizes"]:
        captured, program, _, model = capture_program(spec, b, granularity=job["granularity"], dtype=job["dtype"],
                                                      fake=False)
        opt = spec.make_optimizer(opt_params(model, captured.split))
        with autocast(job["dtype"]):
            measure_phase_times(program, captured.flat_inputs, opt, repeats=1, warmup=1, accounted=True)
            _barrier(d, f"b{b}", rank, job["n"])  # every process times this size at the same moment
            keep = measure_phase_times(program, captured.flat_inputs, opt, repeats=job["repeats"], warmup=0,
                                       accounted=True)
            measure_phase_times(program, captured.flat_inputs, opt, repeats=1, warmup=0, swap_all=True)
            _barrier(d, f"s{b}", rank, job["n"])  # and swapped, every node, as the CPU executor swaps
            swap = measure_phase_times(program, captured.flat_inputs, opt, repeats=job["repeats"], warmup=0,
                                       swap_all=True)
            out[b] = {"keep": keep, "swap": swap, "steady": keep.steady and swap.steady}
    tmp = d / f"out{rank}.json.tmp"
    tmp.write_text(json.dumps(out))
    os.replace(tmp, d / f"out{rank}.json")


def concurrent_phase_times(spec: Any, sizes: list[int], nprocs: int, *, granularity: Any = "auto",
                           dtype: str = "fp32", repeats: int = 7,
                           timeout_s: float = 900.0) -> dict[int, dict[str, list[float]]]:
    """Per micro-batch size: each phase's median seconds over ``nprocs`` concurrent processes,
    ``{"keep": [...], "swap": [...]}`` (swap: every node swapped as the CPU executor swaps)."""
    threads = max(1, (os.cpu_count() or 1) // nprocs)
    with tempfile.TemporaryDirectory(prefix="memflow_prof_") as tmp:
        job = dict(model_file=str(spec.path), sizes=list(sizes), granularity=granularity, dtype=dtype,
                   repeats=repeats, threads=threads, n=nprocs, dir=tmp)
        (Path(tmp) / "job.json").write_text(json.dumps(job))
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        procs = [subprocess.Popen([sys.executable, "-m", "memflow.profile.concurrent", tmp, str(r)], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for r in range(nprocs)]
        errs = []
        for p in procs:
            try:
                _, err = p.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
            if p.returncode:
                rc = p.returncode
                why = f"killed by signal {-rc} (out of host memory?)" if rc < 0 else f"exit status {rc}"
                errs.append((err or "").strip().splitlines()[-1:] or [f"a timing process ended with no message, {why}"])
        if errs:
            for p in procs:
                p.kill()
            raise CaptureError(f"concurrent CPU profiling failed: {errs[0][0][:300]}")
        results = [json.loads((Path(tmp) / f"out{r}.json").read_text()) for r in range(nprocs)]
    out = {}
    for b in sizes:
        out[b] = {}
        for what in ("keep", "swap"):
            out[b][what] = over_processes([r[str(b)][what] for r in results], [r[str(b)]["steady"] for r in results])
    return out


if __name__ == "__main__":
    _dir, _rank = Path(sys.argv[1]), int(sys.argv[2])
    _child(json.loads((_dir / "job.json").read_text()), _rank)
