"""Tensor parallelism found on the captured graph (issue 24): the rules, the simulator's terms,
and runs on gloo ranks that train as plain training does and use the memory predicted."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from memflow.errors import ConfigError, StrategyError
from memflow.graph.tp import MEGATRON, MEGATRON_SP, REPLICATED, SEQUENCE, shard
from memflow.strategy import Strategy

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ the rules, on captured graphs
@pytest.fixture(scope="module")
def tiny(request):
    import os
    old = os.environ.get("MEMFLOW_EXAMPLE_SCALE")
    os.environ["MEMFLOW_EXAMPLE_SCALE"] = "tiny"
    yield
    if old is None:
        os.environ.pop("MEMFLOW_EXAMPLE_SCALE")
    else:
        os.environ["MEMFLOW_EXAMPLE_SCALE"] = old


def _program(model: str, tp: int, rank: int = 0, sequence: bool = True):
    from memflow.graph.build import capture_program
    from memflow.model_file import load_model_file

    spec = dataclasses.replace(load_model_file(ROOT / "examples" / f"{model}.py"), tp=tp, sequence=sequence)
    return capture_program(spec, 4, fake=False, tp_rank=rank)


@pytest.mark.parametrize("model,blocks,tokens", [
    ("gpt2", ["transformer.h.0", "transformer.h.1"], ["transformer.ln_f"]),
    ("llama", ["model.embed_tokens", "model.layers.0", "model.layers.1", "lm_head"], ["model.norm"]),
    ("bert", ["bert.encoder.layer.0", "bert.encoder.layer.1"], [])])
def test_transformer_blocks_split_and_nothing_else(tiny, model, blocks, tokens):
    """The blocks' attention and MLP pairs split, and an untied vocabulary (Llama's) by rows: its
    lookup and its output layer with the loss over it; tied vocabularies (GPT-2's, BERT's: read by
    two nodes), tables of positions and heads a norm reads stay replicated. With sequence
    parallelism the blocks' norms and residual adds are split by tokens, and so is a final norm
    between the last block and the head (its input arrives split)."""
    captured, program, _, _ = _program(model, 2)
    split = [name for name, kind in zip(captured.names, program.partitioning) if kind in (MEGATRON, MEGATRON_SP)]
    assert split == blocks
    assert [n for n, kind in zip(captured.names, program.partitioning) if kind == SEQUENCE] == tokens
    sp_blocks = [n for n, kind in zip(captured.names, program.partitioning) if kind == MEGATRON_SP]
    assert set(sp_blocks) >= {b for b in blocks if ".layer" in b or ".h." in b}
    with_sp = program.partitioning
    _, plain, _, _ = _program(model, 2, sequence=False)
    assert [k for k in plain.partitioning if k != REPLICATED] == [MEGATRON] * len(blocks)
    assert len(with_sp) == len(plain.partitioning)


def test_fused_qkv_is_cut_per_block_and_each_rank_holds_its_heads(tiny):
    """GPT-2's Conv1D ``c_attn`` ([in, 3·h]) is split into q, k and v before the heads: each rank's
    slice is its heads of q, of k and of v (a plain half would give rank 0 all of q and half of k)."""
    whole = _program("gpt2", 1)[1]
    half = [_program("gpt2", 2, r)[1] for r in range(2)]
    name = "model_transformer_h_0_attn_c_attn_weight"
    w = whole.attr_value(name)
    h = w.shape[1] // 3
    for r, prog in enumerate(half):
        got = prog.attr_value(name)
        want = torch.cat([w[:, j * h + r * h // 2:j * h + (r + 1) * h // 2] for j in range(3)], 1)
        assert torch.equal(got, want)
    # the output projection is row-split (its input features), its bias whole
    assert half[1].attr_value("model_transformer_h_0_attn_c_proj_weight").shape == (32, 64)
    assert half[1].attr_value("model_transformer_h_0_attn_c_proj_bias").shape == (64,)


def test_shard_takes_each_blocks_piece():
    t = torch.arange(12.0)
    assert shard(t, 0, 1, 2, 1).tolist() == [6, 7, 8, 9, 10, 11]
    assert shard(t, 0, 3, 2, 0).tolist() == [0, 1, 4, 5, 8, 9]


def test_a_norm_between_two_linears_keeps_them_replicated():
    """An op outside the rules (a LayerNorm over the features) reading a column-split output gives
    that split up: the node stays replicated, correctly."""
    from memflow.graph.tp_rules import analyse

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.n, self.b = torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 8)

        def forward(self, x):
            return x + self.b(self.n(self.a(x)))

    class Mlp(M):
        def forward(self, x):
            return x + self.b(torch.relu(self.a(x)))

    for cls, split in ((M, False), (Mlp, True)):
        gm = torch.export.export(cls(), (torch.randn(2, 8),)).graph_module
        params = {n.name for n in gm.graph.nodes if n.op == "placeholder" and n.name.startswith("p_")}
        sp = analyse(gm, params, 2)
        assert sp.split == split, sp.reason
        if split:
            assert len(sp.columns) == 1 and len(sp.rows) == 1


# ------------------------------------------------------------------ records and simulator
def test_strategy_tp_record():
    st = Strategy.single(4, dp=2).copy(tp=2)
    assert st.num_devices == 4 and st.coords(3) == (0, 1, 1) and st.rank_of(0, 1, 1) == 3
    assert "tp" not in Strategy.single(4).to_dict()  # (older records and digests unchanged)
    assert Strategy.from_dict(st.to_dict()) == st
    with pytest.raises(StrategyError, match="tp 2"):
        st.validate(4, 2)


def test_simulator_adds_the_collectives_and_reports_every_rank():
    """A tp graph's figures are one rank's; on the grouped cluster each node's forward and backward
    grow by its ring all-reduces, 2(tp-1)/tp · bytes / β + 2(tp-1) α each, and every rank of a
    group gets its group's peak."""
    from memflow.cluster import Cluster, Link
    from memflow.simulator import Simulator
    from memflow.simulator.synthetic import chain_graph

    g = chain_graph(3, act_bytes=1000, saved_bytes=1000, param_bytes=10**4, fwd_s=1e-3, bwd_s=2e-3)
    g.tp = 2
    g.nodes[1].tp_fwd_bytes, g.nodes[1].tp_fwd_collectives = 10**6, 2
    g.nodes[1].tp_bwd_bytes, g.nodes[1].tp_bwd_collectives = 10**6, 2
    cl = dataclasses.replace(Cluster.for_gpus(4, "v100-16gb"), intra_link=Link(1e9, 1e-5))
    sim = Simulator(g, cl)
    one = Simulator(dataclasses.replace(g, tp=1, nodes=[dataclasses.replace(nd) for nd in g.nodes]),
                    cl.with_devices(2))
    st = Strategy.single(3, dp=2)
    ar = 2 * (1 / 2) * 10**6 / 1e9 + 2 * 1e-5 * 2
    assert sim.evaluate(st).step_time_s - one.evaluate(st).step_time_s == pytest.approx(2 * ar, rel=1e-6)
    res = sim.evaluate(st.copy(tp=2), detail=True)
    assert len(res.peak_bytes) == 4 and res.peak_bytes[0] == res.peak_bytes[1] == one.evaluate(st).peak_bytes[0]
    with pytest.raises(ConfigError, match="divide"):
        cl.with_devices(3).grouped(2)


