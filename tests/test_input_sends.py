"""A language model handed one token stream per sample slices its own targets (``tokens[:, 1:]``): a view of
the batch that is no contiguous tensor, made by its first node and read by its loss. Cut between them, the
first stage sends the targets as a contiguous copy, held per micro-batch in flight until its backward starts.
No buffer of the trace holds a batch input, so the plan missed that copy: the first stage peaked 256 B
(0.74%) above its plan here, 512 B on a switch MoE of bench/outside7 at the backward of a swapped layer
with the next micro-batch in flight. The profile records such copies (TaskGraph.fwd_input_send_copies) and
the stage that makes them counts them as it counts an activation's."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "tests" / "models" / "shifted_lm.py"


def test_a_sent_view_of_the_batch_is_in_the_first_stage_plan():
    from memflow.model_file import load_model_file
    from memflow.profile.build import capture_graph
    from memflow.strategy import Strategy
    from tests.onerank import predicted_ranks

    g = capture_graph(load_model_file(str(MODEL)), 2, measure=True, repeats=0)
    # made by the first node, read by the last; 2 samples x 16 targets x int64
    assert g.fwd_input_send_copies == [[0, g.n - 1, 2 * 16 * 8]]
    st = Strategy.from_boundaries(g.n, [2], dp=1, microbatches=2, optimizer_on_host=[True, True])
    _, rep = predicted_ranks(str(MODEL), g, st, batch=4, steps=2)
    first = rep.ranks[0]
    assert "micro-batch 0" in first.peak_at  # (the peak with the next micro-batch, and its copy, in flight)
    assert first.measured_peak_bytes <= first.predicted_peak_bytes <= 1.005 * first.measured_peak_bytes, first
