"""An on-disk cache of profiled task graphs, keyed by fingerprint and device.

Entries are JSON files written atomically (temp file + ``os.replace``). A
corrupt entry (or one under a different key) is recomputed with a warning,
never a crash; one written by another format version is recomputed silently.

A :class:`ProfileKey` (what :func:`memflow.profile.cache_key` gives) also
names a model file: its entries carry what that file's build read
(:mod:`memflow.profile.deps`: the helper modules, data files and environment
variables beyond the key), each entry as ``KEY-DEPS.json`` beside its record
``KEY-DEPS.deps.json``, and one is reused only while its record holds (so a
model whose size comes from its own environment variable keeps one entry per
value, and a changed helper module is a miss).
"""
from __future__ import annotations

import glob
import json
import os
import warnings
from pathlib import Path
from typing import Callable

from ..fileio import atomic_write_text
from ..graph.record import TaskGraph
from .deps import Deps, record, record_soon, recorded

__all__ = ["ProfileCache", "ProfileKey", "FORMAT_VERSION"]

FORMAT_VERSION = 53  # 53: Buffer.steady_read_gaps (Buffer.read_gaps from the steady peaks: a later micro-batch's backward accumulates its gradients in place, its peak before the reading node is through; a Gumbel VQ-VAE's transposed conv beside a selective ReLU, 1,984 B under); 52: TaskGraph.params gains each parameter's dtype kind (memflow.buckets.dtype_kind: a bucket holds one kind, as the executor's; a Fourier operator's complex weights bucketed with real ones moved ZeRO-2's syncs, 608 B under); 51: Node.sel_steady_bwd_transient_bytes (a selective backward as a later micro-batch's, its gradients there already: its peak may fall before some are made, where the kept one's is past them; an EfficientNet block selective on its stage, 1,280 B under); 50: Node.z3_steady_bwd_transient_bytes counts autograd's copy of a unit's gradient laid out otherwise than its parameter, as it accumulates it (ZeRO-3 makes it anew each micro-batch: a capsule network's routing weights, 8% under); 49: Buffer.read_gaps (a value a stage's node reads last in its backward and the step keeps: let go with that node's saved tensors there, before its backward's later peak; a feature pyramid's head on a received scale, 5% over); 48: Buffer.sel_free_gap (Buffer.free_gap in the selective figures: a 3-D U-Net's selective encoder cut before its decoder counted each skip's whole concatenation gradient, 12-14% over); 47: Buffer.swap_free_gap (Buffer.free_gap in the CPU's all-swapped trace: a U-Net's encoder swapped on its stage, 6% over); 46: Node.z3_steady_bwd_transient_bytes and cpu_swap_z3_steady_bwd_transient_bytes (under ZeRO-3 a later micro-batch's backward makes a unit's gradients anew and adds into the shared weights' ones: an AWD-LSTM's tied decoder, its stage swapped, 9% over); 45: Buffer.free_gap (a storage a stage receives a slice of, freed at its phase's peak: a 1-D U-Net's skip gradients, slices of its decoder concatenations' gradients, counted whole at the encoder's backward, 6-8% over); 44: TaskGraph.input_early_swapped (a batch input the all-swapped trace lets go before its phase's peak too: SegFormer's labels, its loss node swapped, 6-7.5% over); 43: Node.first_bwd_transient_bytes (a tied weight's gradient first made on a stage whose trace added it into one a later stage's node made: a GRU seq2seq's embedding read twice on its first stage, 15 KiB, 1.2% under); 42: TaskGraph.input_early (a batch input let go before its phase's peak: a segmentation loss's labels, let go by the NLL backward before the log-softmax backward's peak, counted through it, 1.6% over); 41: TaskGraph.fwd_input_send_copies (a view of a batch input sent on as a copy: a language model's targets sliced by its first node, 512 B per micro-batch in flight under on a MoE's first stage); 40: Node.cpu_swap_held_fwd_transient_bytes and cpu_swap_fwd_freed_bytes (a value every saver swapped dies in its last forward reader, inside that swapped transient; held on by a reader's checkpoint it was counted twice there: a loss node reading a critic's features, swapped, 14% over); 39: Node.cpu_swap_steady_bwd_transient_bytes (a swapped node's backward as a later micro-batch's, its gradients there already: made anew in the plan, a swapped layer first on its stage 12% over); 38: meta no_backward (nodes no backward runs through: the loss reads nothing they make; their actions priced kept, CANINE's unread upsampling recomputed was 27% over); 37: Node.held_fwd_transient_bytes and sel_held_bwd_transient_bytes (a forward's peak with what it reads last held on, a selective backward's with its inputs held: a selective maker's output its kept reader frees, a kept maker's saved output a selective reader frees, each counted twice, 9-15% over); 36: Node.rec_held_bwd_transient_bytes (a recomputed node's checkpoint holds its inputs until its last op with saved tensors is through: a loss head reading many features, 16% under); meta carried_attrs leaves out an attribute a forward sets to None before anything reads it (HF RecurrentGemma with use_cache=False); 35: a saved tensor the trace's hook holds is held detached (no cycle through a saved output's grad_fn: a dead branch's saved tensors, RWKV's final recurrent state, were counted to the step's end); 34: TaskGraph.input_holders (the nodes whose forward saved each batch input: a stage lets its own copy of an input other stages read too go by them); 33: Node.steady_bwd_transient_bytes (a later micro-batch's backward, its gradients there already); TaskGraph.input_free (the phase the executor's copy of each batch input is let go in, traced with the step holding its copy alone: an L1 loss's target with its reader's forward); 32: Node.read_inputs counts batch inputs a node reads through views another node made (a GNN's edges[0], received by a later stage); 31: meta carried_attrs (plain attributes a forward sets to tensors: a Transformer-XL memory, a stateful LSTM's hidden state; warned); 30: parameters a node changes in place, or hands on through a no_grad region, are whole_params (a WGAN critic clipping its weights in forward: ZeRO-3 read freed memory); meta written_params (one micro-batch per step), replay_unsafe (nodes never recomputed: spectral norm) and gradless_params (left out of the all-reduce: an unread pooler), Node.handed_params (weights read through views another node handed on); 29: the loss storage lives to the end of its backward, not the step (the executor keeps each micro-batch's value off the device: CPU's mse_loss is a 0-dim view of its unreduced buffer); 28: the trainable parameters a node hands on as views (whole_params: a ZeRO-3 unit keeps them whole, an expand of a learned query read by the next node); 27: node-by-node selective figures: an input read first by a node that saves nothing (a rotary module reading the hidden states) is let go by the next reader that holds it, and outlives a reader with readers after it; 26: a selective node's forward under autocast at its traced transient (the kept forward's was a floor; kept for the loss head); 25: per-node selective figures without the casts a ZeRO-3 unit gathers in bf16 (low_sel_*: a GRU's selective replay casts its weights once per time step); 24: a fake build's deep-copied modules' tensors in the build's mode (nn.TransformerEncoder: a weight's t() counted as new storage); 23: a selective forward under autocast priced at the larger of its traced and its kept transient; 22: per-node backward transient with its saved tensors held to its end (held_bwd_transient_bytes: a swapped node whose copies to the host are still running); 21: a selective node recomputes an expensive output it writes in place (the GRU's gates on the CPU), parameters closed over by a recomputed node's checkpoint; 20: what a pipeline cut's sends copy (Buffer.copies, TaskGraph.bwd_send_copies), a view and its reshape one view (Buffer.views); 19: no checkpointed forward figures under autocast; 18: per-buffer whether a saved-tensor hook saw it (Buffer.packed); 17: per-node forward transients under the recompute action's checkpoint and the selective policy (ck_fwd_transient_bytes, sel_fwd_transient_bytes; fp32 graphs); 16: per-node bytes of its outputs a selective policy holds (sel_held_out_bytes); 15: per-node bytes a backward makes before its first saved tensor's unpack (a recompute's replay runs beside them); 14: bf16 parameter casts tagged, transients without them (ZeRO-3's bf16 gathers); 13: sequence parallelism in tensor-parallel graphs; 12: tensor-parallel graphs (TaskGraph.tp, per-node collectives); 11: a sequential block of repeated blocks (a ResNet stage) is opened into its blocks; 10: per-buffer views read smaller than the storage (what a pipeline stage receives); 9: per-node figures under the selective action; 8: per-node forward transient up to its last saved tensor (a recompute's replay); 5: per-node transients under the CPU executor's swap; 2: per-node batch-input reads; 3: bf16 steps count their parameter casts;
# 4: a node's inputs die with their last use; 6: model state the step never reads is counted; 7: entries carry
# what the model file's build read (deps), and the model's signature


