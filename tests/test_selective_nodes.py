"""Selective figures node by node (memflow/profile/selective_nodes.py) equal the traced step's.

Each case traces one fake step twice from the same program: once with the figures from a traced
forward and backward with every node selective (``selective="step"``, the reference), once node
by node (``"nodes"``, what a profile uses). Every node's fields, and the rest of the graph, are
equal, and the node-by-node runs are fewer than the nodes where blocks repeat."""
from __future__ import annotations

from pathlib import Path

import pytest

from memflow.graph.build import capture_program
from memflow.graph.training import autocast, opt_params
from memflow.model_file import load_model_file
from memflow.profile import selective_nodes
from memflow.profile.trace import trace_step

ROOT = Path(__file__).resolve().parent.parent
SEL = ("sel_saved_bytes", "sel_bwd_transient_bytes", "sel_held_bwd_transient_bytes", "sel_steady_bwd_transient_bytes",
       "sel_replay_flops", "sel_replay_bytes_accessed", "sel_replay_ops")


def _both(path: Path, b: int, dtype: str = "fp32"):
    spec = load_model_file(path)
    captured, program, mode, model = capture_program(spec, b, granularity="auto", dtype=dtype, fake=True, seed=0)
    out = []
    with mode:
        opt = spec.make_optimizer(opt_params(model, captured.split))
        with autocast(dtype):
            for i, how in enumerate(("step", "nodes")):
                out.append(trace_step(program, captured.flat_inputs, opt, captured.names, captured.module_paths,
                                      model_name=spec.name, batch_size=b, dtype=dtype, state_ready=i > 0,
                                      warm_up=i == 0, selective=how))
    return out


@pytest.mark.parametrize("path,b,dtype,runs", [
    ("examples/gpt2.py", 4, "fp32", 7),  # 2 blocks: the first is the last to hold the attention mask
    ("examples/gpt2.py", 1, "fp32", 7),
    ("tests/models/sac.py", 8, "fp32", 4),  # 3 blocks, 2 runs
    ("tests/models/sac.py", 8, "bf16", 4),
    ("tests/models/reuse.py", 4, "fp32", 4),  # parameters read by several nodes: gradients already made
    ("tests/models/tied.py", 4, "fp32", 3),
    ("examples/lstm.py", 4, "fp32", 4),
    # the embedding's output read first by a module that saves nothing (GPT-NeoX's rotary): the first
    # block's backward is the last to hold it, the positions' forward not (8 KiB under, 8 KiB over)
    ("tests/models/side_reader.py", 4, "fp32", 5),
    ("tests/models/side_reader.py", 4, "bf16", 5),
])
def test_node_figures_equal_the_traced_step(monkeypatch, path, b, dtype, runs):
    calls = []
    real_run = selective_nodes.run_node

    def counting(*a, **k):
        calls.append(1)
        return real_run(*a, **k)

    monkeypatch.setattr(selective_nodes, "run_node", counting)
    step, nodes = _both(ROOT / path, b, dtype)
    assert len(calls) == runs
    assert sum(a.sel_saved_bytes > 0 and a.sel_replay_ops > 0 for a in step.nodes) >= 2
    for a, c in zip(step.nodes, nodes.nodes):
        assert {f: getattr(a, f) for f in SEL} == {f: getattr(c, f) for f in SEL}, a.name
    assert step.to_dict() == nodes.to_dict()


def test_autocast_with_shared_parameters_traces_the_step(monkeypatch):
    """Under autocast a parameter that several nodes read (tied embeddings) has its cast cached by
    one node's replay for another's: not reproduced node by node, so the step is traced."""
    calls = []
    monkeypatch.setattr(selective_nodes, "run_node", lambda *a, **k: calls.append(1))
    step, nodes = _both(ROOT / "tests/models/tied.py", 4, "bf16")
    assert not calls
    assert step.to_dict() == nodes.to_dict()
