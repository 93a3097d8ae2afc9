"""A value that crosses a pipeline cut as a broadcast view (``expand``: stride 0, larger than its
memory; DistilBERT's attention mask over its heads) travels as its storage and arrives as the same
view: the sending stage holds no full-size copy per micro-batch in flight (it held a 512-byte copy of
a 16-byte mask, 496 bytes above the prediction at two micro-batches), and training is unchanged."""
from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch

from memflow.errors import ExecutionError
from memflow.executor.comm import StageLink, ValueMeta
from memflow.graph.sending import aliases, memory_order, send_copy_bytes
from memflow.memory import view_key

ROOT = Path(__file__).resolve().parents[1]


def test_a_broadcast_value_is_described_by_its_storage():
    mask = torch.zeros(2, 16)[:, None, None, :].expand(2, 1, 16, 16)
    m = pickle.loads(pickle.dumps(ValueMeta(mask)))
    assert m.overlap == (32, 0) and m.strides == mask.stride() and m.perm is None
    assert ValueMeta(torch.zeros(2, 16).t()).overlap is None  # a transposed view: sent in memory order
    assert ValueMeta(torch.zeros(4, 4)[:, :2]).overlap is None  # part of a storage: sent contiguous


def test_what_a_send_copies():
    """The one rule the executor sends by and the plan counts: only a view of part of a storage (or a broadcast
    that needs a gradient) travels as a copy of its elements."""
    x = torch.zeros(4, 8, 6)
    assert send_copy_bytes(x, True) == 0 and send_copy_bytes(x[:2], True) == 0  # contiguous
    assert send_copy_bytes(x.transpose(1, 2), True) == 0  # a permutation: sent as its memory
    assert send_copy_bytes(x[..., :3], False) == 4 * 8 * 3 * 4  # a slice of the last dimension
    b = torch.zeros(4, 1, 6).expand(4, 8, 6)
    assert send_copy_bytes(b, False) == 0 and send_copy_bytes(b, True) == 4 * 8 * 6 * 4
    assert send_copy_bytes(None, True) == 0 and send_copy_bytes(3, False) == 0


def test_one_tensor_under_two_names_travels_once():
    g = torch.zeros(4, 8)
    assert aliases([g, g, torch.zeros(4, 8), g.view(4, 8), g[:2], 3, None]) == [None, 0, None, 0, None, None, None]
    assert aliases([g.t(), g]) == [None, None]  # the same storage laid out otherwise: its own
    # ... except gradients sent back: the same elements in another dense layout travel once, viewed as told
    h = torch.zeros(4, 8, 6)
    assert aliases([h, h.transpose(1, 2), h[:2].transpose(1, 2), h.transpose(1, 2)[:, ::2]], views=True) == \
        [None, [0, [48, 1, 6]], None, None]
    assert aliases([h.transpose(0, 2), torch.zeros(6), h], views=True) == [None, None, [0, [48, 6, 1]]]
    a = torch.arange(4 * 8 * 6.0).reshape(4, 8, 6)
    sent = [a.transpose(1, 2), a]
    got = aliases(sent, views=True)
    # (received as StageLink does: the first in its memory order, the second viewed from it as told)
    first = torch.empty_permuted(sent[0].shape, memory_order(sent[0]))
    first.copy_(sent[0])
    assert torch.equal(first.as_strided(a.shape, got[1][1], first.storage_offset()), a)


def test_values_that_alias_otherwise_than_first_told_stop_the_step():
    """Which values alias is told once, at the first transfer (the receiver posts one receive per tensor told):
    a later transfer whose values alias otherwise stops before anything is sent, in one line."""
    link = StageLink(peer=1, names=["a", "b"], device=torch.device("cpu"))
    g = torch.zeros(4, 8)
    link.meta, link.fwd_alias = [ValueMeta(g), ValueMeta(g)], aliases([g, g])
    with pytest.raises(ExecutionError) as info:
        link.send_values({"a": g, "b": torch.zeros(4, 8)})
    msg = str(info.value)
    assert "alias each other differently from the first micro-batch's ([None, 0] then [None, None])" in msg
    assert "\n" not in msg and not link.sent_fwd


def test_a_view_and_its_reshape_are_one_view():
    """What a stage receives is the elements its nodes read: a slice and the reshape of it a linear layer reads
    are the same elements (once counted twice: a stage received the whole storage, 64 KiB above its run)."""
    h = torch.zeros(4, 64, 128)
    s = h[..., :64]
    assert view_key(s) == view_key(s.reshape(256, 64)) == view_key(s.unsqueeze(0))
    assert view_key(s) != view_key(h[..., 64:]) and view_key(s) != view_key(h[:, :32])
    assert view_key(h.transpose(0, 1)[:2]) != view_key(h[:2])  # different elements


def test_distilbert_pipeline_stage_peaks_as_predicted_and_trains_as_plain(monkeypatch):
    from memflow.cluster import Cluster
    from memflow.executor import RunConfig, plain_losses, run_plan
    from memflow.planner import GraphSource, resolve_spec
    from memflow.simulator import Simulator
    from memflow.strategy import Strategy

    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = ROOT / "bench" / "unseen" / "distilbert.py"
    cl = Cluster.load("cpu-2")
    st = Strategy(dp=1, pp=2, stage_of=[0, 0, 1, 1, 1, 1], actions=["keep"] * 6, microbatches=2)
    g = GraphSource(resolve_spec(str(path)), cl)(st.microbatch_size(4))
    pred = Simulator(g, cl).evaluate(st, detail=True)
    cfg = RunConfig(model_file=str(path), batch_size=4, strategy=st, steps=3, warmup=1, device="cpu",
                    node_names=[nd.name for nd in g.nodes], capacity_bytes=None,
                    predicted={"peak_bytes": pred.peak_bytes, "step_time_s": pred.end_s})
    rep = run_plan(cfg, nproc=2, timeout_s=300)
    first = rep.ranks[0]
    assert first.measured_peak_bytes <= first.predicted_peak_bytes <= 1.005 * first.measured_peak_bytes, (
        first.measured_peak_bytes, first.predicted_peak_bytes, first.peak_at)
    want = plain_losses(str(path), 4, 3, seed=0, pieces=2)
    assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(rep.losses, want)), (rep.losses, want)
