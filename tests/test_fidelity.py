"""Predicted vs measured peak per rank: the simulator and the executor agree on pipelined memory
(sent values held until their gradients return, per-micro-batch inputs, swap, in-flight copies)."""
import pytest

from bench.bench_fidelity import run_case


@pytest.mark.parametrize("model,batch,kind", [("gpt2", 64, "pp2-m4-swap"), ("resnet", 32, "pp2")])
def test_pipeline_peak_per_rank_is_predicted(model, batch, kind):
    rows = run_case(model, {}, batch, kind, steps=3)
    assert len(rows) == 2
    for r in rows:
        assert abs(r["pp"] / r["mp"] - 1) <= 0.02, r
