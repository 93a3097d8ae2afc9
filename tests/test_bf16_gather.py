"""ZeRO-3 in bf16: the parameters autocast only casts are gathered in bf16 (issue 23's mixed precision).

The rules: which parameters qualify (every forward read is autocast's bf16 cast), the same found on
real and on fake tensors; the profiler tags exactly their casts and traces the transients without
them; the simulator's gathered bytes are half for them, each part padded on its own; a run gives
plain bf16 training's losses, its peak as predicted and below what fp32 gathers would hold.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from memflow.graph.build import capture_program
from memflow.graph.casts import cast_only
from memflow.memory import LiveBytes
from memflow.model_file import load_model_file

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _tiny(monkeypatch):
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _names(model: str, dtype: str = "bf16", fake: bool = False) -> set:
    spec = load_model_file(ROOT / "examples" / f"{model}.py")
    captured, program, mode, net = capture_program(spec, 4, fake=fake, dtype=dtype)
    if fake:
        with mode:
            ids = cast_only(program, captured.flat_inputs, dtype)
    else:
        ids = cast_only(program, captured.flat_inputs, dtype, fake=True)
    by_id = {id(p): n for n, p in net.named_parameters()}
    return {by_id[i] for i in ids}


def test_cast_only_parameters_are_the_linear_layers_weights():
    """GPT-2: every block's linear weights and biases (Conv1D's addmm casts both); not the norms (read
    by layer_norm in fp32), not the tied embedding (read by the lookup as well). Llama: the
    projections and its untied output layer; not the embedding or the RMS norms' weights. The same
    set on fake tensors (the profiler) as on real ones (a rank); none without autocast."""
    got = _names("gpt2")
    linears = (".attn.c_attn.", ".attn.c_proj.", ".mlp.c_fc.", ".mlp.c_proj.")
    spec = load_model_file(ROOT / "examples" / "gpt2.py")
    every = {n for n, _ in spec.build().named_parameters()}
    assert got == {n for n in every if any(s in n for s in linears)}
    assert _names("gpt2", fake=True) == got
    assert _names("gpt2", dtype="fp32") == set()
    got = _names("llama")
    assert "lm_head.weight" in got and "model.embed_tokens.weight" not in got
    assert not any("norm" in n for n in got) and any("q_proj" in n for n in got)


def test_live_bytes_peaks_without_the_tagged_casts_by_hand():
    """A watched parameter's bf16 cast is tagged; the phase's peak without tagged bytes is the live
    bytes' most with those left out, whatever order the tensors come and go in."""
    p = torch.nn.Parameter(torch.zeros(1000))  # 4000 B fp32
    live = LiveBytes(record=True)
    live.watch_casts({id(s): "w" for s in [p.untyped_storage()]})
    with live:
        live.set_phase(0)
        a = torch.ones(250)  # 1000 B
        c = p.to(torch.bfloat16)  # the cast: 2000 B, tagged
        b = torch.ones(500)  # 2000 B: live 5000, without the cast 3000
        del a  # 4000 / 2000
        d = torch.ones(750)  # 3000 B: live 7000, without the cast 5000
        live.set_phase(1)
        del c  # the cast freed: 5000 / 5000
        e = torch.ones(100)  # 5400 / 5400
        del b, d, e
    assert live.phase_peak[0] == 7000 and live.phase_peak_nc[0] == 5000
    # (a phase starts at the live bytes it inherits: 7000, 5000 without the cast; then 5400 both)
    assert live.phase_peak[1] == 7000 and live.phase_peak_nc[1] == 5400
    casts = [ev for ev in live.events if ev.cast]
    assert [(ev.cast, ev.nbytes, ev.alloc_phase, ev.free_phase) for ev in casts] == [("w", 2000, 0, 1)]


