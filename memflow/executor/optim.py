"""The stage's optimizer: plain, ZeRO-1 (sharded state), ZeRO-2 (sliced buckets), or state in host memory.

* sharding ``optimizer``: :class:`torch.distributed.optim.ZeroRedundancyOptimizer`
  over the stage's data-parallel group (optimizer state ÷ dp; each rank
  steps its shard, then each rank's parameters are broadcast as one flat
  bucket).
* sharding ``gradients``: the stage's gradient sync is a
  :class:`~memflow.executor.zero.ReduceScatterSync`; the optimizer steps this rank's slice of
  every bucket (and whole any parameter outside the buckets), then the slices are all-gathered.
* sharding ``parameters``: the stage's sync is a :class:`~memflow.executor.zero3.Zero3Sync`;
  the optimizer steps this rank's shard of every node's unit (and whole the parameters several
  nodes read); nothing is gathered after the step.
* parameters on the host (ZeRO-3 with offload ``optimizer+parameters``): the shards the optimizer
  steps are host tensors already (:class:`~memflow.executor.zero3.Zero3Sync` with ``host``), as
  are their gradients: the step runs on them in place, nothing is copied (on CUDA too).
* ``optimizer_on_host``: on the CPU the optimizer's state is created and its
  step runs inside :meth:`LiveBytes.host` (host bytes, not device bytes); on
  CUDA a host copy of the parameters is stepped (its state in host memory) and
  copied back, and with parameters on the host so are the parameters several nodes
  read (kept whole on the device: a tied embedding). Tested on a GPU (tests/test_gpu.py).
"""
from __future__ import annotations

import contextlib
from typing import Any

import torch

from ..errors import ConfigError
from ..kinds import SHARD_GRADIENTS, SHARD_PARAMETERS
from .stage import optimizer_kwargs
from .zero import check_elementwise

__all__ = ["StageOptimizer"]


def _host_copy(p: torch.Tensor) -> torch.nn.Parameter:  # pragma: no cover - needs a GPU
    """A pinned host copy of device parameter ``p`` (the optimizer steps it; copies to and from it are
    asynchronous DMA, not a staged copy through pageable memory per tensor)."""
    return torch.nn.Parameter(p.detach().to("cpu").pin_memory())


