"""A model's own reentrant checkpoints and module casts inside forward are captured as the model trains
(memflow.graph.autograd_fns, memflow.graph.capture): before, the reentrant checkpoint's region was
exported under its ``no_grad`` (no parameter had a gradient: the run stopped on a loss that needs none,
or trained only what lay outside it), and a cast of a module to what it already is failed the export
("_apply(): Couldn't swap Linear.weight", HF Switch Transformers' router)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

MODEL = str(Path(__file__).resolve().parent / "models" / "habits.py")


def test_the_captured_step_has_the_eager_gradients():
    from memflow.graph.build import capture_program
    from memflow.model_file import load_model_file

    spec = load_model_file(MODEL, guard=False)
    captured, program, _, model = capture_program(spec, 8, fake=False)
    program.run_step(list(captured.flat_inputs))
    torch.manual_seed(0)  # (the capture built its model from this seed)
    ref = spec.build()
    spec.loss(ref, spec.batch(8)).backward()
    got = dict(model.named_parameters())
    for name, p in ref.named_parameters():
        assert p.grad is not None and got[name].grad is not None, name
        assert torch.allclose(got[name].grad, p.grad, rtol=1e-4, atol=1e-6), name


@pytest.mark.parametrize("kind", ["single", "rec-blocks", "dp2"])
def test_planned_training_is_plain_training(kind):
    from bench.bench_fidelity import run_case
    from tests.reference import plain_losses

    rows = run_case(MODEL, {}, 8, kind, steps=3, runs=1, warmup=1)
    ref = plain_losses(MODEL, 8, 3, seed=0)
    got = rows[0]["losses"]
    assert len(got) == 3 and all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(got, ref)), (got, ref)
    for r in rows:
        assert abs(r["pp"] / r["mp"] - 1) <= 0.05, r
