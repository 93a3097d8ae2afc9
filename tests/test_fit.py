"""``memflow fit``: the largest value that fits, found by doubling and bisection, equals brute force."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from memflow.cli.main import main
from memflow.fit import find_max
from memflow.planner import plan

ROOT = Path(__file__).resolve().parents[1]
LSTM = str(ROOT / "examples" / "lstm.py")


def test_find_max_equals_brute_force_on_monotone_predicates():
    rng = random.Random(7)
    for _ in range(500):
        upto = rng.randint(0, 300)
        edge = rng.randint(-1, upto + 5)  # fits(i) iff i <= edge
        calls = []

        def fits(i, edge=edge):
            assert 0 <= i <= upto, i
            calls.append(i)
            return i <= edge

        got, hit = find_max(fits, upto)
        want = None if edge < 0 else min(edge, upto)
        assert got == want and hit == (edge >= upto), (upto, edge, got, hit)
        assert len(set(calls)) <= 2 * (upto + 1).bit_length() + 2  # logarithmic, not a scan


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    monkeypatch.chdir(tmp_path)


def test_fit_batch_equals_brute_force(tiny, capsys):
    """On a tiny LSTM with 600 KiB per device (a simulated V100), the largest batch per pass found by
    ``memflow fit`` is where brute force over every batch up to the bound puts it, for plain data
    parallelism and for MemFlow's plan."""
    opts = ["--gpus", "1", "--gpu-type", "v100-16gb", "--gpu-memory", "600KiB", "--iterations", "200"]
    rc = main(["fit", LSTM, *opts, "--max", "batch", "--upto", "24", "--json"])
    got = json.loads(capsys.readouterr().out)
    assert rc == 0 and got["knob"] == "batch" and not got["limit_hit"]
    assert got["plan"]["strategy"]["microbatches"] == 1 and got["plan"]["batch_size"] == got["plan_max"]
    plain_fits, plan_fits = [], []
    for b in range(1, 25):
        p = plan(LSTM, gpus=1, gpu_type="v100-16gb", gpu_memory="600KiB", iterations=200, batch_size=b,
                 max_microbatches=1)
        plain_fits.append(p.baselines["dp/m1"].fits)
        plan_fits.append(p.fits)
    assert got["plain_max"] == max(b for b, f in zip(range(1, 25), plain_fits) if f)
    assert got["plan_max"] == max(b for b, f in zip(range(1, 25), plan_fits) if f)
    assert got["plan_max"] > got["plain_max"]
    assert isinstance(got["per_sample_overhead"], float)


def test_fit_needs_a_declared_knob(tiny, capsys):
    gpt2 = str(ROOT / "examples" / "gpt2.py")
    rc = main(["fit", gpt2, "--max", "depth"])
    err = capsys.readouterr().err
    assert rc == 2 and "KNOBS" in err and len(err.strip().splitlines()) == 1


def test_plain_is_judged_by_the_reserved_peak_on_a_gpu_as_the_plan_is(tiny, monkeypatch):
    """On one GPU large enough to hold a CUDA context, plain data parallelism fits only where its step's
    reserved peak (memflow.reserved) and the context fit the device, as a plan it covers does: with
    40 MiB beside the context its live peak fits (a few MiB) but its two cuBLAS workspaces alone do not;
    with 200 MiB it fits. On a device too small for a context (the test above), live bytes alone."""
    from memflow.fit import plain_fits, plain_live_fits
    from memflow.gpumem import CONTEXT_BYTES

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    gpt2 = str(ROOT / "examples" / "gpt2.py")
    for extra, fits in ((40, False), (200, True)):
        p = plan(gpt2, gpus=1, gpu_type="h100-80gb", gpu_memory=CONTEXT_BYTES + extra * 2**20, headroom=0.0,
                 iterations=100)
        assert p.baselines["dp/m1"].fits  # (by its live peak)
        assert plain_fits(p) is fits
        assert plain_live_fits(p, 0.0)  # judged as a plan memflow.reserved does not cover: it fits


@pytest.mark.parametrize("covered", [False, True])
def test_plain_is_also_judged_as_the_plan_at_its_largest_is(monkeypatch, covered):
    """Where the plan at its largest value is judged by live bytes (a plan memflow.reserved does not
    cover) while plain is held back by its reserved peak, ``plain_max_as_plan`` is plain's largest by live
    bytes, as brute force over every value finds it; where the plan's reserved peak was checked, it is
    plain_max. (Plans stubbed: plain fits by reserved up to 11, by live bytes up to 17, the plan up to 40.)"""
    import types

    import memflow.fit as F

    def fake_plan(req, progress=None):
        b = req.batch_size
        return types.SimpleNamespace(
            fits=b <= 40, batch_size=b,
            predicted=types.SimpleNamespace(reserved_bytes=[1] if covered else [], step_time_s=1.0),
            baselines={"dp/m1": types.SimpleNamespace(step_time_s=0.5, fits=b <= 17)}, reserved=b <= 11)

    monkeypatch.setattr(F, "plan_request", fake_plan)
    monkeypatch.setattr(F, "plain_fits", lambda p: p.reserved)
    monkeypatch.setattr(F, "plain_live_fits", lambda p, h: p.baselines["dp/m1"].fits)
    req = F.PlanRequest(model=LSTM, batch_size=1, gpus=1)
    r = F.fit(req, F.Knob("batch"), upto=64)
    assert (r.plain_max, r.plan_max, r.limit_hit) == (11, 40, False)
    want = max(b for b in range(1, 41) if fake_plan(F.dataclasses.replace(req, batch_size=b)).baselines["dp/m1"].fits)
    assert r.plan_memory_check == ("reserved" if covered else "live")
    assert r.plain_max_as_plan == (11 if covered else want) and want == 17


def test_the_cli_sets_plain_beside_the_plan_like_for_like(monkeypatch, capsys):
    """Where the plan at its largest was judged by live bytes and plain by its reserved peak, ``memflow
    fit`` prints plain judged as the plan is, why, and the gain like for like; ``--json`` carries both."""
    import types

    import memflow.cli.fit_cmd as C
    from memflow.fit import FitResult
    from memflow.strategy import Strategy

    st = Strategy.single(4, action="swap").copy(sharding=["parameters"], offload=["optimizer+parameters"])
    p = types.SimpleNamespace(model_name="lstm", strategy=st, predicted=types.SimpleNamespace(step_time_s=0.5),
                              save=lambda path: None)
    r = FitResult(knob="seq", plain_max=501, plan_max=702, limit_hit=False, per_sample_overhead=0.69, upto=8192,
                  plan=p, plan_memory_check="live", plain_max_as_plan=591)
    monkeypatch.setattr(C, "fit", lambda *a, **k: r)
    monkeypatch.setattr(C, "to_data", lambda plan: {"strategy": plan.strategy.to_dict()})
    assert main(["fit", LSTM, "--gpus", "1", "--max", "seq", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "judged as this plan is (parameters on the host" in out and ": 591" in out, out
    assert "like for like (plain judged as this plan is): 1.19×" in out, out
    assert main(["fit", LSTM, "--gpus", "1", "--max", "seq", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["plain_max"], got["plain_max_as_plan"], got["plan_memory_check"]) == (501, 591, "live")
