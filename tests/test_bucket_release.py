"""A data-parallel gradient bucket dies with its gradients, not when gloo's worker thread lets go of it.

:class:`memflow.executor.grads.BucketedAllReduce` flattens a bucket's gradients into one new tensor,
all-reduces it asynchronously and makes the gradients views of it; the plan has it die when the
gradients are dropped (the next step's ``zero_grad``). gloo's worker thread holds the work, and the
bucket in it, a moment after ``wait()`` returns (:mod:`memflow.graph.gloo`): about one wait in nine on
this machine, for some milliseconds, which in CI once kept the last step's bucket alive into a small
model's next backward (``tests/test_gradless.py``, 25,620 B, one whole bucket, above the plan).
``finish()`` now waits for gloo's thread to let go.

Run as two gloo ranks (this file is each rank's script): hundreds of syncs, each bucket's storage
checked right after its gradients are dropped; and the averaged values, as a sanity check.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import weakref
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 300


def _rank(rank: int, port: int) -> None:
    import torch
    import torch.distributed as dist

    from memflow.executor.grads import BucketedAllReduce

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    params = [torch.nn.Parameter(torch.zeros(80, 80)), torch.nn.Parameter(torch.zeros(5))]
    sync = BucketedAllReduce([params], dist.group.WORLD, 2, 1 << 20)  # (one bucket of both)
    alive = wrong = 0
    for i in range(ROUNDS):
        for p in params:
            p.grad = torch.full_like(p, float(rank + i))
        sync.start_last_microbatch()
        sync.finish()
        wrong += any(not torch.equal(p.grad, torch.full_like(p, i + 0.5)) for p in params)
        bucket = weakref.ref(params[0].grad.untyped_storage())
        for p in params:
            p.grad = None
        alive += bucket() is not None
    print(f"alive {alive} wrong {wrong}", flush=True)
    dist.destroy_process_group()


def test_a_bucket_dies_when_its_gradients_are_dropped():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, __file__, str(r), str(port)], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for r in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
        assert out.strip() == "alive 0 wrong 0", (out, err[-500:])


if __name__ == "__main__":
    _rank(int(sys.argv[1]), int(sys.argv[2]))
