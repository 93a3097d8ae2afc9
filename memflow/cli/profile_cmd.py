"""``memflow profile MODEL.py``: the task graph of one training step, costed per node."""
from __future__ import annotations

import argparse
import json

from ..devices import load_device
from ..graph.record import replay
from ..model_file import load_model_file
from ..profile import profile_model
from ..request import check_batch_size
from ..units import format_bytes, format_time
from .progress import reporter

__all__ = ["main"]


def main(args: argparse.Namespace) -> int:
    spec = load_model_file(args.model)
    bs = check_batch_size(spec.batch_size if args.batch_size is None else args.batch_size, "--batch-size")
    device = load_device(args.gpu_type)
    how = "measured here" if device.kind == "cpu" else "predicted, fake tensors"
    with reporter(args.quiet or args.json).task(f"profiling {spec.name} for {device.name} ({how})", 1, "size"):
        graph = profile_model(spec, bs, device=device, dtype=args.dtype, granularity=args.granularity,
                              cache=not args.no_cache)
    if args.json:
        print(json.dumps(graph.to_dict()))
        return 0
    r = replay(graph)
    print(f"{spec.name}: {graph.n} nodes, batch {bs}, {graph.dtype}, times {graph.time_source} on {graph.device}")
    print(f"{'node':<28}{'params':>11}{'saved':>11}{'out':>11}{'fwd':>11}{'bwd':>11}{'GFLOP f/b':>16}")
    for nd in graph.nodes:
        print(f"{nd.name[:27]:<28}{format_bytes(nd.param_bytes):>11}{format_bytes(nd.saved_bytes):>11}"
              f"{format_bytes(nd.out_bytes):>11}{format_time(nd.fwd_time_s):>11}{format_time(nd.bwd_time_s):>11}"
              f"{nd.fwd_flops / 1e9:>8.1f}/{nd.bwd_flops / 1e9:<7.1f}")
    step = sum(nd.fwd_time_s + nd.bwd_time_s for nd in graph.nodes) + graph.opt_time_s
    print(f"single-device step: {format_time(step)}, peak {format_bytes(r.peak_bytes)} "
          f"(model state {format_bytes(r.state_bytes)}, at {graph.phase_name(r.peak_phase)})")
    return 0
