"""Device specifications: memory, peak compute and memory bandwidth of one device.

A :class:`DeviceSpec` describes one accelerator (or this host's CPU) in base
units: bytes, FLOP/s and bytes/s.  Presets live in ``configs/devices/*.yaml``
and are read by :func:`load_device`; YAML values may carry units
(``memory: 16GiB``, ``mem_bandwidth: 900GB/s``, ``fp32: 15.7TFLOPS``).

The ``cpu`` preset is *measured*, not assumed: ``configs/devices/cpu.yaml``
says ``measured: true`` and :func:`load_device` then times an fp32 matmul and
a large tensor copy on this host (:func:`measure_cpu`, about a second), and
caches the figures as JSON under ``$MEMFLOW_CACHE_DIR`` (default
``~/.cache/memflow``), keyed by hostname, CPU count and torch's thread count.
"""
from __future__ import annotations

import dataclasses
import importlib.resources
import json
import math
import os
import platform
import re
import socket
import statistics
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping


from memflow.errors import ConfigError
from memflow.kinds import FLOP_DTYPES
from memflow.fileio import atomic_write_text, read_yaml_mapping
from memflow.units import (
    format_bandwidth,
    format_bytes,
    format_flops,
    parse_bandwidth,
    parse_bytes,
    parse_flops,
)

__all__ = [
    "DTYPES",
    "PCIE3_X16_BANDWIDTH",
    "DeviceSpec",
    "CONFIG_DIR",
    "DEVICE_DIR",
    "load_device",
    "list_devices",
    "measure_cpu",
    "measure_cuda_host_link",
    "host_memory_bytes",
    "cache_dir",
]

#: Root of the shipped presets: the package data ``memflow.configs`` (``configs/`` in the repository).
CONFIG_DIR = Path(str(importlib.resources.files("memflow.configs")))
#: Device presets: ``configs/devices/NAME.yaml``.
DEVICE_DIR = CONFIG_DIR / "devices"

#: Dtypes with a peak-FLOP/s entry, in fallback order for :meth:`DeviceSpec.flops`.
DTYPES = FLOP_DTYPES
#: PCIe 3.0 x16: 15.75 GB/s theoretical per direction, ~12 GB/s effective for
#: pinned cudaMemcpy (bytes/s).  Default device<->host link.
PCIE3_X16_BANDWIDTH = 12e9

_DTYPE_ALIASES = {
    "fp32": "fp32",
    "float32": "fp32",
    "float": "fp32",
    "torch.float32": "fp32",
    "torch.float": "fp32",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "torch.bfloat16": "bf16",
    "fp16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "torch.float16": "fp16",
    "torch.half": "fp16",
}
_FALLBACK = {"fp32": ("fp32",), "bf16": ("bf16", "fp16", "fp32"), "fp16": ("fp16", "fp32")}