def test_a_model_with_nothing_to_split_is_one_line(tiny, tmp_path):
    """The LSTM has no linear pair: ``--tp 2`` is a one-line error saying so, not a crash."""
    import memflow

    with pytest.raises(ConfigError, match="no node of lstm splits"):
        memflow.plan(str(ROOT / "examples" / "lstm.py"), cluster="cpu-2", tp=2, batch_size=4, cache=False,
                     iterations=10)



@pytest.mark.parametrize("model,degrees", [
    ("gpt2", {1, 2, 8}),
    ("lstm", {1, 2}),  # tp 2 splits nothing: tp 8 (a multiple) is not profiled at all
])
def test_each_degree_is_profiled_once_and_multiples_of_an_unsplit_one_not_at_all(tiny, monkeypatch, model,
                                                                                degrees):
    """Predicted costs on an NVLink machine: each of the planner's unfixed tp degrees (1, 2, 8; with
    sequence parallelism and without) profiles its micro-batch sizes in one call (one shared export);
    a degree whose graph splits nothing rules out its multiples."""
    import memflow
    from memflow import planner

    calls = []
    real = planner.GraphSource.all

    def all_(self, sizes):
        todo = [b for b in sizes if b not in self.graphs]
        if todo:  # (a call that finds every size profiled already profiles nothing)
            calls.append((self.spec.tp, self.spec.sequence, len(todo)))
        return real(self, sizes)

    monkeypatch.setattr(planner.GraphSource, "all", all_)
    p = memflow.plan(str(ROOT / "examples" / f"{model}.py"), cluster="a100-8-nvlink", batch_size=8, cache=True,
                     iterations=20)
    assert {tp for tp, _, _ in calls} == degrees
    assert len({(tp, seq) for tp, seq, _ in calls}) == len(calls)  # no variant profiled twice
    assert all(n == 4 for _, _, n in calls)  # micro-batch sizes 8, 4, 2, 1 at once
    assert p.strategy.tp in degrees

