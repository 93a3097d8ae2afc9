"""Cheap checks of the max-batch / deeper / unaware benchmarks (no runs)."""
import importlib

import pytest


@pytest.mark.parametrize("name", ["bench_maxbatch", "bench_deeper", "bench_unaware"])
def test_bench_module_has_quick_main(name):
    mod = importlib.import_module(f"bench.{name}")
    assert "quick" in mod.main.__code__.co_varnames


@pytest.mark.parametrize("limit_x", [1, 16, 17, 31, 100, 1000])
def test_largest_true_finds_the_threshold(limit_x):
    from bench.bench_maxbatch import largest_true

    calls = []

    def ok(x):
        calls.append(x)
        return x <= limit_x

    lo, hi = largest_true(ok, 1, rel=0)
    assert lo == limit_x and hi == limit_x + 1
    assert len(calls) <= 2 * (limit_x.bit_length() + 1)


def test_largest_true_stops_at_the_limit():
    from bench.bench_maxbatch import largest_true

    assert largest_true(lambda x: True, 4, limit=64) == (64, 0)


def test_largest_true_coarse_gap():
    from bench.bench_maxbatch import largest_true

    lo, hi = largest_true(lambda x: x <= 200, 16, rel=1 / 8)
    assert lo <= 200 < hi and hi - lo <= max(1, lo // 8)
