"""The optimizer step on the host (simulator.hostopt): a time per tensor stepped and the state's
bytes at the host's rate, on the stage's own parameter tensors; and a plan with memory to spare
does not move its optimizer to the host for nothing."""
from __future__ import annotations

import os

import pytest

from memflow.model_file import load_model_file
from memflow.planner import plan
from memflow.profile import profile_model
from memflow.strategy import Strategy
from simulator import Simulator
from simulator.hostopt import host_step_s
from simulator.synthetic import chain_graph
from tests.test_simulator import MS, make_cluster

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_host_step_by_hand():
    """Optimizer on the host of a GPU: the gradients out on the host link, the step (one tensor per
    node of a synthetic chain), the parameters back; on the host's timeline after the backward."""
    P = 10**6
    g = chain_graph(3, act_bytes=1000, saved_bytes=1000, param_bytes=P, fwd_s=1 * MS, bwd_s=2 * MS)
    for hbw, lat, mbw, per in ((1e9, 1e-5, 12e9, 20e-6), (5e9, 0.0, 3e9, 1e-3)):
        sim = Simulator(g, make_cluster(1, host_bw=hbw, host_lat=lat), host_mem_bandwidth=mbw, host_tensor_s=per)
        sp = sim.stage(0, 3)
        assert sp.tensors == 3
        st = Strategy(1, 1, [0, 0, 0], ["keep"] * 3).copy(optimizer_on_host=[True])
        r = sim.evaluate(st, detail=True)
        (ev,) = [e for e in r.events if e[2] == "optimizer step"]
        want = (sp.grads / hbw + lat) + 3 * per + (sp.params + sp.grads + sp.optimizer) / mbw + (sp.params / hbw + lat)
        assert ev[1] == "host" and ev[4] == pytest.approx(want)
        assert want == pytest.approx(2 * 3 * P / hbw + 2 * lat + host_step_s(3, sp.params + sp.grads + sp.optimizer,
                                                                          mbw, per))


@pytest.fixture(scope="module")
def tiny_gpt2():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    old = os.environ.get("MEMFLOW_EXAMPLE_SCALE")
    os.environ["MEMFLOW_EXAMPLE_SCALE"] = "tiny"
    try:
        spec = load_model_file(os.path.join(ROOT, "examples", "gpt2.py"))
        yield spec, spec.build_model()
    finally:
        if old is None:
            os.environ.pop("MEMFLOW_EXAMPLE_SCALE", None)
        else:
            os.environ["MEMFLOW_EXAMPLE_SCALE"] = old


def test_stage_steps_the_models_parameter_tensors(tiny_gpt2):
    """A traced model's stage steps its trainable tensors (GPT-2's tied lm_head once); split in two
    stages, each steps its own and a tied one on both sides is stepped by each."""
    spec, model = tiny_gpt2
    g = profile_model(spec, 4, device="h100-80gb", cache=False)
    sim = Simulator(g, make_cluster(1))
    n = sum(1 for p in model.parameters() if p.requires_grad)
    assert sim.stage(0, g.n).tensors == n
    k = g.n // 2
    a, b = sim.stage(0, k).tensors, sim.stage(k, g.n).tensors

    def held(lo, hi):  # a stage holds the parameters its nodes read or own
        return {x for nd in g.nodes[lo:hi] for x in nd.read_params} | {x for x, v in g.params.items() if lo <= v[3] < hi}
    tied = {x for x in held(0, k) & held(k, g.n) if g.params[x][1]}
    assert a + b == n + len(tied)


def test_plentiful_memory_keeps_the_optimizer_on_the_gpu(tiny_gpt2):
    """GPT-2 at tiny scale on an H100: its state is a few MiB of 80 GiB, and stepping 28 tensors on
    the host costs more than on the GPU; the plan neither offloads nor shards (before the host's
    per-tensor time it streamed its parameters in from the host for a predicted 0.4%)."""
    spec, _ = tiny_gpt2
    p = plan(spec, gpus=1, gpu_type="h100-80gb")
    st = p.strategy
    assert not any(st.optimizer_on_host) and not any(st.params_on_host)
    assert st.sharding == ["none"]


def test_a_cluster_states_its_hosts_step():
    """A cluster's ``host_optimizer`` (YAML, units allowed) is the simulator's host step: it survives a
    plan file's round trip, and a bad one is refused in one line."""
    import dataclasses

    from memflow.cluster import HOST_STEP, Cluster, HostStep
    from memflow.errors import ConfigError

    base = make_cluster(1, host_bw=1e9, host_lat=1e-5)
    assert base.host_step == HOST_STEP
    d = dict(base.to_dict(), host_optimizer={"bandwidth": "4.5GB/s", "per_tensor": "25us"})
    cl = Cluster.from_dict(d)
    assert cl.host_step.bandwidth == 4.5e9 and cl.host_step.per_tensor_s == pytest.approx(25e-6)
    assert Cluster.from_dict(cl.to_dict()).host_step == cl.host_step
    assert Cluster.from_dict(dict(base.to_dict(), host_optimizer={"per_tensor": "1ms"})).host_step == \
        HostStep(HOST_STEP.bandwidth, 1e-3)
    g = chain_graph(3, act_bytes=1000, saved_bytes=1000, param_bytes=10**6, fwd_s=1 * MS, bwd_s=2 * MS)
    st = Strategy(1, 1, [0, 0, 0], ["keep"] * 3).copy(optimizer_on_host=[True])
    steps = []
    for c in (base, cl, dataclasses.replace(cl, host_step=HostStep(1e12, 0.0))):
        sim = Simulator(g, c)
        sp = sim.stage(0, 3)
        (ev,) = [e for e in sim.evaluate(st, detail=True).events if e[2] == "optimizer step"]
        hs = c.host_step
        want = 2 * (3 * 10**6 / 1e9 + 1e-5) + host_step_s(3, sp.params + sp.grads + sp.optimizer, hs.bandwidth,
                                                          hs.per_tensor_s)
        assert ev[4] == pytest.approx(want)
        steps.append(ev[4])
    assert steps[1] > steps[0] > steps[2]
    for bad in ({"bandwidth": 0}, {"per_tensor": "-1us"}, {"rate": "1GB/s"}, "fast"):
        with pytest.raises(ConfigError) as e:
            Cluster.from_dict(dict(base.to_dict(), host_optimizer=bad))
        assert "host_optimizer" in str(e.value) and "\n" not in str(e.value)