class StageOptimizer:
    def __init__(self, spec: Any, params: list[torch.nn.Parameter], *, shard: bool, on_host: bool,
                 dp_group: Any, device: torch.device, sliced: Any = None):
        self.params = params
        self.sliced = sliced  # ZeRO-2: the stage's ReduceScatterSync (its slices are what is stepped)
        self.on_host = on_host
        # (parameters on the host: the shards and their gradients are host tensors, stepped in place)
        self.cuda_host = on_host and device.type == "cuda" and not getattr(sliced, "host", False)
        self.zero = None
        self.live = None
        if self.cuda_host and sliced is not None:  # pragma: no cover - needs a GPU
            raise ConfigError(f"sharding {getattr(sliced, 'level', SHARD_GRADIENTS)!r} with the optimizer on the "
                              "host runs on the CPU only")
        # (CUDA, optimizer on the host: device parameters whose host copy the optimizer steps)
        self.host_pairs: list[tuple[torch.nn.Parameter, torch.nn.Parameter]] = []
        self.host_grads: list[torch.Tensor] | None = None  # their gradients' pinned host buffers
        if self.cuda_host:  # pragma: no cover - needs a GPU
            self.host_pairs = [(_host_copy(p), p) for p in params]
            opt_params = [hp for hp, _ in self.host_pairs]
        elif sliced is not None:
            inside = {id(p) for b in sliced.buckets for p in b.params}
            if getattr(sliced, "level", SHARD_GRADIENTS) == SHARD_PARAMETERS:
                # each unit's shard where its first parameter was, in the model's order: a one-tensor-at-a-
                # time step leaves a tensor's temporaries beside the next one's, as the traced step did
                unit = {id(p): b for b in sliced.buckets for p in b.params}
                opt_params, done = [], set()
                for p in params:
                    b = unit.get(id(p))
                    if b is None and on_host and p.device.type == "cuda":  # pragma: no cover - needs a GPU
                        self.host_pairs.append((_host_copy(p), p))
                        opt_params.append(self.host_pairs[-1][0])
                    elif b is None:
                        opt_params.append(p)
                    elif id(b) not in done:
                        done.add(id(b))
                        opt_params.append(b.shard)
            else:
                opt_params = sliced.pieces() + [p for p in params if id(p) not in inside]
        else:
            opt_params = params
        base = spec.make_optimizer(opt_params) if opt_params else None
        if sliced is not None and base is not None:
            check_elementwise(base, getattr(sliced, "level", SHARD_GRADIENTS))
        if shard and sliced is None and base is not None:
            from torch.distributed.optim import ZeroRedundancyOptimizer

            # the parameters as views of one flat bucket per owner: the step's broadcast is one
            # collective per rank instead of one per parameter tensor (a latency each)
            self.zero = ZeroRedundancyOptimizer(opt_params, optimizer_class=type(base),
                                                process_group=dp_group, parameters_as_bucket_view=True,
                                                **optimizer_kwargs(base))
            self.local = self.zero.optim
            self.opt = self.zero
        else:
            self.local = base
            self.opt = base

    def _host(self):
        if self.on_host and self.live is not None:
            return self.live.host()
        return contextlib.nullcontext()

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None
        if self.sliced is not None:
            self.sliced.zero_grad()

    def step(self) -> None:
        if self.opt is None:
            return
        if self.host_pairs:  # pragma: no cover - needs a GPU
            # every gradient to its pinned host buffer asynchronously, then one wait (this path ran 44%
            # over its prediction on the H200 with a blocking copy to pageable memory per tensor, where
            # the FSDP path's host step over pinned shards did not; not yet re-measured)
            with self._host():
                if self.host_grads is None:
                    self.host_grads = [torch.empty(hp.shape, dtype=hp.dtype, pin_memory=True)
                                       for hp, _ in self.host_pairs]
            for (hp, p), hg in zip(self.host_pairs, self.host_grads):
                hp.grad = hg.copy_(p.grad.detach(), non_blocking=True) if p.grad is not None else None
            torch.cuda.current_stream(self.host_pairs[0][1].device).synchronize()
        with self._host():
            self.opt.step()
        with torch.no_grad():
            for hp, p in self.host_pairs:  # pragma: no cover - needs a GPU
                p.copy_(hp, non_blocking=True)
                hp.grad = None
        if self.sliced is not None:
            self.sliced.gather()

    def reload(self) -> None:
        """The parameters were loaded (a checkpoint): their host copies take the loaded values."""
        with torch.no_grad():
            for hp, p in self.host_pairs:  # pragma: no cover - needs a GPU
                hp.copy_(p)

    # ------------------------------------------------------------- state
    def local_params(self) -> list[torch.Tensor]:
        if self.local is None:
            return []
        return [p for g in self.local.param_groups for p in g["params"]]

    def init_state(self) -> None:
        """Create the optimizer state (a zero-gradient step undone), e.g. to load a checkpoint into."""
        if self.local is None:
            return
        ps = self.local_params()
        with torch.no_grad():
            saved = [p.detach().clone() for p in ps]
            old = [p.grad for p in ps]
            for p in ps:
                p.grad = torch.zeros_like(p)
            with self._host():
                self.local.step()
            for p, s, g in zip(ps, saved, old):
                p.copy_(s)
                p.grad = g

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """Flat name -> tensor view of the (local) optimizer state."""
        out = {}
        if self.local is None:
            return out
        for i, p in enumerate(self.local_params()):
            for k, v in self.local.state.get(p, {}).items():
                if isinstance(v, torch.Tensor):
                    out[f"{i}.{k}"] = v
        return out
