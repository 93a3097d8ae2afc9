"""Predicted vs measured peak per rank: the simulator and the executor agree on pipelined memory
(sent values held until their gradients return, per-micro-batch inputs, swap, in-flight copies),
and on the CPU executor's swap (saved tensors back one by one as the backward asks for them)."""
import pytest

from bench.bench_fidelity import run_case


@pytest.mark.parametrize("model,batch,kind,ranks", [("gpt2", 64, "pp2-m4-swap", 2), ("resnet", 32, "pp2", 2),
                                                   ("gpt2", 64, "m2-swap-mid", 1), ("resnet", 32, "m2-swap-mid", 1)])
def test_peak_per_rank_is_predicted(model, batch, kind, ranks):
    rows = run_case(model, {}, batch, kind, steps=3, runs=1)
    assert len(rows) == ranks
    for r in rows:
        assert abs(r["pp"] / r["mp"] - 1) <= 0.02, r
