"""Cheap checks of the max-batch / deeper / unaware benchmarks (no runs)."""
import importlib

import pytest


@pytest.mark.parametrize("name", ["bench_maxbatch", "bench_deeper", "bench_unaware", "bench_sweep"])
def test_bench_module_has_quick_main(name):
    mod = importlib.import_module(f"bench.{name}")
    assert "quick" in mod.main.__code__.co_varnames


def test_every_bench_imports():
    """CI does not run the benchmarks (``python -m bench quick`` writes their small sections): each
    module ``python -m bench NAME`` names imports against today's code and has its ``main``."""
    from bench.__main__ import BENCHES

    for name, module in BENCHES.items():
        assert callable(importlib.import_module(module).main), name


def test_a_bench_stops_with_one_line_where_the_simulator_is_another_checkouts(monkeypatch, tmp_path, capsys):
    """An editable install of another checkout maps memflow.simulator and memflow.search there: a
    benchmark (and every write of a section) stops with one line naming both places, exit status 1,
    before it predicts with code that is not this checkout's."""
    import bench.common as common

    common.same_checkout()  # (this checkout: passes)
    monkeypatch.setattr(common, "ROOT", tmp_path)
    with pytest.raises(SystemExit) as e:
        common.write_section("nothing", "Nothing", "body")
    msg = str(e.value.code)
    assert "\n" not in msg and msg.startswith("bench: memflow is imported from ") and str(tmp_path) in msg
    with pytest.raises(SystemExit):
        common.same_checkout()


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


@pytest.mark.parametrize("a,b,thr,lo,limit,growth", [(0.2, 0.04, 11.2, 8, 1024, 8), (10, 1, 40, 8, 512, 2),
                                                     (10, 1, 18.5, 8, 512, 2)])
def test_largest_fitting_brackets_the_crossing(a, b, thr, lo, limit, growth):
    from bench.bench_maxbatch import largest_fitting

    calls = []

    def probe(x):
        calls.append(x)
        return a + b * x <= thr, a + b * x

    ok, fail, vals = largest_fitting(probe, lo, thr, limit=limit, rel=1 / 8, growth=growth)
    assert a + b * ok <= thr < a + b * fail  # both ends were probed: ok fits, fail does not
    assert fail - ok <= max(1, int(ok / 8)) and ok in vals and fail in vals
    assert len(calls) <= 6


def test_largest_fitting_stops_at_the_limit_and_skips_a_known_start():
    from bench.bench_maxbatch import largest_fitting

    calls = []
    ok, fail, _ = largest_fitting(lambda x: (calls.append(x), (True, x))[1], 4, 1e9, limit=64, rel=1 / 8,
                                  probe_lo=False)
    assert (ok, fail) == (64, 0) and 4 not in calls


def test_plain_peak_in_process_under_a_cap(monkeypatch):
    from bench.bench_maxbatch import ROOT, plain_peak

    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    mf = ROOT / "examples" / "lstm.py"
    peak = plain_peak(mf, 4, None)
    assert peak and peak > 0
    assert plain_peak(mf, 4, peak) == peak  # exactly at its own peak: fits
    assert plain_peak(mf, 4, peak - 1) is None  # one byte less: DeviceOutOfMemoryError


def test_sweep_draws_the_same_instances_and_none_beats_the_optimum():
    """The sweep's instances are fixed by its seed and inside the stated ranges; on one of them
    the search, being a search over the same space, is never faster than the exact optimum."""
    from bench.bench_sweep import _one, draw

    a, b = draw(30), draw(30)
    assert a == b
    for kind, n, ndev, frac, _gseed, shared, sseed in a:
        assert kind in ("random", "chain") and 3 <= n <= 7 and ndev in (2, 3, 4) and 0.25 <= frac <= 0.85
        assert isinstance(shared, bool) and 0 <= sseed < 100
    small = next(x for x in a if x[1] <= 4)
    r = _one(small)
    assert r["complete"]
    if r["exact"] is None:
        assert r["search"] is None
    elif r["search"] is not None:
        assert r["search"] >= r["exact"] * (1 - 1e-9)
