"""A forward that keeps tensors in plain attributes for its next call (a stateful LSTM's hidden state, a
Transformer-XL memory) is captured once: the planned step never sets them again, and plain PyTorch's
later steps read the last step's state. Nothing said so: the plan and the run succeeded, the losses
parted from plain training's. Now the capture records them (torch.export's own check) and the plan
says so in one warning line; a model that keeps nothing gets none, nor one that sets the attribute to None
before anything reads it in every forward (HF RecurrentGemma's recurrent state with ``use_cache=False``:
warned before)."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATH = ROOT / "tests" / "models" / "stateful_lstm.py"


@pytest.mark.parametrize("carry", ["1", "0", "reset"])
def test_state_kept_in_plain_attributes_is_recorded_and_warned(carry, monkeypatch, capfd):
    import memflow
    from memflow.planner import resolve_spec
    from memflow.profile.build import capture_graph

    monkeypatch.setenv("CARRY", carry)
    spec = resolve_spec(str(PATH))
    for measure in (False, True):  # fake tensors (a named GPU's prediction) and real ones (this host)
        g = capture_graph(spec, 4, measure=measure, repeats=0)
        assert g.meta["carried_attrs"] == (["hidden"] if carry == "1" else [])
    model = spec.build()
    capture_graph(spec, 4, measure=False, repeats=0)
    assert model.hidden is None  # (a fresh model; the capture's own is put back as it was too)
    capfd.readouterr()
    memflow.plan(str(PATH), cluster="cpu-2", iterations=20, cache=False)
    err = capfd.readouterr().err
    warned = [ln for ln in err.splitlines() if "keeps state for its next forward" in ln]
    if carry == "1":
        assert len(warned) == 1 and "(hidden)" in warned[0] and warned[0].startswith("memflow: warning: ")
    else:
        assert not warned


def test_the_planned_run_parts_from_plain_training_where_the_state_is_read():
    """Why the warning: the run's second step reads no state (the program was captured with none),
    plain PyTorch's reads the first step's; its first step is plain's."""
    from memflow.executor import RunConfig, plain_losses, run_plan
    from memflow.strategy import Strategy

    st = Strategy(dp=1, pp=1, stage_of=[0] * 3, actions=["keep"] * 3)
    rep = run_plan(RunConfig(model_file=str(PATH), batch_size=4, strategy=st, steps=2, warmup=0, device="cpu"),
                   nproc=1, timeout_s=240)
    want = plain_losses(str(PATH), 4, 2, seed=0)
    assert abs(rep.losses[0] - want[0]) <= 1e-6 * abs(want[0]) and abs(rep.losses[1] - want[1]) > 1e-4 * abs(want[1])


def test_a_flag_set_in_forward_is_carried_state():
    """Glow's ActNorm initialises from the first batch and sets ``self.initialized = True``: the program
    traced before the flag was set initialises every step. Recorded as carried (a flag set to a new
    value), beside its in-place parameter writes."""
    from memflow.planner import resolve_spec
    from memflow.profile.build import capture_graph

    g = capture_graph(resolve_spec(str(ROOT / "tests" / "models" / "glow_actnorm.py")), 4, measure=False, repeats=0)
    assert g.meta["carried_attrs"] == [f"steps.{i}.0.initialized" for i in range(3)]
    assert "model.steps.0.0.loc" in g.meta["written_params"]


def test_torch_distributions_argument_checks_do_not_stop_the_capture():
    """A VAE written with torch.distributions (``Normal(mu, sigma).rsample()``, ``kl_divergence``): the
    distributions' argument check (``if not constraint.check(value).all(): raise``) was a branch on
    values, and the capture refused every such model. It is off while exporting; a pipeline run's losses
    are plain training's (the noise is drawn on the first stage, from plain's stream)."""
    from memflow.executor import RunConfig, plain_losses, run_plan
    from memflow.planner import resolve_spec
    from memflow.profile.build import capture_graph
    from memflow.strategy import Strategy
    from torch.distributions import Distribution

    path = ROOT / "tests" / "models" / "dist_vae.py"
    before = Distribution._validate_args
    g = capture_graph(resolve_spec(str(path)), 4, measure=False, repeats=0)
    assert Distribution._validate_args == before and len(g.nodes) == 6
    st = Strategy(dp=1, pp=2, stage_of=[0] * 3 + [1] * 3, actions=["keep"] * 6, microbatches=1)
    rep = run_plan(RunConfig(model_file=str(path), batch_size=8, strategy=st, steps=3, warmup=0, device="cpu"),
                   nproc=2, timeout_s=240)
    want = plain_losses(str(path), 8, 3, seed=0)
    assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(rep.losses, want)), (rep.losses, want)


_COUNTERS = '''
import torch
from torch import nn
BATCH_SIZE = 4
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.calls = 0
        self.mult = None
        self.window = 3
    def forward(self, x):
        self.calls += 1  # carried: a counter advanced from call to call
        self.mult = 1  # the call's own work: set first, then doubled (HF's Funnel)
        self.mult *= 2
        self.window = min(self.window, x.shape[1] - 6)  # set from the input, the same each call (HF's Swin)
        return self.lin(x).pow(2).mean() * self.mult
def build_model():
    return M()
def example_batch(b):
    return {"x": torch.randn(b, 8, generator=torch.Generator().manual_seed(0))}
'''


def test_a_counter_is_carried_and_a_calls_own_work_is_not(tmp_path):
    from memflow.planner import resolve_spec
    from memflow.profile.build import capture_graph

    f = tmp_path / "counters.py"
    f.write_text(_COUNTERS)
    g = capture_graph(resolve_spec(str(f)), 4, measure=False, repeats=0)
    assert g.meta["carried_attrs"] == ["calls"]
