"""The named choices every layer shares, as ``Literal`` types with their values.

One source each: a memory action of a node, a pipeline schedule, a stage's
sharding level, a training precision, and the dtypes a device spec gives peak FLOP/s for. Modules compare
against these constants, never against spelled-out strings.
"""
from __future__ import annotations

from typing import Final, Literal, get_args

__all__ = [
    "Action", "KEEP", "RECOMPUTE", "SWAP", "SELECTIVE", "ACTIONS", "MIN_SWAP_BYTES", "PREFETCH_DEPTHS", "replay_safe",
    "Schedule", "ONE_F_ONE_B", "GPIPE", "SCHEDULES",
    "Sharding", "SHARD_NONE", "SHARD_OPTIMIZER", "SHARD_GRADIENTS", "SHARD_PARAMETERS", "SHARDINGS",
    "SEARCHABLE_SHARDINGS",
    "Offload", "OFFLOAD_NONE", "OFFLOAD_OPTIMIZER", "OFFLOAD_PARAMETERS", "OFFLOADS",
    "TrainDtype", "TRAIN_DTYPES", "FlopDtype", "FLOP_DTYPES",
]

#: What a node does with the tensors its forward saves for its backward.
Action = Literal["keep", "recompute", "swap", "selective"]
KEEP: Final = "keep"  # held on the device until the backward
RECOMPUTE: Final = "recompute"  # dropped; the forward runs again before the backward (checkpoint)
SWAP: Final = "swap"  # copied to host memory after the forward, back before the backward
# checkpointed with a per-op policy (memflow.graph.selective): the outputs of matmuls, convolutions,
# attention and RNN kernels are held; the cheap ops are run again before the backward
SELECTIVE: Final = "selective"
ACTIONS: tuple[Action, ...] = get_args(Action)
#: A swapped node's saved tensors smaller than this stay on the device (their copy costs more than
#: it frees); the executor's pack hook and the simulator's layout both follow it.
MIN_SWAP_BYTES: Final = 256
#: How many nodes ahead of its own backward a swapped node's tensors start back to a GPU
#: (``Strategy.prefetch``): at 1 the copy overlaps the next node's backward only, and a node whose
#: saved bytes take longer over the host link than that backward stalls the step; deeper, the copy
#: starts earlier and its buffers are back on the device that much earlier (TFLMS's swap-in bound).
#: The depths the search tries; on the CPU every copy is made when the backward asks for it.
PREFETCH_DEPTHS: tuple[int, ...] = (1, 2, 3)

#: The order in which a pipeline stage runs its micro-batches' forwards and backwards.
Schedule = Literal["1f1b", "gpipe"]
ONE_F_ONE_B: Final = "1f1b"
GPIPE: Final = "gpipe"
SCHEDULES: tuple[Schedule, ...] = get_args(Schedule)

#: How much of a stage's model state its data-parallel ranks split among them (each level shards
#: what the one before does and more): nothing, the optimizer state (ZeRO-1), also the gradients
#: after their sync (ZeRO-2: reduce-scatter), also the parameters (ZeRO-3/FSDP: all-gathered per
#: node before its forward and its backward, freed after).
Sharding = Literal["none", "optimizer", "gradients", "parameters"]
SHARD_NONE: Final = "none"
SHARD_OPTIMIZER: Final = "optimizer"
SHARD_GRADIENTS: Final = "gradients"
SHARD_PARAMETERS: Final = "parameters"
SHARDINGS: tuple[Sharding, ...] = get_args(Sharding)
#: the levels the simulator and the executor run, and the search gives stages (all of them)
SEARCHABLE_SHARDINGS: tuple[Sharding, ...] = (SHARD_NONE, SHARD_OPTIMIZER, SHARD_GRADIENTS, SHARD_PARAMETERS)

#: What of a stage's model state lives in host memory: nothing, the optimizer's state and step
#: (``Strategy.optimizer_on_host``), or also the parameters' shards (ZeRO-Infinity style: only with
#: sharding ``parameters``; each unit's shard is copied to the device right before its gather, its
#: gradient slice back to the host after its reduce-scatter).
Offload = Literal["none", "optimizer", "optimizer+parameters"]
OFFLOAD_NONE: Final = "none"
OFFLOAD_OPTIMIZER: Final = "optimizer"
OFFLOAD_PARAMETERS: Final = "optimizer+parameters"
OFFLOADS: tuple[Offload, ...] = get_args(Offload)

#: The precision a plan trains in: fp32, or bf16 autocast with fp32 master weights.
TrainDtype = Literal["fp32", "bf16"]
TRAIN_DTYPES: tuple[TrainDtype, ...] = get_args(TrainDtype)

#: Dtypes a device spec may give a peak FLOP/s for, in fallback order.
FlopDtype = Literal["fp32", "bf16", "fp16"]
FLOP_DTYPES: tuple[FlopDtype, ...] = get_args(FlopDtype)


def replay_safe(actions, unsafe) -> list:
    """``actions`` with ``keep`` for a recomputed or selective node of ``unsafe`` (node indices whose replay
    would compute other values than their forward, :func:`memflow.graph.aliases.replay_unsafe`): the
    simulator prices, the planner writes and the executor runs them kept."""
    return [KEEP if a in (RECOMPUTE, SELECTIVE) and k in unsafe else a for k, a in enumerate(actions)]