# ------------------------------------------------------------------ runs (gloo ranks)
# (Llama's two-rank case widens the four-rank one: MEMFLOW_TEST_FULL=1)
@pytest.mark.parametrize("model,kind", [("gpt2", "tp2"), ("gpt2", "tp2-nosp"), ("bert", "tp2-rec-m2"),
                                        pytest.param("llama", "tp2", marks=pytest.mark.full),
                                        ("llama", "dp2-tp2"), ("gpt2", "pp2-tp2"), ("gpt2", "dp2-tp2-fsdp")])
def test_tp_runs_as_plain_training_and_as_predicted(model, kind, monkeypatch):
    """Forced tensor parallelism on gloo ranks (two: one group; four: two data-parallel replicas or two
    pipeline stages of a group each), BERT also with every other node recomputed (the replay runs the
    group's all-reduces again) and two micro-batches: the losses of plain single-process training
    over the same pieces of each batch within 1e-4 (relative), every rank's peak within 5% of its
    prediction. ``nosp``: a plan without sequence parallelism (Megatron's pairs alone), which the
    executor reads off the plan's partitioning."""
    from bench.bench_fidelity import run_case
    from memflow.executor import plain_losses

    path = str(ROOT / "examples" / f"{model}.py")
    rows = run_case(path, {}, 8, kind, steps=3, runs=1, warmup=1)
    assert len(rows) == (4 if kind in ("dp2-tp2", "pp2-tp2", "dp2-tp2-fsdp") else 2)
    for r in rows:
        assert abs(r["pp"] / r["mp"] - 1) <= 0.05, r
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    pieces = {"dp2-tp2": 2, "tp2-rec-m2": 2, "pp2-tp2": 2, "dp2-tp2-fsdp": 2}.get(kind, 1)
    ref = plain_losses(path, 8, 3, seed=0, pieces=pieces)
    got = rows[0]["losses"]
    assert len(got) == 3 and all(abs(a - b) <= 1e-4 * abs(b) for a, b in zip(got, ref)), (got, ref)


# ------------------------------------------------------------------ sequence parallelism
def test_token_chunks_gather_back_whole_with_blocks():
    """A split along a dimension made of blocks (``[b, s, h]`` viewed as ``[b·s, h]``): each rank's
    chunk is its part of every block, and the gather puts the whole back in order."""
    from memflow.graph.sp import all_gather, chunk_of
    from memflow.graph.tp import TPGroup

    t = torch.arange(4 * 6 * 3.0).reshape(4, 6, 3)
    flat = t.reshape(24, 3)
    for r in range(2):
        assert torch.equal(chunk_of(flat, -2, 4, 2, r), t[:, 3 * r:3 * (r + 1)].reshape(12, 3))
        assert torch.equal(chunk_of(t, -2, 1, 2, r), t[:, 3 * r:3 * (r + 1)])
    g = TPGroup(2)  # no process group: each rank's part stands in for every rank's
    assert torch.equal(all_gather(g, t[:, :3], -2, 1, (0, "x")), torch.cat([t[:, :3], t[:, :3]], 1))
    assert g.moved[(0, "x")] == t.numel() * 4 // 2  # half an all-reduce of the whole


def test_seq_views_follow_the_tokens():
    from memflow.graph.sp_rules import Seq, seq_view
    from memflow.graph.tp_rules import view_groups

    st = Seq(-2, 1, frozenset())
    merged = seq_view(st, (4, 32, 64), (128, 64), view_groups((4, 32, 64), (128, 64)), 2)
    assert (merged.dim, merged.outer) == (-2, 4)  # the batch dims become blocks
    back = seq_view(merged, (128, 64), (4, 32, 64), view_groups((128, 64), (4, 32, 64)), 2)
    assert (back.dim, back.outer) == (-2, 1)
    # the features cut into heads: the tokens stay where they are
    heads = seq_view(st, (4, 32, 64), (4, 32, 4, 16), view_groups((4, 32, 64), (4, 32, 4, 16)), 2)
    assert (heads.dim, heads.outer) == (-3, 1)
    # the tokens merged with the features after them: not a token split any more
    assert seq_view(st, (4, 32, 64), (4, 2048), view_groups((4, 32, 64), (4, 2048)), 2) is None


