"""The ``selective`` memory action (issue 25): a node checkpointed with a per-op policy that holds
the outputs of its matmuls, convolutions and attention kernels and runs its cheap ops again before
its backward (memflow.graph.selective). Profiled, simulated, searched, executed and written in plans
like keep / recompute / swap."""
from __future__ import annotations

import copy
import dataclasses
import random
from pathlib import Path

import pytest
import torch

from bench.bench_fidelity import run_case
from memflow.cluster import Cluster
from memflow.executor import RunConfig, run_plan
from memflow.graph.selective import is_expensive, policy
from memflow.kinds import ACTIONS, KEEP, RECOMPUTE, SELECTIVE, SWAP
from memflow.model_file import load_model_file
from memflow.planfile import Plan, load_plan
from memflow.planner import GraphSource, prediction, resolve_spec
from memflow.profile.build import capture_graph
from memflow.search.api import search
from memflow.search.context import SearchContext
from memflow.search.exact import solve_exact
from memflow.simulator import Simulator
from memflow.strategy import Strategy
from memflow.summary import action_lines
from tests.reference import plain_losses

MODEL = Path(__file__).resolve().parent / "models" / "sac.py"
B, S, H, HEADS, LAYERS = 8, 32, 32, 4, 3  # tests/models/sac.py at batch B


@pytest.fixture(scope="module")
def spec():
    return resolve_spec(str(MODEL))


@pytest.fixture(scope="module")
def graph(spec):
    return capture_graph(spec, B, measure=True, repeats=1)


def test_policy_saves_the_expensive_ops_only():
    aten = torch.ops.aten
    for op in (aten.mm.default, aten.addmm.default, aten.bmm.default, aten.convolution.default,
               aten._scaled_dot_product_flash_attention_for_cpu.default):
        assert is_expensive(op) and policy(None, op).name == "MUST_SAVE"
    for op in (aten.native_layer_norm.default, aten.gelu.default, aten.add.Tensor, aten._softmax.default,
               aten.native_dropout.default, aten.view.default):
        assert not is_expensive(op) and policy(None, op).name == "PREFER_RECOMPUTE"
    assert SELECTIVE in ACTIONS


def test_selective_saves_the_matmul_outputs_and_less_than_keep(graph):
    """(1) Per block (attention + MLP): the held bytes are below what keep holds, and at least the
    bytes of the matmul and attention outputs counted by hand: QKV (3H), the attention output and
    its log-sum-exp, the output projection (H), up (4H), down (H), per token, in fp32."""
    tokens = B * S
    by_hand = 4 * tokens * (3 * H + H + H + 4 * H + H) + 4 * B * HEADS * S
    blocks = [nd for nd in graph.nodes if nd.name.startswith("blocks.")]
    assert len(blocks) == LAYERS
    for nd in blocks:
        assert by_hand <= nd.sel_saved_bytes < nd.saved_bytes, nd
        # the replay runs the cheap ops again: no FLOPs, most of the forward's memory-bound bytes
        assert nd.sel_replay_flops == 0 and 0 < nd.sel_replay_bytes_accessed <= nd.fwd_bytes_accessed
        assert 0 <= nd.sel_replay_time_s < nd.fwd_time_s
    # a node without a matmul (the final norm) holds nothing of its own under selective
    norm = graph.nodes[graph.node_index("norm")]
    assert norm.sel_saved_bytes == 0 < norm.saved_bytes


def test_fake_graphs_get_selective_figures(spec, graph):
    """A graph for a GPU we do not have (fake tensors, roofline times) gets the same bytes and a
    replay time from the replay's own costs."""
    g = GraphSource(spec, Cluster.for_gpus(1, "v100-16gb"), cache=False)(B)
    for nd, real in zip(g.nodes, graph.nodes):
        assert nd.sel_saved_bytes == real.sel_saved_bytes
        assert 0 <= nd.sel_replay_time_s <= nd.fwd_time_s


def test_selective_training_equals_plain_training():
    """(2) Three steps with every block selective (its dropout replayed with the same random state)
    give plain training's losses."""
    st = Strategy.from_boundaries(6, [], dp=1, actions=[KEEP] + [SELECTIVE] * LAYERS + [RECOMPUTE, SELECTIVE])
    res = run_plan(RunConfig(model_file=str(MODEL), batch_size=B, strategy=st.to_dict(), steps=3), nproc=1,
                   timeout_s=240)
    ref = plain_losses(str(MODEL), B, 3, seed=0)
    assert len(res.losses) == 3
    for a, b in zip(res.losses, ref):
        assert abs(a - b) <= 1e-6 * abs(b), (res.losses, ref)


