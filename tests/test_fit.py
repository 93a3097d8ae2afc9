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