def _positive_finite(x: Any, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
        raise ConfigError(f"{what} must be a positive finite number, got {x!r}")
    return float(x)


@dataclass
class DeviceSpec:
    """One device, in base units.

    Attributes:
        name: preset name, e.g. ``"a100-80gb"``.
        kind: ``"gpu"`` or ``"cpu"``.
        memory_bytes: usable device memory (bytes).
        peak_flops: dense peak FLOP/s per dtype (keys among ``fp32``, ``bf16``,
            ``fp16``; ``fp32`` required; no 2:4 sparsity figures).
        mem_bandwidth: peak device-memory bandwidth (bytes/s; bytes read plus
            written per second).
        compute_efficiency: fraction of ``peak_flops`` typical training
            kernels reach (0 < x ≤ 1).
        memory_efficiency: fraction of ``mem_bandwidth`` memory-bound kernels
            reach (0 < x ≤ 1).
        host_link_bandwidth: the device's own link to host memory, one
            direction (bytes/s); default PCIe 3.0 x16 effective.
        description: free text (where the figures come from).
        measured: True when the figures were measured on this host.
    """

    name: str
    kind: str
    memory_bytes: int
    peak_flops: dict[str, float]
    mem_bandwidth: float
    compute_efficiency: float = 0.5
    memory_efficiency: float = 0.7
    host_link_bandwidth: float = PCIE3_X16_BANDWIDTH
    description: str = ""
    measured: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"device name must be a non-empty string, got {self.name!r}")
        where = f"device {self.name!r}"
        if self.kind not in ("gpu", "cpu"):
            raise ConfigError(f"{where}: kind must be one of gpu, cpu; got {self.kind!r}")
        if isinstance(self.memory_bytes, bool) or not isinstance(self.memory_bytes, int) or self.memory_bytes <= 0:
            raise ConfigError(f"{where}: memory_bytes must be a positive int (bytes), got {self.memory_bytes!r}")
        if not isinstance(self.peak_flops, Mapping) or not self.peak_flops:
            raise ConfigError(f"{where}: peak_flops must be a mapping with keys among {', '.join(DTYPES)}")
        unknown = sorted(set(self.peak_flops) - set(DTYPES))
        if unknown:
            raise ConfigError(f"{where}: unknown peak_flops keys {unknown}; valid keys: {', '.join(DTYPES)}")
        if "fp32" not in self.peak_flops:
            raise ConfigError(f"{where}: peak_flops needs an fp32 entry (FLOP/s)")
        self.peak_flops = {k: _positive_finite(v, f"{where}: peak_flops[{k}]") for k, v in self.peak_flops.items()}
        self.mem_bandwidth = _positive_finite(self.mem_bandwidth, f"{where}: mem_bandwidth (bytes/s)")
        self.host_link_bandwidth = _positive_finite(self.host_link_bandwidth, f"{where}: host_link_bandwidth (bytes/s)")
        for attr in ("compute_efficiency", "memory_efficiency"):
            v = _positive_finite(getattr(self, attr), f"{where}: {attr}")
            if v > 1:
                raise ConfigError(f"{where}: {attr} is a fraction of peak, must be in (0, 1], got {v}")
            setattr(self, attr, v)
        if not isinstance(self.description, str):
            raise ConfigError(f"{where}: description must be a string")
        self.measured = bool(self.measured)

    # -- figures -----------------------------------------------------------------

    def flops(self, dtype: Any = "fp32") -> float:
        """Peak dense FLOP/s for ``dtype`` (``"fp32"``, ``"bf16"``, ``"fp16"``,
        a torch dtype or its name); bf16 falls back to fp16 then fp32, fp16 to
        fp32."""
        key = _DTYPE_ALIASES.get(str(dtype).lower())
        if key is None:
            raise ConfigError(f"unknown dtype {dtype!r}; valid: {', '.join(DTYPES)} (or torch.float32/bfloat16/float16)")
        for k in _FALLBACK[key]:
            if k in self.peak_flops:
                return self.peak_flops[k]
        raise AssertionError("unreachable: fp32 is always present")

    def effective_flops(self, dtype: Any = "fp32") -> float:
        """FLOP/s typical training kernels reach: ``flops(dtype) × compute_efficiency``."""
        return self.flops(dtype) * self.compute_efficiency

    @property
    def effective_mem_bandwidth(self) -> float:
        """Bytes/s memory-bound kernels reach: ``mem_bandwidth × memory_efficiency``."""
        return self.mem_bandwidth * self.memory_efficiency

    def with_memory(self, memory: int | str) -> "DeviceSpec":
        """A copy with ``memory_bytes`` replaced (bytes or a size string like ``"12GiB"``)."""
        return dataclasses.replace(self, memory_bytes=parse_bytes(memory, name="device memory", allow_zero=False))

    def summary(self) -> str:
        """One line: name, memory, fp32/bf16 peak, memory bandwidth."""
        return (
            f"{self.name}: {format_bytes(self.memory_bytes)}, fp32 {format_flops(self.flops('fp32'))}, "
            f"bf16 {format_flops(self.flops('bf16'))}, {format_bandwidth(self.mem_bandwidth)}"
        )

    # -- (de)serialisation -------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain dict in base units, accepted by :meth:`from_dict`."""
        d = dataclasses.asdict(self)
        d["peak_flops"] = dict(self.peak_flops)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, source: str | None = None) -> "DeviceSpec":
        """Build from a mapping whose values may carry units.

        Keys are the field names; ``memory`` is accepted for ``memory_bytes``
        and may be ``"host"`` (this host's memory).  Unknown keys raise
        :class:`ConfigError` listing the valid ones.
        """
        where = f"{source}: " if source else ""
        if not isinstance(d, Mapping):
            raise ConfigError(f"{where}a device spec must be a mapping, got {type(d).__name__}")
        valid = [f.name for f in dataclasses.fields(cls)] + ["memory"]
        unknown = sorted(set(d) - set(valid))
        if unknown:
            raise ConfigError(f"{where}unknown device keys {unknown}; valid keys: {', '.join(sorted(valid))}")
        d = dict(d)
        if "memory" in d and "memory_bytes" in d:
            raise ConfigError(f"{where}give memory or memory_bytes, not both")
        if "memory" in d:
            d["memory_bytes"] = d.pop("memory")
        missing = [k for k in ("name", "kind", "memory_bytes", "peak_flops", "mem_bandwidth") if k not in d]
        if missing:
            raise ConfigError(f"{where}device spec is missing {missing}")
        if d["memory_bytes"] == "host":
            d["memory_bytes"] = host_memory_bytes()
        d["memory_bytes"] = parse_bytes(d["memory_bytes"], name="memory", allow_zero=False)
        pf = d["peak_flops"]
        if not isinstance(pf, Mapping):
            raise ConfigError(f"{where}peak_flops must be a mapping like {{fp32: 19.5TFLOPS, bf16: 312TFLOPS}}")
        bad = sorted(set(pf) - set(DTYPES))
        if bad:
            raise ConfigError(f"{where}unknown peak_flops keys {bad}; valid keys: {', '.join(DTYPES)}")
        d["peak_flops"] = {k: parse_flops(v, name=f"peak_flops.{k}") for k, v in pf.items()}
        d["mem_bandwidth"] = parse_bandwidth(d["mem_bandwidth"], name="mem_bandwidth")
        if "host_link_bandwidth" in d:
            d["host_link_bandwidth"] = parse_bandwidth(d["host_link_bandwidth"], name="host_link_bandwidth")
        try:
            return cls(**d)
        except ConfigError as e:
            raise ConfigError(f"{where}{e}") from None