@pytest.mark.parametrize("kind,ranks", [("selective", 1), ("sel-alt", 1), ("pp2-m2-sel", 2)])
def test_selective_peak_is_predicted(kind, ranks):
    """(3) The executor's accounted peak with selective nodes (one CPU device with every node
    selective, or every other one and the rest recomputed; two pipeline stages of selective nodes
    with two micro-batches in flight) is what the simulator predicts: never under, within 3%. (The
    last stage keeps each earlier micro-batch's 4-byte loss for its report, which the prediction
    leaves out: executor/stage.py.)"""
    rows = run_case(str(MODEL), {}, 32, kind, steps=2, runs=1, warmup=1)
    assert len(rows) == ranks
    for r in rows:
        assert r["pp"] >= r["mp"] - 4 and r["pp"] / r["mp"] - 1 <= 0.03, r


@pytest.fixture(scope="module")
def gpu_graph(spec):
    return GraphSource(spec, Cluster.for_gpus(1, "v100-16gb"), cache=False)(64)


@pytest.mark.parametrize("frac", [0.85, 0.65])
def test_exact_and_search_agree_where_selective_is_best(gpu_graph, frac):
    """(4) One V100 (roofline times), no host memory to swap into, a cap below keep's peak: the
    exact solver's optimum holds a selective node and is faster than the best plan without
    selective; the MCMC search finds a plan as fast."""
    g = gpu_graph
    cl = Cluster.for_gpus(1, "v100-16gb")
    keep = max(Simulator(g, cl).evaluate(Strategy.single(g.n)).peak_bytes)
    capped = dataclasses.replace(cl.with_memory(int(keep * frac / 0.9)), host_memory_bytes=1)
    without = copy.deepcopy(g)
    for nd in without.nodes:
        nd.sel_saved_bytes = -1
    assert SELECTIVE in SearchContext({64: g}, 64, capped).actions
    assert SELECTIVE not in SearchContext({64: without}, 64, capped).actions
    ex = solve_exact({64: g}, 64, capped, max_microbatches=1)
    ex0 = solve_exact({64: without}, 64, capped, max_microbatches=1)
    assert ex.best is not None and ex0.best is not None
    assert SELECTIVE in ex.best.actions and SWAP not in ex.best.actions
    assert ex.best_eval.step_time_s < ex0.best_eval.step_time_s
    r = search({64: g}, 64, capped, seed=0, baselines=False, max_microbatches=1)
    assert r.best is not None and r.best_eval.fits
    assert r.best_eval.step_time_s <= ex.best_eval.step_time_s * 1.001


def _plan(spec, graph, st: Strategy) -> Plan:
    cl = Cluster.load("cpu-1")
    ev = Simulator(graph, cl).evaluate(st, detail=True)
    return Plan(model_file=str(spec.path), model_name=spec.name, batch_size=B, strategy=st, cluster=cl.to_dict(),
                node_names=[nd.name for nd in graph.nodes], fingerprint=graph.fingerprint,
                predicted=prediction(ev, B, st))


def test_plans_with_and_without_selective_load(spec, graph, tmp_path):
    """(5) A plan file of keep / recompute / swap (as written before selective) still loads, and one
    with selective nodes round-trips and names them in its summary."""
    old = _plan(spec, graph, Strategy.from_boundaries(6, [], dp=1, actions=[KEEP, RECOMPUTE, SWAP, KEEP, KEEP, KEEP]))
    text = old.save(tmp_path / "old.yaml").read_text()
    assert SELECTIVE not in text
    assert load_plan(tmp_path / "old.yaml").strategy.actions == [KEEP, RECOMPUTE, SWAP, KEEP, KEEP, KEEP]
    st = Strategy.from_boundaries(6, [], dp=1, actions=[KEEP, SELECTIVE, SELECTIVE, RECOMPUTE, KEEP, KEEP])
    new = load_plan(_plan(spec, graph, st).save(tmp_path / "new.yaml"))
    assert new.strategy.actions == st.actions
    assert "2 selective" in new.strategy.summary() and "1 recompute" in new.strategy.summary()
    assert any(line.startswith("selective (2): blocks.0") for line in action_lines(new))
    assert "selective" not in Strategy.single(6).summary()


