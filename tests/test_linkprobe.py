"""The measured gloo link of cpu-N clusters: the α–β fit and its cache."""
from __future__ import annotations

import json

import pytest

from memflow.cluster import Cluster
from memflow.linkprobe import fit_alpha_beta, measured_gloo_link


def test_fit_recovers_alpha_beta_from_both_collectives():
    alpha, beta = 80e-6, 1.5e9
    rows = [(k, n, k * alpha + n / beta) for k in (1.0, 2.0) for n in (4e3, 2.6e5, 2e6, 8e6)]
    a, b = fit_alpha_beta(rows)
    assert a == pytest.approx(alpha, rel=1e-6) and b == pytest.approx(beta, rel=1e-6)
    a, _ = fit_alpha_beta([(1.0, 1e6, 1e-4), (1.0, 2e6, 1.5e-4)])  # a negative intercept clamps to 0
    assert a >= 0


def test_cpu_cluster_uses_the_measured_link_and_caches_it(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMFLOW_CACHE_DIR", str(tmp_path))
    bandwidth, latency = measured_gloo_link()
    (path,) = tmp_path.glob("gloo-link-*.json")
    d = json.loads(path.read_text())
    assert d["bandwidth"] == bandwidth > 0 and d["latency"] == latency >= 0
    assert len(d["rows"]) == 8  # 4 sizes × (send/recv, all-reduce)
    link = Cluster.load("cpu-2").intra_link  # served from the cache
    assert (link.bandwidth, link.latency) == (bandwidth, latency)
    d["bandwidth"], d["latency"] = 1234.0, 5e-3
    path.write_text(json.dumps(d))
    assert Cluster.load("cpu-3").intra_link.bandwidth == 1234.0
