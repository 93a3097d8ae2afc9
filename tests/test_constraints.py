"""Fixing part of the strategy (dp, pp, micro-batches, a bound on micro-batches): the search stays
inside it and finds what the exact solver finds inside it; the CLI and the plan file carry it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from memflow.cli.main import main
from memflow.planfile import load_plan
from memflow.search import MeshLimits, SearchContext, mesh_choices, search, solve_exact
from test_search import GB, provider, tight_cluster

ROOT = Path(__file__).resolve().parents[1]
LSTM = str(ROOT / "examples" / "lstm.py")

CASES = [  # (kind, n, devices, seed, memory fraction, limits)
    ("random", 4, 4, 1, 0.6, MeshLimits(dp=2)),
    ("chain", 5, 4, 2, 0.5, MeshLimits(pp=4)),
    ("random", 5, 2, 3, 0.7, MeshLimits(microbatches=1)),
    ("chain", 4, 2, 4, 0.45, MeshLimits(max_microbatches=2)),
    ("random", 6, 4, 5, 0.55, MeshLimits(dp=1, microbatches=2)),
    ("chain", 6, 2, 6, 0.6, MeshLimits(dp=2, max_microbatches=1)),
    ("random", 4, 4, 7, 0.5, MeshLimits(sharding="gradients")),
    ("chain", 5, 4, 8, 0.45, MeshLimits(dp=4, sharding="none")),
    ("random", 4, 4, 9, 0.35, MeshLimits(offload="optimizer+parameters")),
]


@pytest.mark.parametrize("kind,n,ndev,seed,frac,limits", CASES)
def test_search_within_limits_matches_exact_within_them(kind, n, ndev, seed, frac, limits):
    g = provider(kind, n, seed)
    cl = tight_cluster(g, ndev, frac)
    ex = solve_exact(ctx=SearchContext(g, GB, cl, limits=limits))
    r = search(g, GB, cl, seed=seed, limits=limits)
    for st in [r.best] + [st for st, _ in r.baselines.values()]:
        if st is None:
            continue
        assert limits.dp is None or st.dp == limits.dp
        assert limits.pp is None or st.pp == limits.pp
        assert limits.microbatches is None or st.microbatches == limits.microbatches
        assert limits.max_microbatches is None or st.microbatches <= limits.max_microbatches
        assert limits.sharding is None or st.dp == 1 or set(st.sharding) == {limits.sharding}
        assert limits.offload is None or st.offload == [limits.offload] * st.pp
    if ex.best is None:
        assert r.best is None
        return
    assert r.best is not None and r.best_eval.step_time_s <= ex.best_eval.step_time_s * 1.02


def test_mesh_choices_are_exactly_the_valid_ones():
    for N in (1, 2, 3, 4, 6, 8):
        for gb in (1, 4, 6, 8, 12):
            for lim in (MeshLimits(), MeshLimits(max_microbatches=2), MeshLimits(microbatches=2), MeshLimits(dp=2)):
                try:
                    got = mesh_choices(N, gb, lim)
                except Exception:  # noqa: BLE001 - nothing valid: checked below
                    got = {}
                want = {d: [m for m in range(1, gb + 1) if (gb // d) % m == 0 and (lim.microbatches in (None, m))
                            and (lim.max_microbatches is None or m <= lim.max_microbatches)]
                        for d in range(1, N + 1) if N % d == 0 and gb % d == 0 and lim.dp in (None, d)}
                want = {d: ms for d, ms in want.items() if ms}
                assert got == want, (N, gb, lim)


def _plan_json(capsys, out, *flags: str) -> tuple[int, dict]:
    """``memflow plan`` of the LSTM example on 4 GPUs at batch 8 with ``flags``: exit code and its JSON."""
    rc = main(["plan", LSTM, "--gpus", "4", "--batch-size", "8", *flags, "--iterations", "300", "--json",
               "-o", str(out)])
    return rc, json.loads(capsys.readouterr().out)


def test_cli_fixes_part_of_the_plan(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    out = tmp_path / "p.yaml"
    rc, obj = _plan_json(capsys, out, "--dp", "2", "--microbatches", "2")
    assert rc == 0 and obj["strategy"]["dp"] == 2 and obj["strategy"]["pp"] == 2
    assert obj["strategy"]["microbatches"] == 2 and obj["settings"]["microbatches"] == 2
    assert load_plan(out).strategy.microbatches == 2
    rc, obj = _plan_json(capsys, out, "--max-microbatches", "1")
    assert rc == 0 and obj["strategy"]["microbatches"] == 1  # one pass per step
    assert all(name.endswith("/m1") or "unaware" in name for name in obj["baselines"])


def test_cli_fixes_the_sharding_level(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    out = tmp_path / "p.yaml"
    rc, obj = _plan_json(capsys, out, "--dp", "2", "--sharding", "gradients")
    assert rc == 0 and obj["strategy"]["sharding"] == ["gradients", "gradients"]
    assert obj["settings"]["sharding"] == "gradients" and load_plan(out).strategy.sharding == ["gradients"] * 2
    assert any(name.startswith("zero2+recompute/") for name in obj["baselines"])
    rc, obj = _plan_json(capsys, out, "--dp", "2", "--sharding", "parameters")  # ZeRO-3 / FSDP
    assert rc == 0 and obj["strategy"]["sharding"] == ["parameters", "parameters"]
    assert load_plan(out).strategy.sharding == ["parameters"] * 2
    assert any(name.startswith("fsdp/") for name in obj["baselines"])
    assert main(["plan", LSTM, "--gpus", "2", "--sharding", "everything", "-o", str(tmp_path / "q.yaml")]) == 2
    err = capsys.readouterr().err.strip().split("\n")  # an unknown level: refused before any work, in one line
    assert len(err) == 1 and err[0].startswith("memflow: error: --sharding must be one of") and "parameters" in err[0]
    assert not (tmp_path / "q.yaml").exists()


def test_cli_fixes_the_offload(tmp_path, capsys, monkeypatch):
    """``--offload optimizer+parameters``: every stage at ZeRO-3 with its parameters' shards and its
    optimizer on the host, carried by the plan file; an offload that cannot be is one line."""
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    out = tmp_path / "p.yaml"
    rc, obj = _plan_json(capsys, out, "--dp", "2", "--offload", "optimizer+parameters")
    assert rc == 0 and obj["strategy"]["offload"] == ["optimizer+parameters"] * 2
    assert obj["strategy"]["sharding"] == ["parameters"] * 2 and obj["settings"]["offload"] == "optimizer+parameters"
    st = load_plan(out).strategy
    assert st.params_on_host == [True, True] and st.optimizer_on_host == [True, True]
    assert any(name.startswith("fsdp+offload/") for name in obj["baselines"])
    assert main(["plan", LSTM, "--gpus", "2", "--sharding", "gradients", "--offload", "optimizer+parameters",
                 "-o", str(tmp_path / "q.yaml")]) == 2
    err = capsys.readouterr().err.strip().split("\n")
    assert len(err) == 1 and err[0].startswith("memflow: error: --offload optimizer+parameters needs --sharding")
