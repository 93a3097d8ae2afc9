"""Time a step's phases in N processes at once, as N ranks of a cpu-N plan run.

N processes on one host contend for its cores, caches and memory bandwidth,
so a phase timed alone is faster than the same phase inside an N-rank run.
For a ``cpu-N`` cluster the profiler therefore times the step in processes
started together (``python -m memflow.profile.concurrent``, a file barrier
per micro-batch size), each with its share of the cores and under the
live-bytes counter, and takes the median over processes. Plain subprocesses,
not multiprocessing: a user's script needs no ``__main__`` guard.

At most one process per core runs (``memflow.procs.host_cores``): 32 ranks on
2 cores are timed as 2 processes of one thread each, every core busy, and each
phase time is scaled by N / 2. That is the executor's situation: it runs N
ranks of one thread each on those cores, and the kernel shares the cores
between them, so a rank gets 2/N of a core and a compute- or bandwidth-bound
phase takes N/2 times as long as with a core of its own. The scaling leaves
out the cost of switching between ranks (a little optimistic) and the moments
where ranks wait for each other and leave a core idle (a little pessimistic).

The processes die with the planner (``memflow.procs``), and one that dies is
seen within a fraction of a second: the others are stopped and the error
names it (signal 9 is most often the out-of-memory killer).
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

from .. import errors
from ..errors import CaptureError
from ..forkserver import connect as served
from ..graph.build import capture_program
from ..graph.training import autocast, opt_params
from ..model_file import load_model_file
from ..procs import ended_text, host_cores, last_line, popen, sigterm_raises, stop, watch
from .timing import PhaseTimes, measure_phase_times, over_processes, timed_repeats

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
    spec = load_model_file(job["model_file"], guard=False)  # the planner loaded it (guarded) first
    spec = dataclasses.replace(spec, tp=job["tp"], sequence=job["sequence"])
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
            measure_phase_times(program, captured.flat_inputs, opt, repeats=1, warmup=0, selective_all=True)
            _barrier(d, f"c{b}", rank, job["n"])  # and with every node selective
            sel = measure_phase_times(program, captured.flat_inputs, opt, repeats=job["repeats"], warmup=0,
                                      selective_all=True)
            out[b] = {"keep": keep, "swap": swap, "selective": sel,
                      "steady": keep.steady and swap.steady and sel.steady}
    tmp = d / f"out{rank}.json.tmp"
    tmp.write_text(json.dumps(out))
    os.replace(tmp, d / f"out{rank}.json")


def _why(rank: int, rc: int, err_file: Path) -> str:
    """One line on why timing process ``rank`` ended with return code ``rc``: its error, or how it died."""
    words = last_line(err_file.read_text(errors="replace"), limit=None) if rc > 0 and err_file.exists() else ""
    # one of MemFlow's own one-line errors about the model says it all, raised in the process (its traceback's
    # last line) or where the fork server started it: whole, its hint at its end; anything else cut short
    own = re.match(r"(?:memflow forkserver: rank failed to start: )?(?:memflow\.errors\.)?(\w+): (.+)", words)
    if own and isinstance(getattr(errors, own.group(1), None), type) and \
            issubclass(getattr(errors, own.group(1)), errors.MemflowError):
        return own.group(2)
    words = words[:300]
    return f"profiling process {rank} failed: {words}" if words else f"profiling process {rank} {ended_text(rc)}"


def concurrent_phase_times(spec: Any, sizes: list[int], nprocs: int, *, granularity: Any = "auto",
                           dtype: str = "fp32", repeats: int = 7, timeout_s: float = 900.0,
                           progress: Callable[[str], None] | None = None) -> dict[int, dict[str, list[float]]]:
    """Per micro-batch size: each phase's median seconds over ``nprocs`` concurrent ranks,
    ``{"keep": [...], "swap": [...], "selective": [...]}`` (swap: every node swapped as the CPU
    executor swaps; selective: every node under the ``selective`` action).
    Runs at most one process per core and scales (see the module's docstring)."""
    repeats = timed_repeats(repeats)  # (a bad MEMFLOW_TIMING_REPEATS: one line here, before any process starts)
    cores = host_cores()
    procs_n = min(nprocs, cores)
    scale = nprocs / procs_n
    threads = max(1, cores // nprocs)
    if progress and procs_n < nprocs:
        progress(f"timing {nprocs} ranks in {procs_n} concurrent process{'es' * (procs_n > 1)}, one per core of "
                 f"this host; phase times scaled by {nprocs}/{procs_n}")
    with tempfile.TemporaryDirectory(prefix="memflow_prof_") as tmp, sigterm_raises():
        d = Path(tmp)
        job = dict(model_file=str(spec.path), sizes=list(sizes), granularity=granularity, dtype=dtype, tp=spec.tp,
                   sequence=spec.sequence, repeats=repeats, threads=threads, n=procs_n, dir=tmp)
        (d / "job.json").write_text(json.dumps(job))
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        procs: list[subprocess.Popen] = []
        try:
            for r in range(procs_n):
                cmd = [sys.executable, "-m", "memflow.profile.concurrent", tmp, str(r)]
                with open(d / f"err{r}.txt", "w") as err:  # (a warm fork server's process where one is named)
                    procs.append(served(cmd, env, None, str(d / f"err{r}.txt"))
                                 or popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err))
            try:
                failed = watch(procs, timeout_s)
            except TimeoutError:
                raise CaptureError(f"concurrent CPU profiling did not finish within {timeout_s:.0f} s") from None
            if failed is not None:
                r, rc = failed
                why = _why(r, rc, d / f"err{r}.txt")
                raise CaptureError(why if not why.startswith("profiling process") else
                                   f"concurrent CPU profiling failed: {why}")
        finally:
            stop(procs)
        results = [json.loads((d / f"out{r}.json").read_text()) for r in range(procs_n)]
    out = {}
    for b in sizes:
        out[b] = {}
        for what in ("keep", "swap", "selective"):
            t = over_processes([r[str(b)][what] for r in results], [r[str(b)]["steady"] for r in results])
            out[b][what] = PhaseTimes([scale * x for x in t], steady=t.steady)
    return out


if __name__ == "__main__":
    _dir, _rank = Path(sys.argv[1]), int(sys.argv[2])
    _child(json.loads((_dir / "job.json").read_text()), _rank)
