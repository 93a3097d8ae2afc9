"""A model's own autograd.Functions keep their backward through the capture (memflow.graph.autograd_fns)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

MODEL = str(Path(__file__).resolve().parent / "models" / "custom_fns.py")


def test_the_captured_step_has_the_functions_gradients():
    """The node program's gradients are the eager model's, whose Functions' backwards differ from
    autograd's of their forwards (the sign's would be zero): every Function call is one op of the graph,
    the user's forward and backward inside it."""
    from memflow.graph.build import capture_program
    from memflow.model_file import load_model_file

    spec = load_model_file(MODEL, guard=False)
    captured, program, _, model = capture_program(spec, 8, fake=False)
    ops = [str(n.target) for m in program.modules() for n in m.graph.nodes if n.op == "call_function"]
    assert sum(1 for t in ops if "fn_apply" in t) == 3 * 2 + 1 and not any("sign" in t for t in ops)
    program.run_step(list(captured.flat_inputs))
    ref = spec.build()
    ref(**spec.batch(8)).backward()
    got = dict(model.named_parameters())
    for name, p in ref.named_parameters():
        assert p.grad is not None and torch.allclose(got[name].grad, p.grad, rtol=1e-5, atol=1e-7), name
    assert ref.blocks[0].a.weight.grad.abs().sum() > 0  # (the sign's own gradient would leave it zero)


@pytest.mark.parametrize("kind", ["single", "rec-blocks", "selective", "dp2"])
def test_planned_training_with_custom_functions_is_plain_training(kind):
    """Planned training (kept, recomputed, selective, data parallel on two ranks) gives plain training's
    losses, the Functions' own backwards and all; before, the export kept only their forwards and the
    losses were 50% apart on a binarised MLP."""
    from bench.bench_fidelity import run_case
    from tests.reference import plain_losses

    rows = run_case(MODEL, {}, 8, kind, steps=3, runs=1, warmup=1)
    ref = plain_losses(MODEL, 8, 3, seed=0)
    got = rows[0]["losses"]
    assert len(got) == 3 and all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(got, ref)), (got, ref)
    for r in rows:
        assert abs(r["pp"] / r["mp"] - 1) <= 0.05, r