# -- YAML presets ------------------------------------------------------------------


def _looks_like_path(s: str) -> bool:
    return os.sep in s or "/" in s or s.endswith((".yaml", ".yml"))


def list_devices() -> list[str]:
    """Names of the device presets in ``configs/devices`` (sorted)."""
    return sorted(p.stem for p in DEVICE_DIR.glob("*.yaml"))


def load_device(name_or_path: str | os.PathLike, *, remeasure: bool = False) -> DeviceSpec:
    """Load a device preset by name (``"a100-80gb"``) or from a YAML file path.

    A spec with ``measured: true`` (the ``cpu`` preset) takes its
    ``peak_flops`` and ``mem_bandwidth`` from :func:`measure_cpu`, cached on
    disk (``remeasure=True`` ignores the cache); other keys in the file
    override the measured values.  An unknown name raises
    :class:`ConfigError` listing the available presets.
    """
    s = os.fspath(name_or_path)
    if isinstance(name_or_path, os.PathLike) or _looks_like_path(s):
        path = Path(s)
        if not path.is_file():
            raise ConfigError(f"device file {s} does not exist")
    else:
        path = DEVICE_DIR / f"{s.lower()}.yaml"
        if not path.is_file():
            # a model's name alone where one preset has it (v100: v100-16gb); two, named in the error (a100)
            like = [d for d in list_devices() if d.startswith(s.lower() + "-")] if s else []
            if len(like) != 1:
                hint = f" (did you mean {' or '.join(like)}?)" if like else ""
                raise ConfigError(f"unknown device {s!r}{hint}; available: {', '.join(list_devices())}")
            path = DEVICE_DIR / f"{like[0]}.yaml"
    data = read_yaml_mapping(path)
    data.setdefault("name", path.stem)
    if data.get("measured"):
        measured = _cached_cpu_measurement(remeasure=remeasure).to_dict()
        measured.pop("name")
        if "memory" in data:
            measured.pop("memory_bytes")
        data = {**measured, **data}
    return DeviceSpec.from_dict(data, source=str(path))


# -- host measurement ----------------------------------------------------------------


def host_memory_bytes() -> int:
    """This host's usable memory (bytes): physical RAM, capped by a cgroup limit if set."""
    total = 0
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        pass
    for p in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            raw = Path(p).read_text().strip()
        except OSError:
            continue
        if raw.isdigit() and int(raw) > 0 and (total == 0 or int(raw) < total):
            total = int(raw)
    return total if total > 0 else 8 * 2**30  # unknown platform: a modest 8 GiB


def _median_seconds(fn, repeats: int, budget_s: float, warmup_s: float = 0.1) -> float:
    # Warm-up (page faults, thread-pool start, clock ramp-up): at least one
    # call and about ``warmup_s`` seconds.
    t_end = time.perf_counter() + warmup_s
    fn()
    while time.perf_counter() < t_end:
        fn()
    times: list[float] = []
    start = time.perf_counter()
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 3 and time.perf_counter() - start > budget_s:
            break
    return statistics.median(times)