class ProfileKey(str):
    """A profile's cache key (the string), and the model file and batch size its entries' records
    of what the build read are made from (:mod:`memflow.profile.deps`)."""

    model_file: str
    batch_size: int

    def __new__(cls, key: str, model_file: str, batch_size: int):
        self = super().__new__(cls, key)
        self.model_file, self.batch_size = model_file, batch_size
        return self


def _default_dir() -> Path:
    return Path(os.environ.get("MEMFLOW_CACHE_DIR", Path.home() / ".cache" / "memflow")) / "profiles"


def _safe(key: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in key)


class ProfileCache:
    def __init__(self, directory: str | os.PathLike | None = None):
        self.dir = Path(directory) if directory else _default_dir()

    def _path(self, key: str) -> Path:
        return self.dir / f"{_safe(key)}.json"

    def get(self, key: str) -> TaskGraph | None:
        if not isinstance(key, ProfileKey):
            return self._read(self._path(key), key)
        # the entries of this key, by what their builds read: the first whose record holds
        for side in sorted(glob.glob(glob.escape(str(self.dir / _safe(key))) + "-*.deps.json")):
            try:
                blob = json.loads(Path(side).read_text())
                if blob.get("version") != FORMAT_VERSION or blob.get("key") != key:
                    continue
                deps = Deps.from_dict(blob["deps"])
            except Exception:  # noqa: BLE001 - a damaged record: its entry is not known to hold
                continue
            if deps.holds():
                return self._read(Path(side[: -len(".deps.json")] + ".json"), f"{key}-{deps.digest}")
        return None

    def _read(self, path: Path, key: str) -> TaskGraph | None:
        if not path.exists():
            return None
        try:
            blob = json.loads(path.read_text())
            if blob.get("version") != FORMAT_VERSION:
                return None  # written by another version of MemFlow: recomputed silently
            if blob.get("key") != key:
                raise ValueError("stale entry")
            return TaskGraph.from_dict(blob["graph"])
        except Exception as e:  # noqa: BLE001 - any damage means recompute
            warnings.warn(f"profile cache entry {path} is unreadable ({type(e).__name__}: {e}); recomputing",
                          stacklevel=3)
            return None

    def prepare(self, key: str) -> None:
        """Begin recording what the model file of ``key`` (a :class:`ProfileKey`) reads, for the
        :meth:`put` that follows (:func:`memflow.profile.deps.record_soon`)."""
        if isinstance(key, ProfileKey):
            record_soon(key.model_file, key.batch_size)

    def put(self, key: str, graph: TaskGraph) -> None:
        """Store ``graph`` under ``key``; not one whose measured times disagreed with their own
        repeats (``meta["steady_times"]`` False: a busy host's costs are not kept as the truth), nor,
        for a :class:`ProfileKey`, one whose model file cannot be rebuilt to record what it reads or
        builds another model now (a stale ``ModelSpec``)."""
        if graph.meta.get("steady_times") is False:
            return
        if not isinstance(key, ProfileKey):
            self._write(self._path(key), key, graph)
            return
        deps = record(key.model_file, key.batch_size)
        if deps is None or not recorded(graph.meta, deps):
            return
        name = f"{key}-{deps.digest}"
        self._write(self._path(name), name, graph)
        atomic_write_text(self.dir / f"{_safe(name)}.deps.json",
                          json.dumps({"version": FORMAT_VERSION, "key": str(key), "deps": deps.to_dict()}))

    def _write(self, path: Path, key: str, graph: TaskGraph) -> None:
        atomic_write_text(path, json.dumps({"version": FORMAT_VERSION, "key": key, "graph": graph.to_dict()}))

    def get_or_compute(self, key: str, compute: Callable[[], TaskGraph]) -> TaskGraph:
        g = self.get(key)
        if g is None:
            g = compute()
            self.put(key, g)
        return g
