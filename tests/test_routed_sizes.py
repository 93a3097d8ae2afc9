"""A mixture of experts that splits its tokens per expert by counts it reads from a tensor (``.tolist()``:
HF's JetMoE, ScatterMoE) runs each expert on as many rows as the batch routed to it: the step's sizes, and
its peak, move with the data, while the plan is the profiled batch's (JetMoE's first stage peaked 512 B,
0.06%, above its plan with two micro-batches routed otherwise). The capture records the modules that size
tensors so (their sizes stem from numbers read from tensors), and the plan says so in one warning line; a
model whose sizes are fixed (the switch MoE of bench/outside7, dense dispatch through one_hot) gets none.
A prediction with fake tensors has no values to read: it stops with one line naming the node and saying
how to plan such a model (it named neither before)."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name,routed", [("split_experts", ["moe", "moe.experts.0", "moe.experts.1", "moe.experts.2",
                                                            "moe.experts.3"]),
                                         ("shifted_lm", [])])
def test_routed_sizes_are_recorded_and_warned(name, routed, capfd):
    import memflow
    from memflow.errors import CaptureError
    from memflow.planner import resolve_spec
    from memflow.profile.build import capture_graph

    path = ROOT / "tests" / "models" / f"{name}.py"
    spec = resolve_spec(str(path))
    assert capture_graph(spec, 4, measure=True, repeats=0).meta["routed"] == routed
    if routed:  # fake tensors (a named GPU's prediction): no value to split by
        with pytest.raises(CaptureError) as e:
            capture_graph(spec, 4, measure=False, repeats=0)
        msg = str(e.value)
        assert "\n" not in msg and " in moe.experts.0: DataDependentOutputException" in msg and "--gpu-type cpu" in msg, msg
    else:
        assert capture_graph(spec, 4, measure=False, repeats=0).meta["routed"] == []
    capfd.readouterr()
    memflow.plan(str(path), cluster="cpu-2", iterations=20, cache=False)
    warned = [ln for ln in capfd.readouterr().err.splitlines() if "sizes tensors by values it reads" in ln]
    if routed:  # (one line, naming the outermost module: those inside it are left out)
        assert len(warned) == 1 and warned[0].startswith("memflow: warning: ") and "(moe: " in warned[0]
    else:
        assert not warned