def test_sequence_parallel_blocks_move_what_megatron_moves_and_save_less(tiny):
    """Per block, sequence parallelism's all-gathers and reduce-scatters move in the forward what
    Megatron's two all-reduces move (counted as all-reduce bytes); the backward adds the norms' and
    biases' partial gradients and the gathers again of the column linears' inputs (Megatron's:
    each rank keeps its tokens of them, not the whole); the blocks save less."""
    from memflow.model_file import load_model_file
    from memflow.profile import profile_model

    spec = dataclasses.replace(load_model_file(ROOT / "examples" / "gpt2.py"), tp=2)
    sp = profile_model(spec, 4, cache=False)
    mg = profile_model(dataclasses.replace(spec, sequence=False), 4, cache=False)
    blocks = [k for k, nd in enumerate(sp.nodes) if nd.partitioning == MEGATRON_SP]
    assert blocks and all(mg.nodes[k].partitioning == MEGATRON for k in blocks)
    h, tokens = 64, 4 * 32
    for k in blocks:
        a, b = sp.nodes[k], mg.nodes[k]
        assert a.tp_fwd_bytes == b.tp_fwd_bytes and a.tp_fwd_collectives == 2 * b.tp_fwd_collectives
        partial = (4 * h + 2 * h) * 4  # ln_1's and ln_2's weight and bias, the two row biases (fp32)
        # the first block splits its whole input at its entry: its gradient is all-gathered
        entry = tokens * h * 4 // 2 if k == blocks[0] else 0
        # the attention's and the MLP's inputs are kept as this rank's tokens and gathered again
        again = 2 * tokens * h * 4 // 2
        assert a.tp_bwd_bytes == b.tp_bwd_bytes + partial + entry + again
        assert a.saved_bytes < b.saved_bytes


def test_sequence_parallel_borders_train_as_plain_training():
    """A whole operand varying along the tokens (a position table, split alike), one broadcast
    along them (a gate: its gradient summed over the group) and a node that mixes the tokens (its
    input gathered, its output split again) on two gloo ranks: plain training's losses, each rank's
    peak within 5% of its prediction."""
    from bench.bench_fidelity import run_case
    from memflow.executor import plain_losses

    path = str(ROOT / "tests" / "models" / "sp_mix.py")
    rows = run_case(path, {}, 8, "tp2", steps=3, runs=1, warmup=1)
    assert len(rows) == 2
    for r in rows:
        assert abs(r["pp"] / r["mp"] - 1) <= 0.05, r
    ref = plain_losses(path, 8, 3, seed=0)
    got = rows[0]["losses"]
    assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(got, ref)), (got, ref)


def test_sequence_parallel_partitionings_of_the_mixing_model():
    from memflow.graph.build import capture_program
    from memflow.model_file import load_model_file

    spec = dataclasses.replace(load_model_file(ROOT / "tests" / "models" / "sp_mix.py"), tp=2)
    captured, program, _, _ = capture_program(spec, 4, fake=False)
    kinds = dict(zip(captured.names, program.partitioning))
    assert kinds == {"embed": REPLICATED, "block0": MEGATRON_SP, "mix": SEQUENCE, "block1": MEGATRON_SP,
                     "norm": REPLICATED}
    sites = {c.index: sorted(str(n.target).rsplit("_", 1)[0] for n in c.module.graph.nodes if n.op == "call_module")
             for c in program.calls}
    assert sites[2] == ["sp_gather", "sp_scatter"]  # the running mean: whole in, split again out
    assert "sp_gather" in sites[4]  # the final norm's input arrives split; the head reads it whole


@pytest.mark.parametrize("autocast", [False, True])
def test_fused_columns_backward_equals_autograd(autocast):
    """The fused gather + column linears (a group of one: the gathers are the identity) give the
    gradients autograd gives the plain linears, under bf16 autocast too."""
    from memflow.graph.sp import SPColumns
    from memflow.graph.tp import TPGroup

    torch.manual_seed(0)
    x = torch.randn(2, 6, 8, requires_grad=True)
    w1, b1 = torch.randn(12, 8, requires_grad=True), torch.randn(12, requires_grad=True)
    w2 = torch.randn(8, 4, requires_grad=True)  # [in, out], as HF's Conv1D
    cols = SPColumns(TPGroup(1), (0, "c"), -2, 1, [("oi", True), ("io", False)])
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        y1, y2 = cols(x, w1, b1, w2)
        loss = (y1.float().square().sum() + y2.float().sin().sum())
    got = torch.autograd.grad(loss, (x, w1, b1, w2))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        r1, r2 = torch.nn.functional.linear(x, w1, b1), x @ w2
        ref_loss = (r1.float().square().sum() + r2.float().sin().sum())
    want = torch.autograd.grad(ref_loss, (x, w1, b1, w2))
    tol = 2e-2 if autocast else 1e-5
    for g, r in zip(got, want):
        assert g.dtype == r.dtype and torch.allclose(g, r, rtol=tol, atol=tol * r.abs().max().item())


