"""Costs measured on a busy host are not cached as the truth: repeated rounds must agree.

Disagreement is injected (a scripted step, a fake clock), not made by loading the machine."""
from __future__ import annotations

import pytest

from memflow.model_file import load_model_file
from memflow.profile import profile_model
from memflow.profile import timing
from memflow.profile.build import capture_graph
from memflow.profile.cache import ProfileCache

MODEL = '''
import torch
from torch import nn


def build_model():
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))


def example_batch(batch_size):
    return torch.randn(batch_size, 8), torch.randint(0, 2, (batch_size,))


def loss_fn(output, target):
    return nn.functional.cross_entropy(output, target)
'''


def scripted(per_step: list[float], width: int = 3):
    """A step function whose k-th call takes ``per_step[k]`` seconds (spread over its phases)."""
    calls = []

    def step():
        calls.append(1)
        return [per_step[len(calls) - 1] / width] * width

    return step, calls


@pytest.mark.parametrize("rounds,calls,steady,median", [
    ([[1, 1, 1], [1.1, 1.1]], 5, True, 1.0),  # the repeats' two rounds agree
    ([[1, 1, 1], [4, 4], [1, 1, 1]], 8, True, 1.0),  # load for a round: measured again, that round dropped
    ([[4, 4, 4], [1, 1], [1, 1, 1]], 8, True, 1.0),  # load at first: the fast rounds confirm each other
    ([[1, 1, 1], [4, 4], [4, 4, 4], [4, 4, 4]], 11, False, 1.0),  # load that stays: the fast round unconfirmed
    ([[1, 1, 1], [2, 2], [4, 4, 4], [8, 8, 8]], 11, False, 1.0),  # rising load: bounded, then given up
])
def test_rounds_must_confirm_the_fastest(rounds, calls, steady, median):
    step, made = scripted([x for rnd in rounds for x in rnd] + [99.0] * 10)
    got = timing.steady_times(step, 5, 3)
    assert len(made) == calls and got.steady is steady
    assert sum(got) == pytest.approx(median)
    assert len(got.rounds_s) == len(rounds)


def test_one_repeat_is_not_checked():
    step, made = scripted([1.0])
    got = timing.steady_times(step, 1, 3)
    assert got.steady and len(made) == 1 and sum(got) == pytest.approx(1.0)


def test_processes_steady_only_when_each_is():
    assert timing.over_processes([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [True] * 3) == [3.0, 4.0]
    assert not timing.over_processes([[1.0], [2.0]], [True, False]).steady


class FakeClock:
    """``time`` for memflow.profile.timing: every reading 1 ms after the last, 4 ms on the steps
    ``slow`` names (a step reads the clock ``marks`` times)."""

    def __init__(self, marks: int, slow):
        self.marks, self.slow, self.calls, self.t = marks, slow, 0, 0.0

    def perf_counter(self) -> float:
        self.t += 4e-3 if self.slow(self.calls // self.marks) else 1e-3
        self.calls += 1
        return self.t

    def steps(self) -> int:
        return self.calls // self.marks


@pytest.fixture
def spec(tmp_path):
    (tmp_path / "mlp.py").write_text(MODEL)
    return load_model_file(tmp_path / "mlp.py")


def _profile(spec, tmp_path, monkeypatch, slow):
    monkeypatch.delenv("MEMFLOW_TIMING_REPEATS", raising=False)  # (the suite's one timed step: rounds here)
    n = capture_graph(spec, 2).n
    clock = FakeClock(2 * n + 2, slow)
    monkeypatch.setattr(timing, "time", clock)
    store = ProfileCache(tmp_path / "cache")
    g = profile_model(spec, 2, device="cpu", cache=store)
    return g, clock, [p for p in (tmp_path / "cache").glob("*.json") if not p.name.endswith(".deps.json")]


# the keep measurement: step 0 warms up, 1-3 are its first round, 4-5 its second, 6-8 a third; then
# every node swapped, then every node selective
def test_a_round_under_load_is_measured_again_and_cached(spec, tmp_path, monkeypatch, capfd):
    g, clock, cached = _profile(spec, tmp_path, monkeypatch, lambda s: s in (4, 5))
    assert g.meta["steady_times"] and len(cached) == 1
    # keep measured once more; swap and selective as before
    assert clock.steps() == (1 + 3 + 2 + 3) + (1 + 3 + 2) + (1 + 3 + 2)
    assert g.nodes[0].fwd_time_s == pytest.approx(1e-3)  # the loaded round is not in the medians
    assert "warning" not in capfd.readouterr().err


def test_load_that_stays_is_warned_about_and_not_cached(spec, tmp_path, monkeypatch, capfd):
    g, clock, cached = _profile(spec, tmp_path, monkeypatch, lambda s: s >= 4)
    assert g.meta["steady_times"] is False and cached == []
    assert clock.steps() == (1 + 3 + 2 + 3 + 3) + (1 + 3 + 2) + (1 + 3 + 2)  # at most two rounds more
    err = capfd.readouterr().err.strip().split("\n")
    assert len(err) == 1 and err[0].startswith("memflow: warning: ") and "not cached" in err[0], err
    # the next plan measures again
    g2, _, cached = _profile(spec, tmp_path, monkeypatch, lambda s: False)
    assert g2.meta["steady_times"] and len(cached) == 1


def test_cache_refuses_unsteady_graphs(spec, tmp_path):
    g = capture_graph(spec, 2)
    store = ProfileCache(tmp_path)
    g.meta["steady_times"] = False
    store.put("k", g)
    assert store.get("k") is None
    g.meta["steady_times"] = True
    store.put("k", g)
    assert store.get("k") is not None


def test_timing_repeats_caps_the_timed_steps(spec, tmp_path, monkeypatch):
    """MEMFLOW_TIMING_REPEATS=2: each measurement's warm-up and two timed steps, one round each, never
    measured again (two rounds of one agree or not: the first rule still holds); at most, not more."""
    monkeypatch.setenv("MEMFLOW_TIMING_REPEATS", "2")
    assert timing.timed_repeats(7) == 2 and timing.timed_repeats(1) == 1 and timing.timed_repeats(0) == 0
    n = capture_graph(spec, 2).n
    clock = FakeClock(2 * n + 2, lambda s: False)
    monkeypatch.setattr(timing, "time", clock)
    g = profile_model(spec, 2, device="cpu", cache=ProfileCache(tmp_path / "cache"))
    assert g.meta["steady_times"] and clock.steps() == 3 * (1 + 2)


@pytest.mark.parametrize("bad", ["0", "1.5"])
def test_a_bad_timing_repeats_is_one_line(bad, tmp_path):
    import subprocess
    import sys
    (tmp_path / "mlp.py").write_text(MODEL)
    env = dict(__import__("os").environ, MEMFLOW_TIMING_REPEATS=bad, MEMFLOW_CACHE_DIR=str(tmp_path / "c"))
    r = subprocess.run([sys.executable, "-m", "memflow", "plan", str(tmp_path / "mlp.py"), "--gpus", "2",
                        "--gpu-type", "cpu", "--batch-size", "4"], env=env, capture_output=True, text=True,
                       timeout=120)
    err = r.stderr.strip().split("\n")
    assert r.returncode == 2 and err[-1].startswith("memflow: error: MEMFLOW_TIMING_REPEATS"), r.stderr[-2000:]
    assert "Traceback" not in r.stderr