def test_the_trace_tags_each_unit_parameters_cast_once():
    """The bf16 graph's cast parameters are the cast-only ones one node reads; their tagged buffers are
    one bf16 copy of each (2 bytes an element), made in their node's forward and freed in its
    backward (a weight's: its matmul saved it) or when the forward ends and autocast's cache is
    cleared (a bias's: nothing saved it); each such node's transients without them are at most its
    transients. An fp32 graph has none."""
    from memflow.profile.build import capture_graph

    spec = load_model_file(ROOT / "examples" / "gpt2.py")
    g = capture_graph(spec, 4, dtype="bf16")
    assert g.cast_params and all(".h." in k for k in g.cast_params)
    tagged = [b for b in g.buffers if b.cast]
    assert sorted(b.cast for b in tagged) == sorted(g.cast_params)
    assert sum(b.nbytes for b in tagged) == sum(g.params[k][1] // 2 for k in g.cast_params)
    n = g.n
    for b in tagged:
        owner = g.params[b.cast][3]
        saved = b.free_phase == 2 * n - 1 - owner
        assert b.alloc_phase == owner and (saved or b.free_phase == n - 1)
        assert saved == b.cast.endswith(".weight"), b
    for nd in g.nodes:
        if nd.low_fwd_transient_bytes >= 0:
            assert nd.low_fwd_transient_bytes <= nd.fwd_transient_bytes
            assert nd.low_bwd_transient_bytes <= nd.bwd_transient_bytes
    g32 = capture_graph(spec, 4, dtype="fp32")
    assert not g32.cast_params and not any(b.cast for b in g32.buffers)


def test_gathered_parts_by_hand():
    """A unit of 4000 fp32 bytes, 2400 of them cast-only, over 2 ranks: the bf16 part is 600 elements
    (300 a rank: 1200 gathered bytes), the fp32 part 400 (200 a rank: 1600); the gradients' flat copy
    is fp32 (4000), a rank's slice 1200 + 800. Over 3 ranks each part pads on its own."""
    from simulator.zero3 import parts_split

    assert parts_split(4000, 2400, 2) == (1200 + 1600, 4000, 2000)
    assert parts_split(4000, 0, 2) == (4000, 4000, 2000)
    # 3 ranks: 600 -> 600 elements (200 each), 400 -> 402 (134 each)
    assert parts_split(4000, 2400, 3) == (1200 + 1608, 2400 + 1608, 800 + 536)


def test_a_zero3_stage_predicts_less_with_bf16_gathers_and_only_there():
    """On the bf16 graph a ZeRO-3 stage's peak falls by at least the casts it no longer holds between
    its nodes' forward and backward, its shards on the device or on the host; a stage that does not
    shard its parameters is predicted as before."""
    from memflow.cluster import Cluster
    from memflow.profile.build import capture_graph
    from memflow.strategy import Strategy
    from simulator import Simulator

    g = capture_graph(load_model_file(ROOT / "examples" / "gpt2.py"), 4, dtype="bf16")
    cl = Cluster.load("cpu-2")
    n = g.n
    z3 = Strategy(dp=2, pp=1, stage_of=[0] * n, actions=["keep"] * n, sharding=["parameters"])
    plain = g.__class__.from_dict({**g.to_dict(), "cast_params": []})
    casts = sum(b.nbytes for b in g.buffers if b.cast)
    for st in (z3, z3.copy(optimizer_on_host=[True], params_on_host=[True])):
        low, fp32 = Simulator(g, cl).evaluate(st), Simulator(plain, cl).evaluate(st)
        assert fp32.peak_bytes[0] - low.peak_bytes[0] >= casts // 2
    for st in (z3.copy(sharding=["gradients"]), z3.copy(sharding=["optimizer"], optimizer_on_host=[True])):
        assert Simulator(g, cl).evaluate(st).peak_bytes == Simulator(plain, cl).evaluate(st).peak_bytes


def test_the_bytes_alive_between_two_backwards_by_hand():
    """What ZeRO-3's sync point after a unit's backward sits on, with every node kept: the bytes alive as
    the next backward starts. A chain of three (phases F0 F1 F2 B2 B1 B0): as B1 starts, saved_0 is
    carried and saved_1, out_0 and dx2 are still alive (B1 frees them); as B0 starts, saved_0, dx1."""
    from memflow.simulator import Simulator
    from memflow.simulator.synthetic import chain_graph
    from memflow.strategy import Strategy
    from tests.test_simulator import MS, make_cluster

    A, S = 1000, 3000
    g = chain_graph(3, act_bytes=A, saved_bytes=S, param_bytes=10**6, fwd_s=1 * MS, bwd_s=2 * MS, ws_bwd=7000)
    sim = Simulator(g, make_cluster(2))
    sim.evaluate(Strategy(2, 1, [0] * 3, ["keep"] * 3, sharding=["parameters"]))
    bound = sim.stage(0, 3).model._keep.bound
    assert bound[4] == 2 * S + 2 * A and bound[5] == S + A


def test_the_summary_says_where_weights_are_gathered_in_bf16():
    """A bf16 plan whose stage shards its parameters says its weights are gathered in bf16; an fp32 one
    does not."""
    import memflow
    from memflow.summary import summary

    path = str(ROOT / "examples" / "gpt2.py")
    for dtype in ("bf16", "fp32"):
        p = memflow.plan(path, gpus=2, gpu_type="a100-80gb", batch_size=8, dtype=dtype, dp=2, sharding="parameters",
                         time_budget_s=0.5)
        assert p.strategy.sharding == ["parameters"]
        assert ("gathered in bf16" in summary(p)) == (dtype == "bf16"), summary(p)


def test_the_sync_point_between_two_backwards_by_hand():
    """Two nodes, each a unit of 100 bytes over 2 ranks (gathered 104, flat copy 104, slice 52). The sync
    after B1 sits in B0's figure: the smaller of B1's peak (1000), B0's peak and the gradient (50 + 100),
    and the bytes alive as B0 starts and the gradient (5 + 100), plus the prefetched gather of unit 0
    (104) and the flat copy (104): 313 over B0's own 50 + 208. With the per-step buffers (700 in B0,
    less the gradient's 100 the unit sheds) the boundary carries them too: 5 + 700 - 100 + 100 + 208."""
    from simulator.zero3 import phase_terms, phase_values

    units = ((100, 100, 200), (100, 100, 200))
    terms = phase_terms(units, 2, 2)
    kv, kv0 = [10, 10, 1000, 50], [10, 10, 1500, 750]
    v, v0, _ = phase_values(terms, 2, kv, kv0, 0, [0] * 4, 0, [0, 0, 0, 5])
    assert v[3] == 105 + 208 and v0[3] == 5 + 700 - 100 + 100 + 208
    v, v0, _ = phase_values(terms, 2, kv, kv0, 0, [0] * 4, 0, None)  # (the phases' peaks alone)
    assert v[3] == 150 + 208 and v0[3] == 750 - 100 + 100 + 208


CHECKED_FLOAT = '''
import torch
from torch import nn

BATCH_SIZE = 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8, bias=False)
        self.c = nn.Linear(8, 8, bias=False)

    def forward(self, x, y):
        # (an explicit `.float()`: the export checks its input's dtype, then the matmul casts it to bf16)
        h = self.a(x) + x @ self.b.weight.float().t() + x @ self.c.weight.t()
        return {"loss": torch.nn.functional.mse_loss(h.float(), y)}


def build_model():
    return Net()


def example_batch(batch_size):
    return {"x": torch.randn(batch_size, 8), "y": torch.randn(batch_size, 8)}
'''


def test_a_parameter_the_graph_checks_is_fp32_is_not_cast_only(tmp_path):
    """A parameter read through an explicit ``.float()`` (the export asserts its dtype there: a bf16
    gather fails that check, as Mamba's ``dt_proj.bias`` did) is not cast-only, though the matmul after
    it only casts it; the same read without the ``.float()`` is."""
    f = tmp_path / "checked.py"
    f.write_text(CHECKED_FLOAT)
    spec = load_model_file(f)
    captured, program, _, net = capture_program(spec, 2, fake=False, dtype="bf16")
    by_id = {id(p): n for n, p in net.named_parameters()}
    got = {by_id[i] for i in cast_only(program, captured.flat_inputs, "bf16", fake=True)}
    assert got == {"a.weight", "a.bias", "c.weight"}, got
