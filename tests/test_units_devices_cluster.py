"""Rules for memflow.units, memflow.devices and memflow.cluster (CPU only, fast)."""
from __future__ import annotations

import json
import math
import warnings

import pytest

from memflow.cluster import Cluster, Link, list_clusters
from memflow.devices import DTYPES, DeviceSpec, cache_dir, list_devices, load_device
from memflow.errors import ConfigError
from memflow.units import (
    format_bandwidth,
    format_bytes,
    format_flops,
    format_time,
    parse_bandwidth,
    parse_bytes,
    parse_flops,
    parse_time,
)

EXPECTED_DEVICES = {"v100-16gb", "a100-40gb", "a100-80gb", "h100-80gb", "l4", "rtx-4090", "titan-x-12gb", "cpu"}
EXPECTED_CLUSTERS = {"titan-x-4", "v100-4-pcie", "a100-8-nvlink", "h100-2x8-ib", "ac922"}


@pytest.fixture(autouse=True, scope="module")
def _module_cache_dir(tmp_path_factory):
    """One CPU measurement for the whole module, never in the user's ~/.cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("MEMFLOW_CACHE_DIR", str(tmp_path_factory.mktemp("memflow-cache")))
    yield
    mp.undo()


# -- units -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("16GiB", 16 * 2**30),
        ("12GB", 12 * 10**9),
        ("512MiB", 512 * 2**20),
        ("1.5 TiB", int(1.5 * 2**40)),
        ("1000", 1000),
        (4096, 4096),
        ("100 bytes", 100),
        ("2kib", 2048),
    ],
)
def test_parse_bytes_decimal_and_binary(text, expected):
    assert parse_bytes(text) == expected
    assert isinstance(parse_bytes(text), int)


@pytest.mark.parametrize("bad", ["-1GB", -5, "abc", "16 parsecs", "", None, True, 1.5, "nanGB", "16G", float("inf")])
def test_bad_sizes_raise_config_error_naming_value_with_examples(bad):
    with pytest.raises(ConfigError) as e:
        parse_bytes(bad)
    msg = str(e.value)
    assert "\n" not in msg
    assert repr(bad) in msg
    assert "GiB" in msg  # shows valid examples


def test_zero_rejected_where_invalid():
    assert parse_bytes(0) == 0
    with pytest.raises(ConfigError):
        parse_bytes(0, allow_zero=False)
    with pytest.raises(ConfigError):
        parse_bandwidth("0GB/s")
    with pytest.raises(ConfigError):
        parse_flops(0)


def test_parse_bandwidth_bits_and_bytes():
    assert parse_bandwidth("300GB/s") == 300e9
    assert parse_bandwidth("25 Gbit/s") == 25e9 / 8
    assert parse_bandwidth("25Gb/s") == parse_bandwidth("25Gbps") == 25e9 / 8
    assert parse_bandwidth("16GiB/s") == 16 * 2**30
    assert parse_bandwidth(12e9) == 12e9
    for bad in ["300GB", "fast", "-1GB/s"]:
        with pytest.raises(ConfigError):
            parse_bandwidth(bad)


def test_parse_time_and_flops():
    assert parse_time("2us") == pytest.approx(2e-6)
    assert parse_time("2µs") == pytest.approx(2e-6)
    assert parse_time("1.5ms") == pytest.approx(1.5e-3)
    assert parse_time("3s") == 3.0
    assert parse_time("500ns") == pytest.approx(5e-7)
    assert parse_time(0.25) == 0.25
    assert parse_flops("312TFLOPS") == pytest.approx(312e12)
    assert parse_flops("19.5 TFLOP/s") == pytest.approx(19.5e12)
    assert parse_flops(1e12) == 1e12
    assert parse_flops("1e12") == 1e12
    for bad in ["-1s", "3 fortnights"]:
        with pytest.raises(ConfigError):
            parse_time(bad)
    with pytest.raises(ConfigError):
        parse_flops("lots")


@pytest.mark.parametrize("n", [1, 512, 1023, 1024, 11 * 2**30 + 2**28, 3 * 2**40, 12345678901])
def test_format_parse_bytes_round_trip(n):
    s = format_bytes(n)
    assert parse_bytes(s) == pytest.approx(n, rel=0.05)


@pytest.mark.parametrize("t", [5e-7, 2e-6, 0.0123, 1.5, 42.0])
def test_format_parse_time_round_trip(t):
    assert parse_time(format_time(t)) == pytest.approx(t, rel=0.05)


def test_format_examples_and_rate_round_trips():
    assert format_bytes(11.2 * 2**30) == "11.2 GiB"
    assert format_time(0.0123) == "12.3 ms"
    for bw in [2e9, 12e9, 3.35e12]:
        assert parse_bandwidth(format_bandwidth(bw)) == pytest.approx(bw, rel=0.05)
    for f in [67e9, 312e12]:
        assert parse_flops(format_flops(f)) == pytest.approx(f, rel=0.05)


# -- devices -----------------------------------------------------------------------


def test_every_device_preset_loads_with_sane_figures():
    assert EXPECTED_DEVICES <= set(list_devices())
    for name in list_devices():
        d = load_device(name)
        assert d.name == name
        assert d.memory_bytes > 0 and d.mem_bandwidth > 0 and d.host_link_bandwidth > 0
        assert 0 < d.compute_efficiency <= 1 and 0 < d.memory_efficiency <= 1
        for dt in DTYPES:
            assert d.flops(dt) > 0
        assert DeviceSpec.from_dict(d.to_dict()) == d
        if d.kind == "gpu":
            # tensor cores never make half precision slower than fp32 in these presets
            assert d.flops("fp16") >= d.flops("fp32")
            assert d.memory_bytes >= 12 * 2**30


def test_device_figures_match_public_specs():
    a100 = load_device("a100-80gb")
    assert a100.flops("bf16") == pytest.approx(312e12) and a100.memory_bytes == 80 * 2**30
    h100 = load_device("h100-80gb")
    assert h100.flops("bf16") > 3 * a100.flops("bf16") / 1.1 and h100.mem_bandwidth > a100.mem_bandwidth
    titan = load_device("titan-x-12gb")
    assert titan.flops("fp32") == pytest.approx(11e12, rel=0.05) and titan.mem_bandwidth == pytest.approx(480e9)


def test_flops_dtype_fallback():
    d = DeviceSpec("x", "gpu", 2**30, {"fp32": 10.0}, 1e9)
    assert d.flops("bf16") == d.flops("fp16") == 10.0
    d2 = DeviceSpec("y", "gpu", 2**30, {"fp32": 10.0, "fp16": 80.0}, 1e9)
    assert d2.flops("bf16") == 80.0
    import torch

    assert d2.flops(torch.float16) == 80.0
    with pytest.raises(ConfigError):
        d2.flops("int8")


@pytest.mark.parametrize(
    "kw",
    [
        {"kind": "tpu"},
        {"memory_bytes": 0},
        {"memory_bytes": -1},
        {"peak_flops": {}},
        {"peak_flops": {"bf16": 1e12}},
        {"peak_flops": {"fp32": 1e12, "fp8": 1e15}},
        {"mem_bandwidth": 0},
        {"compute_efficiency": 1.5},
        {"memory_efficiency": 0},
    ],
)
def test_device_spec_rejects_nonsense(kw):
    base = dict(name="x", kind="gpu", memory_bytes=2**30, peak_flops={"fp32": 1e12}, mem_bandwidth=1e11)
    with pytest.raises(ValueError):
        DeviceSpec(**{**base, **kw})


def test_device_yaml_units_and_unknown_keys(tmp_path):
    good = tmp_path / "mygpu.yaml"
    good.write_text("kind: gpu\nmemory: 16GiB\npeak_flops: {fp32: 10TFLOPS}\nmem_bandwidth: 900GB/s\n")
    d = load_device(good)
    assert (d.name, d.memory_bytes, d.flops("fp32"), d.mem_bandwidth) == ("mygpu", 16 * 2**30, 10e12, 900e9)
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: gpu\nmemory: 16GiB\npeak_flops: {fp32: 10TFLOPS}\nmem_bandwidth: 900GB/s\nmemroy_clock: 1\n")
    with pytest.raises(ConfigError) as e:
        load_device(bad)
    assert "memroy_clock" in str(e.value) and "mem_bandwidth" in str(e.value) and "peak_flops" in str(e.value)
    badsize = tmp_path / "badsize.yaml"
    badsize.write_text("kind: gpu\nmemory: sixteen\npeak_flops: {fp32: 10TFLOPS}\nmem_bandwidth: 900GB/s\n")
    with pytest.raises(ConfigError, match="sixteen"):
        load_device(badsize)


def test_unknown_device_lists_available():
    with pytest.raises(ConfigError) as e:
        load_device("b200-999gb")
    for name in ("a100-80gb", "v100-16gb", "cpu"):
        assert name in str(e.value)


def test_a_gpus_name_alone_is_its_one_preset():
    # a user typed --gpu-type v100 and got 'unknown device': the one preset of that name is meant
    assert load_device("v100") == load_device("v100-16gb") and load_device("V100").name == "v100-16gb"
    with pytest.raises(ConfigError, match=r"did you mean a100-40gb or a100-80gb\?"):
        load_device("a100")  # (two presets: named, not picked)
    with pytest.raises(ConfigError, match="unknown device 'v10'; available"):
        load_device("v10")


def test_cpu_is_measured_and_cached():
    cpu = load_device("cpu")
    assert cpu.kind == "cpu" and cpu.measured
    assert cpu.flops("fp32") > 1e8  # any real CPU beats 0.1 GFLOP/s on a 1024² matmul
    assert cpu.mem_bandwidth > 1e8
    files = list(cache_dir().glob("cpu-*.json"))
    assert len(files) == 1
    data = json.loads(files[0].read_text())
    assert data["spec"]["peak_flops"]["fp32"] == cpu.flops("fp32")
    assert load_device("cpu").flops("fp32") == cpu.flops("fp32")  # served from cache


def test_corrupt_cache_is_remeasured_with_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMFLOW_CACHE_DIR", str(tmp_path))
    load_device("cpu")
    (path,) = tmp_path.glob("cpu-*.json")
    path.write_text("{ not json")
    with pytest.warns(UserWarning, match="corrupt"):
        cpu = load_device("cpu")
    assert cpu.flops("fp32") > 0
    json.loads(path.read_text())  # rewritten, valid again
    path.write_text(json.dumps({"format": 1, "key": "someone-else", "spec": {}}))
    with pytest.warns(UserWarning):
        load_device("cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_device("cpu")  # healthy cache: no warning
    assert not list(tmp_path.glob("*.tmp"))


# -- cluster -----------------------------------------------------------------------


def test_every_cluster_preset_loads_and_round_trips():
    assert EXPECTED_CLUSTERS <= set(list_clusters())
    for name in list_clusters():
        c = Cluster.load(name)
        assert c.name == name and c.num_devices == c.num_nodes * c.devices_per_node >= 1
        assert c.host_memory_bytes > 0
        assert Cluster.from_dict(c.to_dict()) == c


def test_preset_facts():
    titan = Cluster.load("titan-x-4")
    assert titan.num_devices == 4 and titan.device.memory_bytes == 12 * 2**30 and titan.host_link_shared
    ac922 = Cluster.load("ac922")
    v100 = Cluster.load("v100-4-pcie")
    assert not ac922.host_link_shared
    assert ac922.host_link.bandwidth > 4 * v100.host_link.bandwidth  # NVLink to CPU: swapping is cheap
    assert v100.device.flops("fp32") < ac922.device.flops("fp32")  # PCIe card clocks lower than SXM2
    dgx = Cluster.load("a100-8-nvlink")
    assert dgx.num_devices == 8 and dgx.intra_link.bandwidth > 10 * v100.intra_link.bandwidth


def test_link_picks_intra_or_inter_on_h100_2x8():
    c = Cluster.load("h100-2x8-ib")
    assert (c.num_nodes, c.devices_per_node, c.num_devices) == (2, 8, 16)
    assert [c.node_of(d) for d in (0, 7, 8, 15)] == [0, 0, 1, 1]
    assert c.link(0, 7) == c.intra_link and c.link(8, 15) == c.intra_link
    assert c.link(7, 8) == c.inter_link and c.link(15, 0) == c.inter_link
    assert c.intra_link.bandwidth > c.inter_link.bandwidth
    assert math.isinf(c.link(3, 3).bandwidth)
    with pytest.raises(IndexError):
        c.node_of(16)
    assert c.link(0, 1).transfer_time(1e9) == pytest.approx(c.intra_link.latency + 1e9 / c.intra_link.bandwidth)


@pytest.mark.parametrize("n", [1, 3, 4])
def test_cpu_n_has_n_devices_sharing_host_memory(n):
    c = Cluster.load(f"cpu-{n}")
    assert c.num_devices == n and c.num_nodes == 1 and c.device.kind == "cpu"
    assert c.device.memory_bytes == c.host_memory_bytes // n
    assert c.host_link.bandwidth == c.device.host_link_bandwidth > 0
    assert Cluster.for_gpus(n, "cpu") == c


def test_variants_and_for_gpus():
    c = Cluster.for_gpus(4)
    assert c.num_devices == 4 and c.device.name == "v100-16gb"
    assert Cluster.for_gpus(2, "a100-40gb", memory="20GiB").device.memory_bytes == 20 * 2**30
    small = c.with_memory("8GiB")
    assert small.device.memory_bytes == 8 * 2**30 and c.device.memory_bytes == 16 * 2**30
    assert c.with_devices(2).num_devices == 2
    big = Cluster.load("h100-2x8-ib")
    assert big.with_devices(32).num_nodes == 4 and big.with_devices(4).num_nodes == 1
    with pytest.raises(ConfigError, match="8 devices per machine"):
        big.with_devices(12)
    with pytest.raises(ConfigError):
        Cluster.for_gpus(0)
    with pytest.raises(ConfigError, match="a100-80gb"):
        Cluster.for_gpus(2, "tpu-v9")


def test_cluster_yaml_unknown_keys_and_overrides(tmp_path):
    p = tmp_path / "mine.yaml"
    p.write_text(
        "devices_per_node: 2\ndevice: v100-16gb\ndevice_memory: 12GiB\n"
        "intra_link: {bandwidth: 300GB/s, latency: 2us}\nhost_memory: 64GiB\n"
    )
    c = Cluster.load(p)
    assert c.name == "mine" and c.device.memory_bytes == 12 * 2**30
    assert c.intra_link == Link(300e9, 2e-6) and c.host_memory_bytes == 64 * 2**30
    bad = tmp_path / "bad.yaml"
    bad.write_text(p.read_text() + "gpus_per_node: 4\n")
    with pytest.raises(ConfigError) as e:
        Cluster.load(bad)
    assert "gpus_per_node" in str(e.value) and "devices_per_node" in str(e.value) and "host_link_shared" in str(e.value)
    with pytest.raises(ConfigError, match="latency"):
        Cluster.from_dict({**c.to_dict(), "intra_link": {"bandwidth": 1e9, "latncy": 1e-6}})
    with pytest.raises(ConfigError, match="host_memory"):
        Cluster.from_dict({**c.to_dict(), "host_memory": "-3GiB"})


def test_unknown_cluster_lists_available():
    with pytest.raises(ConfigError) as e:
        Cluster.load("dgx-z")
    assert "h100-2x8-ib" in str(e.value) and "cpu-N" in str(e.value)