def measure_cuda_host_link(nbytes: int = 256 * 2**20, repeats: int = 5) -> tuple[float, float]:
    """Pinned host <-> this GPU copy rates in bytes/s: (device to host, host to device),
    medians of ``repeats`` copies of ``nbytes`` timed with CUDA events (what a swap moves)."""
    import torch

    if not torch.cuda.is_available():
        raise ConfigError("measuring the host link needs a CUDA GPU, and torch sees none")
    dev = torch.empty(nbytes // 4, device="cuda")  # pragma: no cover - needs a GPU
    host = torch.empty(nbytes // 4, pin_memory=True)
    rates = []
    for dst, src in ((host, dev), (dev, host)):
        times = []
        for _ in range(repeats + 1):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            dst.copy_(src, non_blocking=True)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / 1e3)
        rates.append(nbytes / statistics.median(times[1:]))
    return rates[0], rates[1]


def measure_cpu(*, matmul_size: int = 1024, copy_bytes: int = 128 * 2**20, repeats: int = 7) -> DeviceSpec:
    """Measure this host's CPU as a :class:`DeviceSpec` (takes about a second).

    * ``peak_flops["fp32"]``: ``2·n³`` / median time of ``torch.mm`` on two
      ``n×n`` fp32 matrices (``n = matmul_size``), with torch's current
      thread count;
    * ``mem_bandwidth``: ``2 × copy_bytes`` (read + write) / median time of a
      ``copy_bytes`` fp32 tensor copy;
    * ``host_link_bandwidth``: the copy rate ``copy_bytes`` / time (a swap on
      CPU is a memcpy);
    * ``memory_bytes``: :func:`host_memory_bytes`.

    No bf16/fp16 entries: :meth:`DeviceSpec.flops` falls back to fp32.
    """
    import torch

    host_mem = host_memory_bytes()
    copy_bytes = max(4 * 2**20, min(copy_bytes, host_mem // 16))
    n = matmul_size
    with torch.no_grad():
        a = torch.randn(n, n)
        b = torch.randn(n, n)
        out = torch.empty(n, n)
        t_mm = _median_seconds(lambda: torch.mm(a, b, out=out), repeats, 0.4)
        src = torch.ones(copy_bytes // 4)
        dst = torch.empty_like(src)
        t_copy = _median_seconds(lambda: dst.copy_(src), repeats, 0.4)
    del a, b, out, src, dst
    threads = torch.get_num_threads()
    copy_rate = copy_bytes / t_copy
    return DeviceSpec(
        name="cpu",
        kind="cpu",
        memory_bytes=host_mem,
        peak_flops={"fp32": 2.0 * n**3 / t_mm},
        mem_bandwidth=2.0 * copy_rate,
        compute_efficiency=0.5,
        memory_efficiency=0.7,
        host_link_bandwidth=copy_rate,
        description=(
            f"measured on {socket.gethostname()} ({platform.processor() or platform.machine()}), "
            f"{os.cpu_count()} CPUs, {threads} torch threads"
        ),
        measured=True,
    )


def cache_dir() -> Path:
    """MemFlow's cache directory: ``$MEMFLOW_CACHE_DIR`` or ``~/.cache/memflow``."""
    env = os.environ.get("MEMFLOW_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "memflow"


def _cpu_cache_key() -> str:
    import torch

    host = re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname()) or "host"
    return f"{host}-{os.cpu_count()}cpu-{torch.get_num_threads()}threads"


_CACHE_FORMAT = 1


def _cached_cpu_measurement(*, remeasure: bool = False) -> DeviceSpec:
    """:func:`measure_cpu`, cached as JSON; a corrupt cache is re-measured with a warning."""
    key = _cpu_cache_key()
    path = cache_dir() / f"cpu-{key}.json"
    if not remeasure and path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or data.get("format") != _CACHE_FORMAT or data.get("key") != key:
                raise ValueError("unexpected format or key")
            spec = DeviceSpec.from_dict(data["spec"])
            spec.memory_bytes = host_memory_bytes()  # memory is read, not measured
            return spec
        except (OSError, ValueError, KeyError, TypeError) as e:
            warnings.warn(f"ignoring corrupt CPU measurement cache {path} ({e}); measuring again", stacklevel=3)
    spec = measure_cpu()
    payload = {"format": _CACHE_FORMAT, "key": key, "measured_at": time.time(), "spec": spec.to_dict()}
    try:
        atomic_write_text(path, json.dumps(payload, indent=1))
    except OSError as e:
        warnings.warn(f"could not write CPU measurement cache {path}: {e}", stacklevel=3)
    return spec
