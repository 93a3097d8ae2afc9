"""``memflow profile MODEL.py``: the task graph of one training step, costed per node."""
from __future__ import annotations

import json

from ..graph.record import replay
from ..model_file import load_model_file
from ..units import format_bytes, format_time
from .main import ArgParser

__all__ = ["main"]


def build_parser() -> ArgParser:
    p = ArgParser(prog="memflow profile", description=__doc__)
    p.add_argument("model", help="model file defining build_model() and example_batch(batch_size)")
    p.add_argument("--gpu-type", default="cpu", help="device spec name (configs/devices); cpu = measure here")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    p.add_argument("--granularity", default="auto", help="'auto' or a module depth")
    p.add_argument("--no-cache", action="store_true")
    p.add_argument("--json", action="store_true", help="print the task graph as JSON")
    return p


def main(argv: list[str]) -> int:
    from ..devices import load_device
    from ..profile import profile_model
    from .common import check_batch_size

    args = build_parser().parse_args(argv)
    spec = load_model_file(args.model)
    bs = check_batch_size(args.batch_size, spec)
    device = load_device(args.gpu_type)
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
