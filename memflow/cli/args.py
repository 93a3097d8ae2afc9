"""The command line's parsers: every subcommand, option, help text and example, without torch.

``memflow --help`` and ``memflow COMMAND --help`` are answered from here alone
(no model, torch or planner is imported), so they are instant. The commands
themselves live in ``memflow/cli/<command>_cmd.py``.
"""
from __future__ import annotations

import argparse
import textwrap

from ..cluster import list_clusters
from ..devices import list_devices
from ..errors import MemflowError

__all__ = ["ArgParser", "COMMANDS", "build_parser", "top_help"]

COMMANDS = {
    "plan": "find the fastest strategy that fits the devices' memory, and write it as a plan file",
    "run": "run a plan (or an experiment YAML) with torch.distributed: measured beside predicted",
    "simulate": "simulate a plan: step time, per-device memory, Chrome trace, memory plot",
    "profile": "profile a model file's training step as a task graph, costed per node",
    "report": "write a self-contained HTML report of a plan",
    "fit": "the largest batch per pass, depth, sequence or expert count that trains: plain vs MemFlow",
}

_EXAMPLES = {
    "plan": """\
  memflow plan examples/gpt2.py --gpus 4                       # 4 x V100-16GB (the default device)
  memflow plan examples/gpt2.py --gpus 8 --gpu-type a100-80gb --json
  memflow plan model.py --cluster a100-8-nvlink -o model.plan.yaml
  MEMFLOW_EXAMPLE_SCALE=tiny memflow plan examples/gpt2.py --gpus 2 --gpu-type cpu --gpu-memory 3MiB""",
    "run": """\
  memflow run gpt2.plan.yaml --steps 3
  memflow run configs/experiments/gpt2_tiny_cpu2.yaml          # plan + run in one go
  memflow run p.yaml --checkpoint-dir ckpt --checkpoint-every 2 && memflow run p.yaml --checkpoint-dir ckpt --resume""",
    "simulate": """\
  memflow simulate gpt2.plan.yaml
  memflow simulate gpt2.plan.yaml --trace trace.json --plot memory.png""",
    "profile": """\
  memflow profile examples/lstm.py                              # measured on this CPU
  memflow profile examples/llama7b.py --gpu-type h100-80gb --dtype bf16   # predicted, fake tensors""",
    "report": """\
  memflow report gpt2.plan.yaml -o report.html""",
    "fit": """\
  memflow fit examples/gpt2.py --gpus 1 --gpu-type titan-x-12gb --max batch      # one pass per step
  memflow fit examples/resnet.py --gpus 1 --gpu-type titan-x-12gb --batch-size 16 --max depth --json""",
}


class ArgParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and a MemflowError (exit 2)."""

    def error(self, message: str):  # noqa: D401
        raise MemflowError(f"{self.prog}: {message}")


def _parser(cmd: str, description: str) -> ArgParser:
    names = [f"devices: {', '.join(list_devices())}",
             f"clusters: {', '.join(list_clusters())}, cpu-N (N local processes on this host)"]
    epilog = f"examples:\n{_EXAMPLES[cmd]}"
    if cmd in ("plan", "profile", "fit"):
        epilog += "\n\n" + "\n".join(textwrap.fill(x, 100, subsequent_indent="  ", break_on_hyphens=False)
                                      for x in names)
    return ArgParser(prog=f"memflow {cmd}", description=description, epilog=epilog,
                     formatter_class=argparse.RawDescriptionHelpFormatter)


def _plan_options(p: ArgParser) -> None:
    p.add_argument("model", help="model file defining build_model() and example_batch(batch_size)")
    p.add_argument("--gpus", type=int, default=None, metavar="N", help="number of devices (default: the cluster's, or 1)")
    p.add_argument("--gpu-type", default=None, metavar="NAME",
                   help="device name (listed below; a name alone where one preset has it: v100; default v100-16gb); cpu: N local processes on this host")
    p.add_argument("--gpu-memory", default=None, metavar="SIZE",
                   help="memory per device instead of the device's own, e.g. 16GiB, 12GB, 512MiB")
    p.add_argument("--cluster", default=None, metavar="NAME|FILE", help="cluster preset name (listed below) or YAML file")
    p.add_argument("--batch-size", type=int, default=None, metavar="B",
                   help="global batch per step (default: the model file's BATCH_SIZE)")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"],
                   help="training precision: fp32, or bf16 autocast with fp32 master weights (default fp32)")
    p.add_argument("--granularity", default="auto", metavar="auto|DEPTH",
                   help="how the step is cut into nodes: 'auto' (repeated blocks) or a module depth")
    p.add_argument("--time-budget", type=float, default=None, metavar="SECONDS", help="search time budget")
    p.add_argument("--iterations", type=int, default=None, metavar="N", help="search budget in MCMC iterations per chain")
    p.add_argument("--measure", action="store_true",
                   help="time every node on this host's GPU (CUDA) instead of predicting from FLOPs and bytes")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="search seed (same inputs and seed: same plan)")
    p.add_argument("--headroom", type=float, default=0.1, metavar="FRACTION",
                   help="fraction of each device's memory the plan leaves free (default 0.1)")
    p.add_argument("--no-cache", action="store_true", help="profile afresh instead of reusing cached profiles")
    g = p.add_argument_group("fixing part of the strategy (the search chooses the rest)")
    g.add_argument("--dp", type=int, default=None, metavar="N", help="data-parallel replicas")
    g.add_argument("--pp", type=int, default=None, metavar="N", help="pipeline stages")
    g.add_argument("--tp", type=int, default=None, metavar="N",
                   help="tensor-parallel degree: N devices of one machine run each replica, every transformer "
                        "block's linear pairs split Megatron-style (default: searched on GPUs, 1 on cpu-N)")
    g.add_argument("--microbatches", type=int, default=None, metavar="N",
                   help="micro-batches per step (1: the whole batch in one forward/backward pass)")
    g.add_argument("--max-microbatches", type=int, default=None, metavar="N",
                   help="at most N micro-batches per step (default 32)")
    g.add_argument("--sharding", default=None, metavar="LEVEL",
                   help="every stage's sharding level over its data-parallel ranks: none, optimizer (ZeRO-1), "
                        "gradients (ZeRO-2), parameters (ZeRO-3/FSDP)")
    g.add_argument("--offload", default=None, metavar="WHAT",
                   help="what every stage keeps in host memory: none, optimizer (its state and step), "
                        "optimizer+parameters (also the parameters' shards: needs --sharding parameters, dp > 1)")


def build_parser(cmd: str) -> ArgParser:
    """The parser of subcommand ``cmd``."""
    p = _parser(cmd, COMMANDS[cmd])
    if cmd == "plan":
        _plan_options(p)
        p.add_argument("-o", "--output", default=None, metavar="FILE",
                       help="plan file to write (default: MODEL.plan.yaml in the current directory, never replacing "
                            "one that exists)")
        p.add_argument("--force", action="store_true",
                       help="with the default output name, replace MODEL.plan.yaml instead of writing MODEL.1.plan.yaml")
        p.add_argument("--json", action="store_true", help="print one JSON object (the plan) instead of the summary")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    elif cmd == "fit":
        _plan_options(p)
        p.add_argument("--max", required=True, choices=["batch", "depth", "seq", "experts"],
                       help="what to grow: the global batch (one pass per step unless --microbatches/"
                            "--max-microbatches say otherwise) or a knob the model file declares in KNOBS")
        p.add_argument("--upto", type=int, default=None, metavar="N",
                       help="the largest value tried (default 65536 for batch, 4096 otherwise)")
        p.add_argument("-o", "--output", default=None, metavar="FILE",
                       help="write MemFlow's plan at the largest value that fits to FILE")
        p.add_argument("--json", action="store_true",
                       help="print one JSON object: knob, plain_max, plan_max, limit_hit, per_sample_overhead, plan")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    elif cmd == "run":
        p.add_argument("file", help="a plan file (memflow plan -o) or an experiment file (configs/experiments)")
        p.add_argument("--steps", type=int, default=None, metavar="N",
                       help="training steps (default 5, or the experiment's)")
        p.add_argument("--json", action="store_true", help="print the run report as one JSON object")
        p.add_argument("--checkpoint-dir", default=None, metavar="DIR",
                       help="directory for checkpoints (written with --checkpoint-every, read with --resume)")
        p.add_argument("--checkpoint-every", type=int, default=0, metavar="K", help="save a checkpoint every K steps")
        p.add_argument("--resume", action="store_true", help="continue from the last checkpoint in --checkpoint-dir")
        p.add_argument("--nnodes", type=int, default=1, metavar="N", help="machines taking part (default 1)")
        p.add_argument("--node-rank", type=int, default=0, metavar="R", help="this machine's index, 0..nnodes-1")
        p.add_argument("--rdzv-endpoint", default=None, metavar="HOST:PORT",
                       help="rendezvous address of a run over several machines")
        p.add_argument("--force", action="store_true", help="launch even if the plan predicts it does not fit")
        p.add_argument("--on-cpu", action="store_true",
                       help="run a plan made for GPUs this host lacks on its CPU, under the same memory cap (slow)")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    elif cmd == "simulate":
        p.add_argument("plan", help="plan file written by `memflow plan`")
        p.add_argument("--trace", default=None, metavar="FILE", help="write a Chrome trace JSON (open in Perfetto)")
        p.add_argument("--plot", default=None, metavar="FILE", help="write each device's memory curve as a PNG")
        p.add_argument("--json", action="store_true", help="print one JSON object instead of the summary")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    elif cmd == "profile":
        p.add_argument("model", help="model file defining build_model() and example_batch(batch_size)")
        p.add_argument("--gpu-type", default="cpu", metavar="NAME",
                       help="device to cost for (listed below); cpu (default): measured on this host")
        p.add_argument("--batch-size", type=int, default=None, metavar="B",
                       help="batch to profile (default: the model file's BATCH_SIZE)")
        p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"], help="training precision (default fp32)")
        p.add_argument("--granularity", default="auto", metavar="auto|DEPTH",
                       help="how the step is cut into nodes: 'auto' (repeated blocks) or a module depth")
        p.add_argument("--no-cache", action="store_true", help="profile afresh instead of reusing a cached profile")
        p.add_argument("--json", action="store_true", help="print the task graph as JSON")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    elif cmd == "report":
        p.add_argument("plan", help="plan file written by `memflow plan`")
        p.add_argument("-o", "--output", default="report.html", metavar="FILE",
                       help="HTML file to write (default report.html)")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return p


def top_help() -> str:
    lines = ["usage: memflow COMMAND [options]", "", "commands:"]
    lines += [f"  {name:<9} {text}" for name, text in COMMANDS.items()]
    lines += ["", "examples:", _EXAMPLES["plan"].splitlines()[0], _EXAMPLES["run"].splitlines()[0],
              _EXAMPLES["simulate"].splitlines()[1], "",
              "'memflow COMMAND --help' for a command's options; MEMFLOW_DEBUG=1 shows tracebacks of internal errors"]
    return "\n".join(lines)
