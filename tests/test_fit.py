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
    from memflow.fit import plain_fits
    from memflow.gpumem import CONTEXT_BYTES

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    gpt2 = str(ROOT / "examples" / "gpt2.py")
    for extra, fits in ((40, False), (200, True)):
        p = plan(gpt2, gpus=1, gpu_type="h100-80gb", gpu_memory=CONTEXT_BYTES + extra * 2**20, headroom=0.0,
                 iterations=100)
        assert p.baselines["dp/m1"].fits  # (by its live peak)
        assert plain_fits(p) is fits
