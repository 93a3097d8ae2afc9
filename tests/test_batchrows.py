"""A batch that does not split by rows (a graph batch: ``edges`` ``(2, E)`` numbering the whole batch's
nodes, a node-to-graph map of ``N·B`` entries) trains whole. Split by rows, each micro-batch read the whole
batch's edges against its own nodes: a GNN's planned run stopped on "IndexError: index out of range in
self" (the outside4 bench, a plan with micro-batches). The planner now bounds such a model to dp 1 and
one micro-batch, says so once, and refuses a request for more in one line; a run of a plan that splits such
a batch (written by hand, or forced) is refused by its ranks before their first step, in one line."""
from __future__ import annotations

from pathlib import Path

import pytest

from memflow.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
GNN = str(ROOT / "tests" / "models" / "gnn_graphs.py")


def test_inputs_that_grow_with_the_batch_but_not_by_rows_are_found():
    from memflow.batchrows import unsplit_inputs
    from memflow.planner import resolve_spec

    bad = unsplit_inputs(resolve_spec(GNN), 8)
    assert [b.split(" ")[0] for b in bad] == ["'edges'", "'graph_of'"]
    assert "(2, 192) at batch 8, (2, 96) at 4" in bad[0]
    for ok in ("gru.py", "tied.py", "dist_vae.py", "ctc_asr.py"):  # rows, and inputs read whole
        assert unsplit_inputs(resolve_spec(str(ROOT / "tests" / "models" / ok)), 8) == []


def test_a_graph_batch_is_planned_whole_and_runs(capfd):
    """Where memory is tight (micro-batches or data parallelism would be the search's way) the plan has
    dp 1 and one micro-batch, warned once; it runs, with plain training's losses; dp 2 asked for is one
    clear error."""
    from memflow.cluster import Cluster
    from memflow.executor import RunConfig, plain_losses, run_plan
    from memflow.planner import plan

    cl = Cluster.load("cpu-2")
    cl = cl.with_memory(cl.device.memory_bytes // 8192)
    p = plan(GNN, cluster=cl, batch_size=8, time_budget_s=0.5, seed=0)
    assert p.strategy.dp == 1 and p.strategy.microbatches == 1
    err = capfd.readouterr().err
    assert err.count("grow with the batch but not by rows") == 1
    rep = run_plan(RunConfig(model_file=GNN, batch_size=8, strategy=p.strategy, steps=2, warmup=0, device="cpu",
                             node_names=list(p.node_names)), nproc=p.strategy.num_devices, timeout_s=240)
    want = plain_losses(GNN, 8, 2, seed=0)
    assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(rep.losses, want)), (rep.losses, want)
    with pytest.raises(ConfigError, match="cannot be split among data-parallel ranks or micro-batches; plan it with dp 1"):
        plan(GNN, cluster="cpu-2", batch_size=8, time_budget_s=0.5, dp=2)


def test_dp_asked_for_on_the_cli_is_one_line_and_exit_2(tmp_path, capfd, monkeypatch):
    from memflow.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMFLOW_CACHE_DIR", str(tmp_path / "cache"))
    rc = main(["plan", GNN, "--cluster", "cpu-2", "--dp", "2", "--batch-size", "8"])
    err = capfd.readouterr().err.strip().split("\n")
    assert rc == 2 and err[-1].startswith("memflow: error: ") and "Traceback" not in "\n".join(err)
    assert "'edges' (2, 192) at batch 8" in err[-1] and "plan it with dp 1 and one micro-batch" in err[-1]


def test_a_batch_built_from_values_is_checked_with_real_tensors(capfd):
    """A two-tower retrieval model's watch histories, flattened for ``EmbeddingBag`` (as many ids as
    ``int(lengths.sum())``, a value fake tensors do not have): the fake build failed and nothing was
    bounded, so a plan with micro-batches would cut the offsets from the ids they index (bench/outside6).
    Built real at two small sizes, the ids are found; the plan trains the batch whole, with plain losses."""
    from memflow.batchrows import unsplit_inputs
    from memflow.cluster import Cluster
    from memflow.executor import RunConfig, plain_losses, run_plan
    from memflow.planner import plan, resolve_spec

    path = str(ROOT / "tests" / "models" / "two_tower.py")
    assert [b.split(" ")[0] for b in unsplit_inputs(resolve_spec(path), 8)] == ["'hist_ids'"]
    cl = Cluster.load("cpu-2")
    p = plan(path, cluster=cl.with_memory(cl.device.memory_bytes // 8192), batch_size=8, time_budget_s=0.5, seed=0)
    assert p.strategy.dp == 1 and p.strategy.microbatches == 1
    assert "not by rows" in capfd.readouterr().err
    rep = run_plan(RunConfig(model_file=path, batch_size=8, strategy=p.strategy, steps=2, warmup=0, device="cpu"),
                   nproc=p.strategy.num_devices, timeout_s=240)
    want = plain_losses(path, 8, 2, seed=0)
    assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(rep.losses, want)), (rep.losses, want)


def test_a_plan_that_splits_a_graph_batch_is_refused_by_the_run_in_one_line():
    """A plan written by hand (or forced: bench/forced_sweep) with two micro-batches on a graph batch: the ranks
    refuse it before their first step, naming the inputs (before, rank 0 stopped on "IndexError: index out of
    range in self")."""
    from memflow.errors import ExecutionError
    from memflow.executor import RunConfig, run_plan
    from memflow.planner import GraphSource, resolve_spec
    from memflow.cluster import Cluster
    from memflow.strategy import Strategy

    g = GraphSource(resolve_spec(GNN), Cluster.load("cpu-1"))(4)
    st = Strategy(dp=1, pp=1, stage_of=[0] * g.n, actions=["keep"] * g.n, microbatches=2)
    with pytest.raises((ConfigError, ExecutionError)) as e:
        run_plan(RunConfig(model_file=GNN, batch_size=8, strategy=st, steps=2, warmup=0, device="cpu",
                           node_names=[nd.name for nd in g.nodes]), nproc=1, timeout_s=240)
    msg = str(e.value)
    assert "'edges' (2, 192) at batch 8" in msg and "and 2 micro-batch(es); run it with dp 1" in msg, msg
    assert "\n" not in msg and "IndexError" not in msg