def test_selective_never_holds_less_than_recompute(gpu_graph):
    """What lets the no-fit proof leave selective out (memflow.planner.prove_no_fit): with any other
    nodes' actions, a node made selective instead of recomputed never lowers a peak, in one stage or
    two, with one micro-batch or several."""
    g = gpu_graph
    sim = Simulator(g, Cluster.for_gpus(2, "v100-16gb"))
    rng = random.Random(0)
    for _ in range(40):
        acts = [rng.choice(ACTIONS) for _ in range(g.n)]
        cuts = rng.choice([[], [rng.randrange(1, g.n)]])
        kw = dict(dp=2 // (len(cuts) + 1), microbatches=rng.choice([1, 2]))
        sel = Strategy.from_boundaries(g.n, cuts, actions=acts, **kw)
        rec = Strategy.from_boundaries(g.n, cuts, actions=[RECOMPUTE if a == SELECTIVE else a for a in acts], **kw)
        assert all(s >= r for s, r in zip(sim.evaluate(sel).peak_bytes, sim.evaluate(rec).peak_bytes)), acts


def test_selective_in_bf16_with_a_module_reused_in_depth():
    """A block reused in depth under bf16 autocast: its weights are cast once by the first node that
    reads them (autocast's cache), so a later node's forward meets no cast that its selective replay
    (the cache gone) makes, and torch's selective checkpointing refused the replay ("invocation index 1
    ... not found in storage"), in the profiler and the executor alike. A selective node now runs with
    autocast's cache off: it profiles, and three steps with every node selective give plain bf16
    training's losses within 1e-4 (not to the bit: each node casts the shared weight itself, so its
    gradients from the two depths are summed in fp32 at the parameter, where plain autocast sums them
    in bf16 on its one cached copy; 3.5e-5 at the second step)."""
    from memflow.profile.build import capture_graph

    reuse = str(Path(__file__).resolve().parent / "models" / "reuse.py")
    g = capture_graph(load_model_file(reuse), 4, dtype="bf16")
    assert all(nd.sel_saved_bytes >= 0 for nd in g.nodes)
    st = Strategy.from_boundaries(g.n, [], dp=1, actions=[SELECTIVE] * g.n)
    res = run_plan(RunConfig(model_file=reuse, batch_size=4, strategy=st.to_dict(), steps=3, dtype="bf16"), nproc=1,
                   timeout_s=240)
    ref = plain_losses(reuse, 4, 3, seed=0, dtype="bf16")
    assert len(res.losses) == 3 and all(abs(a - b) <= 1e-4 * abs(b) for a, b in zip(res.losses, ref)), (res.losses, ref)


class _SigmoidInPlace(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.sigmoid_(self.lin(x)) * 2  # (in place, straight on the saved matmul's output)


@pytest.mark.parametrize("name", ["gru", "gru-cell", "bigru", "lstm", "sigmoid_"])
def test_selective_gradients_are_plain_ones_where_saved_outputs_are_written_in_place(name):
    """A selective node's gradients are plain autograd's, to the bit, where the node writes into an
    expensive op's saved output in place: the GRU's CPU kernels add into their gates' matmul outputs through
    unsafe_split pieces (silently 25-37% off before), a sigmoid_ on a linear's output (stopped the backward)."""
    from torch.utils.checkpoint import checkpoint

    from memflow.graph.selective import selective_context

    torch.manual_seed(0)
    mod, x = {"gru": (torch.nn.GRU(6, 5, batch_first=True), (3, 7, 6)),
              "gru-cell": (torch.nn.GRUCell(6, 5), (3, 6)),
              "bigru": (torch.nn.GRU(6, 5, 2, batch_first=True, bidirectional=True), (3, 7, 6)),
              "lstm": (torch.nn.LSTM(6, 5, batch_first=True), (3, 7, 6)),
              "sigmoid_": (_SigmoidInPlace(), (3, 8))}[name]
    x = torch.randn(*x, requires_grad=True)

    def f(x):
        out = mod(x)
        return out[0] if isinstance(out, tuple) else out

    def grads(sel: bool):
        mod.zero_grad(set_to_none=True)
        x.grad = None
        y = checkpoint(f, x, use_reentrant=False, context_fn=selective_context) if sel else f(x)
        y.square().sum().backward()
        return [p.grad for p in mod.parameters()] + [x.grad]

    for want, got in zip(grads(False), grads(True)):
        assert torch.equal(want, got)
