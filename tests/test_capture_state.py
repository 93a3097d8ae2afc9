"""capture_graphs makes the optimizer state without a step; a traced backward whose gradients
differ from the layouts it assumed has its size traced again after a real warm-up step."""
from pathlib import Path

import pytest

import memflow.profile.build as build
from memflow.profile.build import capture_graph, capture_graphs
from memflow.model_file import load_model_file

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")


def test_state_made_without_a_step_is_checked_and_redone_on_a_mismatch(tiny, monkeypatch):
    spec = load_model_file(ROOT / "examples" / "gpt2.py")
    make_state = build.SharedCapture.make_state
    warmed = []

    def wrong_layouts(self):
        state = make_state(self)
        p = next(iter(self.made_grads))
        shape, stride, *rest = self.made_grads[p]
        self.made_grads[p] = (shape, tuple(s + 1 for s in stride), *rest)  # not what autograd will give
        return state

    import memflow.profile.trace as trace

    real_trace_step = trace.trace_step

    def counted(*a, **k):
        warmed.append((k["batch_size"], k.get("state_ready", False)))
        return real_trace_step(*a, **k)

    monkeypatch.setattr(build.SharedCapture, "make_state", wrong_layouts)
    monkeypatch.setattr(build, "trace_step", counted)  # as the builder calls it
    together = capture_graphs(spec, [4, 2], processes=1)
    monkeypatch.undo()
    # size 4 traced from the made state, found the mismatch and was traced again after a warm-up;
    # size 2 then starts from the warm-up's state
    assert warmed == [(4, True), (4, False), (2, True)]
    for b, g in together.items():
        assert g.to_dict() == capture_graph(spec, b).to_dict(), b