def test_a_tp_plan_searches_with_and_without_sequence_parallelism(tiny):
    """Sequence parallelism saves memory and costs collectives (the column linears' inputs gathered
    again in the backward, the norms' partial gradients): a tp degree is searched with it and without
    it, and the plan is the faster of the two, its partitioning saying which."""
    from memflow import planner
    from memflow.graph.tp import uses_sequence
    from memflow.progress import SILENT

    req = planner.make_request(str(ROOT / "examples" / "gpt2.py"), None, None,
                           dict(cluster="a100-8-nvlink", tp=2, batch_size=8, cache=True, iterations=300))
    spec, cl, usable, B = planner.resolve_request(req)
    runs = planner.tp_runs(spec, cl, usable, B, req, SILENT)
    assert [(r.tp, r.sequence) for r in runs] == [(2, True), (2, False)]
    times = [r.result.best_eval.step_time_s for r in runs]
    # the bound the planner skips the search without sequence parallelism by holds
    unaware = runs[0].result.baselines["memory-unaware search"][1].step_time_s
    assert times[1] >= unaware - planner.sp_comm_bound_s(runs[0], cl, B)
    p = planner.plan_request(req)
    assert p.predicted.step_time_s == pytest.approx(min(times), rel=1e-9)
    assert uses_sequence(p.strategy.partitioning) == (times[0] <= times[1])


def test_a_fused_qkv_viewed_into_heads_and_unbound_splits_and_trains_as_plain_training(monkeypatch):
    """A hand-written attention (tests/models/sac.py: ``qkv(x).view(b, s, 3, heads, d).permute(...)``,
    then ``unbind``) splits by heads as GPT-2's ``split`` does — each rank its heads of q, k and v —
    with its norms split by tokens; two gloo ranks train as plain training does, as predicted."""
    from bench.bench_fidelity import run_case
    from memflow.executor import plain_losses
    from memflow.graph.build import capture_program
    from memflow.model_file import load_model_file

    path = ROOT / "tests" / "models" / "sac.py"
    monkeypatch.setenv("MEMFLOW_SAC_DROPOUT", "0")
    spec = dataclasses.replace(load_model_file(path), tp=2)
    captured, program, _, _ = capture_program(spec, 4, fake=False)
    kinds = dict(zip(captured.names, program.partitioning))
    assert kinds["blocks.0"] == MEGATRON_SP and kinds["norm"] == SEQUENCE
    qkv = program.attr_value("model_blocks_0_attn_qkv_weight")
    assert qkv.shape == (48, 32)  # of [96, 32]: 3 blocks (q, k, v) × this rank's 2 of 4 heads × 8
    rows = run_case(str(path), {"MEMFLOW_SAC_DROPOUT": "0"}, 8, "tp2", steps=3, runs=1, warmup=1)
    for r in rows:
        assert abs(r["pp"] / r["mp"] - 1) <= 0.05, r
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    ref = plain_losses(str(path), 8, 3, seed=0)
    got = rows[0]["losses"]
    assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(got, ref)), (got, ref)


def test_an_attention_bias_per_head_is_split_with_the_heads():
    """T5 (an HF encoder-decoder this project was not built on: bench/unseen/t5.py) adds a learned
    relative-position bias per head to its attention scores: each rank takes its heads' part of it
    (its gradient all-gathered back to the whole bias), so the attention splits by heads too; two
    gloo ranks train as plain training does, as predicted."""
    from bench.bench_fidelity import run_case
    from memflow.executor import plain_losses
    from memflow.graph.build import capture_program
    from memflow.model_file import load_model_file

    path = ROOT / "bench" / "unseen" / "t5.py"
    spec = dataclasses.replace(load_model_file(path), tp=2)
    captured, program, _, _ = capture_program(spec, 4, fake=False)
    kinds = dict(zip(captured.names, program.partitioning))
    assert kinds["encoder.block.0"] == kinds["decoder.block.0"] == MEGATRON_SP
    rows = run_case(str(path), {}, 8, "tp2", steps=3, runs=1, warmup=1)
    for r in rows:
        assert abs(r["pp"] / r["mp"] - 1) <= 0.05, r
    ref = plain_losses(str(path), 8, 3, seed=0)
    got = rows[0]["losses"]
    assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(got, ref)), (got, ref)
