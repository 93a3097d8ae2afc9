"""Clusters: machines × devices, and the links between them.

A :class:`Cluster` is ``num_nodes`` machines with ``devices_per_node``
identical devices each (a :class:`~memflow.devices.DeviceSpec`).  Devices are
numbered ``0 .. num_devices-1`` machine by machine, so device ``d`` sits on
machine ``d // devices_per_node``.  Three kinds of :class:`Link` (bandwidth in
bytes/s **per direction, per device pair**, latency in seconds):

* ``intra_link`` — device ↔ device inside one machine (NVLink, PCIe);
* ``inter_link`` — device ↔ device on different machines (InfiniBand,
  Ethernet); with one NIC per device (rail-optimised DGX) this is one NIC;
* ``host_link`` — device ↔ host memory (swapping); when ``host_link_shared``
  all devices of a machine share this one link's bandwidth.

and the host's optimizer step (:class:`HostStep`: a stage with its optimizer on
the host steps it on the CPU, a time per tensor and its state's bytes at a rate).

Presets live in ``configs/clusters/*.yaml``; ``Cluster.load("cpu-N")`` builds
N local processes on this host with the measured ``cpu`` device.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from memflow.devices import (
    CONFIG_DIR,
    DeviceSpec,
    host_memory_bytes,
    list_devices,
    load_device,
)
from memflow.errors import ConfigError
from memflow.fileio import read_yaml_mapping
from memflow.linkprobe import measured_gloo_link
from memflow.units import GiB, format_bandwidth, format_bytes, format_time, parse_bandwidth, parse_bytes, parse_time

__all__ = [
    "Link",
    "Cluster",
    "CLUSTER_DIR",
    "list_clusters",
    "PCIE3_X16",
    "PCIE4_X16",
    "PCIE5_X16",
    "NVLINK3_A100",
    "NVLINK4_H100",
    "IB_HDR",
    "IB_NDR",
    "ETH_25G",
    "GLOO_LOOPBACK",
    "HostStep",
    "HOST_STEP",
]

#: Cluster presets: ``configs/clusters/NAME.yaml``.
CLUSTER_DIR = CONFIG_DIR / "clusters"


@dataclass(frozen=True)
class Link:
    """A point-to-point link: ``bandwidth`` in bytes/s (one direction), ``latency`` in seconds.

    ``bandwidth`` may be ``inf`` (a device talking to itself).
    """

    bandwidth: float
    latency: float

    def __post_init__(self) -> None:
        bw, lat = self.bandwidth, self.latency
        if isinstance(bw, bool) or not isinstance(bw, (int, float)) or math.isnan(bw) or bw <= 0:
            raise ConfigError(f"link bandwidth must be > 0 bytes/s, got {bw!r}")
        if isinstance(lat, bool) or not isinstance(lat, (int, float)) or not math.isfinite(lat) or lat < 0:
            raise ConfigError(f"link latency must be ≥ 0 seconds, got {lat!r}")
        object.__setattr__(self, "bandwidth", float(bw))
        object.__setattr__(self, "latency", float(lat))

    def transfer_time(self, nbytes: float) -> float:
        """Seconds to move ``nbytes`` over the link: ``latency + nbytes / bandwidth`` (α–β model)."""
        return self.latency + nbytes / self.bandwidth

    def to_dict(self) -> dict[str, float]:
        """``{"bandwidth": bytes/s, "latency": seconds}``."""
        return {"bandwidth": self.bandwidth, "latency": self.latency}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, what: str = "link") -> "Link":
        """From ``{bandwidth: "300GB/s", latency: "3us"}`` (units optional)."""
        if isinstance(d, Link):
            return d
        if not isinstance(d, Mapping):
            raise ConfigError(f"{what} must be a mapping like {{bandwidth: 12GB/s, latency: 10us}}, got {d!r}")
        valid = {"bandwidth", "latency"}
        unknown = sorted(set(d) - valid)
        if unknown or not valid <= set(d):
            raise ConfigError(
                f"{what}: unknown keys {unknown} / missing {sorted(valid - set(d))}; valid keys: bandwidth, latency"
            )
        return cls(
            parse_bandwidth(d["bandwidth"], name=f"{what}.bandwidth"),
            parse_time(d["latency"], name=f"{what}.latency"),
        )

    def __str__(self) -> str:
        return f"{format_bandwidth(self.bandwidth)}, {format_time(self.latency)}"


# Public figures, effective rather than theoretical where measurements are
# common knowledge.  Bandwidth is one direction per device pair.
#: PCIe 3.0 x16: 15.75 GB/s theoretical, ~12 GB/s effective (cudaMemcpy / NCCL), ~10 us.
PCIE3_X16 = Link(12e9, 10e-6)
#: PCIe 4.0 x16: 31.5 GB/s theoretical, ~25 GB/s effective, ~10 us.
PCIE4_X16 = Link(25e9, 10e-6)
#: PCIe 5.0 x16: 63 GB/s theoretical, ~50 GB/s effective, ~10 us.
PCIE5_X16 = Link(50e9, 10e-6)
#: NVLink 3 (A100, 12 links) through NVSwitch: 300 GB/s per direction, ~240 GB/s NCCL bus bandwidth, ~3 us.
NVLINK3_A100 = Link(240e9, 3e-6)
#: NVLink 4 (H100 SXM, 18 links) through NVSwitch: 450 GB/s per direction, ~370 GB/s NCCL bus bandwidth, ~3 us.
NVLINK4_H100 = Link(370e9, 3e-6)
#: InfiniBand HDR, 200 Gbit/s per port = 25 GB/s, ~23 GB/s effective; ~5 us through NCCL.
IB_HDR = Link(23e9, 5e-6)
#: InfiniBand NDR, 400 Gbit/s per port = 50 GB/s, ~46 GB/s effective; ~5 us through NCCL.
IB_NDR = Link(46e9, 5e-6)
#: 25 Gbit/s Ethernet (TCP): ~2.8 GB/s effective, ~30 us. Default inter-machine link.
ETH_25G = Link(2.8e9, 30e-6)


@dataclass(frozen=True)
class HostStep:
    """The host's optimizer step, per rank: ``per_tensor_s`` seconds for each tensor it steps (torch
    steps CPU tensors one by one) and ``bandwidth`` bytes/s of parameters, gradients and optimizer
    state (:mod:`simulator.hostopt`)."""

    bandwidth: float
    per_tensor_s: float

    def __post_init__(self) -> None:
        if not (isinstance(self.bandwidth, (int, float)) and self.bandwidth > 0 and math.isfinite(self.bandwidth)):
            raise ConfigError(f"host_optimizer.bandwidth must be a positive number (bytes/s), got {self.bandwidth!r}")
        if not (isinstance(self.per_tensor_s, (int, float)) and 0 <= self.per_tensor_s < math.inf):
            raise ConfigError(f"host_optimizer.per_tensor must be a time ≥ 0, got {self.per_tensor_s!r}")

    def to_dict(self) -> dict[str, float]:
        return {"bandwidth": self.bandwidth, "per_tensor": self.per_tensor_s}

    @classmethod
    def from_dict(cls, d: Any) -> "HostStep":
        """From ``{bandwidth: 12GB/s, per_tensor: 20us}`` (units optional; either key may be left out)."""
        if isinstance(d, HostStep):
            return d
        if not isinstance(d, Mapping):
            raise ConfigError(f"host_optimizer must be a mapping like {{bandwidth: 12GB/s, per_tensor: 20us}}, got {d!r}")
        unknown = sorted(set(d) - {"bandwidth", "per_tensor"})
        if unknown:
            raise ConfigError(f"host_optimizer: unknown keys {unknown}; valid keys: bandwidth, per_tensor")
        return cls(parse_bandwidth(d.get("bandwidth", HOST_STEP.bandwidth), name="host_optimizer.bandwidth"),
                   parse_time(d.get("per_tensor", HOST_STEP.per_tensor_s), name="host_optimizer.per_tensor"))

    def __str__(self) -> str:
        return f"{format_bandwidth(self.bandwidth)}, {format_time(self.per_tensor_s)} a tensor"


#: torch's CPU AdamW, one rank: 12 GB/s of state (the lent H200 machine's host steps, 16 cores: 12.1-13.4)
#: and 20 us a tensor (this project's 2-core host: 24.5-25.6 in two runs); ``python -m bench hostopt``
HOST_STEP = HostStep(12e9, 20e-6)
#: gloo over loopback between local processes, approximate (2 GB/s, 50 us): the fallback when
#: :func:`memflow.linkprobe.measured_gloo_link` cannot measure this host.
GLOO_LOOPBACK = Link(2e9, 50e-6)

# Default device<->device link inside one machine for Cluster.for_gpus.
_DEFAULT_INTRA = {
    "a100-40gb": NVLINK3_A100,
    "a100-80gb": NVLINK3_A100,
    "h100-80gb": NVLINK4_H100,
    "v100-16gb": PCIE3_X16,
    "titan-x-12gb": PCIE3_X16,
    "l4": PCIE4_X16,
    "rtx-4090": Link(20e9, 15e-6),  # no P2P on GeForce Ada: staged through host memory over PCIe 4.0
}
_HOST_LINK_LATENCY = 10e-6  # cudaMemcpyAsync launch + PCIe round trip, seconds
_CPU_RE = re.compile(r"^cpu(?:-(\d+))?$")

_YAML_KEYS = {
    "name": "preset name (default: file name)",
    "description": "free text",
    "num_nodes": "machines (default 1)",
    "devices_per_node": "devices per machine",
    "device": "device preset name, YAML path, or a full device mapping",
    "device_memory": "override of the device's memory (e.g. 12GiB)",
    "device_overrides": "mapping of DeviceSpec fields to override",
    "intra_link": "{bandwidth, latency} device<->device inside a machine",
    "inter_link": "{bandwidth, latency} machine<->machine (default 25 GbE)",
    "host_link": "{bandwidth, latency} device<->host memory (default: the device's host_link_bandwidth, 10us)",
    "host_link_shared": "true if a machine's devices share one host link (default false)",
    "host_memory": "host memory per machine (e.g. 512GiB)",
    "host_optimizer": "{bandwidth, per_tensor} a rank's optimizer step on the host (default 12GB/s, 20us: torch's CPU AdamW)",
}


@dataclass
class Cluster:
    """``num_nodes`` machines × ``devices_per_node`` devices of one kind.

    Attributes:
        name: preset or generated name.
        num_nodes: number of machines (≥ 1).
        devices_per_node: devices per machine (≥ 1).
        device: the device (all devices are identical).
        intra_link: device ↔ device inside a machine.
        inter_link: device ↔ device across machines (per device pair).
        host_link: device ↔ host memory, used for swapping.
        host_link_shared: True when all devices of a machine share the one
            host link's bandwidth (e.g. one PCIe root); False when each
            device has its own.
        host_memory_bytes: host memory per machine (bytes).
        description: free text.
        host_step: a rank's optimizer step on the host (:class:`HostStep`).
    """

    name: str
    num_nodes: int
    devices_per_node: int
    device: DeviceSpec
    intra_link: Link
    inter_link: Link
    host_link: Link
    host_link_shared: bool
    host_memory_bytes: int
    description: str = ""
    # devices per tensor-parallel group this cluster stands for (grouped): each of its devices is
    # ``group`` real devices of one machine running a stage replica together (one rank's figures)
    group: int = 1
    host_step: HostStep = HOST_STEP

    def __post_init__(self) -> None:
        where = f"cluster {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"cluster name must be a non-empty string, got {self.name!r}")
        for attr in ("num_nodes", "devices_per_node"):
            v = getattr(self, attr)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{where}: {attr} must be an int ≥ 1, got {v!r}")
        if not isinstance(self.device, DeviceSpec):
            raise ConfigError(f"{where}: device must be a DeviceSpec, got {type(self.device).__name__}")
        for attr in ("intra_link", "inter_link", "host_link"):
            if not isinstance(getattr(self, attr), Link):
                raise ConfigError(f"{where}: {attr} must be a Link, got {getattr(self, attr)!r}")
        if not isinstance(self.host_step, HostStep):
            raise ConfigError(f"{where}: host_step must be a HostStep, got {self.host_step!r}")
        if not isinstance(self.host_link_shared, bool):
            raise ConfigError(f"{where}: host_link_shared must be true or false, got {self.host_link_shared!r}")
        hm = self.host_memory_bytes
        if isinstance(hm, bool) or not isinstance(hm, int) or hm <= 0:
            raise ConfigError(f"{where}: host_memory_bytes must be a positive int (bytes), got {hm!r}")

    # -- topology ------------------------------------------------------------------

    @property
    def num_devices(self) -> int:
        """Total devices: ``num_nodes × devices_per_node``."""
        return self.num_nodes * self.devices_per_node

    def node_of(self, device: int) -> int:
        """Machine index of device ``device`` (devices are numbered machine by machine)."""
        if isinstance(device, bool) or not isinstance(device, int) or not 0 <= device < self.num_devices:
            raise IndexError(f"device {device!r} out of range: cluster {self.name!r} has devices 0..{self.num_devices - 1}")
        return device // self.devices_per_node

    def link(self, a: int, b: int) -> Link:
        """The link between devices ``a`` and ``b``: ``intra_link`` on one machine,
        ``inter_link`` across machines, an infinite zero-latency link when ``a == b``."""
        na, nb = self.node_of(a), self.node_of(b)
        if a == b:
            return Link(math.inf, 0.0)
        return self.intra_link if na == nb else self.inter_link

    def host_bandwidth_per_device(self, active_devices: int | None = None) -> float:
        """Host-link bytes/s one device gets when ``active_devices`` of its machine
        (default: all) copy at once: divided among them if ``host_link_shared``."""
        n = self.devices_per_node if active_devices is None else max(1, min(active_devices, self.devices_per_node))
        return self.host_link.bandwidth / n if self.host_link_shared else self.host_link.bandwidth

    # -- variants ------------------------------------------------------------------

    def with_memory(self, memory: int | str) -> "Cluster":
        """A copy whose devices have ``memory`` bytes (int or a size string like ``"8GiB"``)."""
        return dataclasses.replace(self, device=self.device.with_memory(memory))

    def with_devices(self, n: int) -> "Cluster":
        """A copy with ``n`` devices in all: on one machine ``devices_per_node = n``;
        on several, ``n`` must be a multiple of ``devices_per_node`` (machines are
        added or removed).  Per-device memory is kept."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"number of devices must be an int ≥ 1, got {n!r}")
        if self.num_nodes == 1 or n < self.devices_per_node:
            nodes, per = 1, n
        elif n % self.devices_per_node == 0:
            nodes, per = n // self.devices_per_node, self.devices_per_node
        else:
            raise ConfigError(
                f"cluster {self.name!r} has {self.devices_per_node} devices per machine; "
                f"{n} devices is not a whole number of machines ({n} / {self.devices_per_node})"
            )
        name = self.name if n == self.num_devices else f"{self.name}[{n}]"
        return dataclasses.replace(self, name=name, num_nodes=nodes, devices_per_node=per)

    def grouped(self, tp: int) -> "Cluster":
        """The cluster as a tensor-parallel plan sees it: each group of ``tp`` neighbouring devices
        of one machine is one device (with one device's memory: every figure is one rank's). The
        host link's share and the host memory per group shrink by ``tp``: the group's ranks each
        use theirs."""
        if tp == self.group:
            return self
        if self.group != 1:
            raise ConfigError(f"cluster {self.name!r} is already grouped by {self.group}")
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1 or self.devices_per_node % tp:
            raise ConfigError(f"tp {tp} must divide the {self.devices_per_node} devices of a machine "
                              f"(a tensor-parallel group stays inside one machine)")
        host = (Link(self.host_link.bandwidth / tp, self.host_link.latency) if self.host_link_shared
                else self.host_link)
        return dataclasses.replace(self, name=f"{self.name}/tp{tp}", devices_per_node=self.devices_per_node // tp,
                                   host_link=host, host_memory_bytes=self.host_memory_bytes // tp, group=tp)

    def summary(self) -> str:
        """A few lines describing the cluster with units."""
        return "\n".join(
            [
                f"{self.name}: {self.num_nodes} machine(s) × {self.devices_per_node} {self.device.name} "
                f"({format_bytes(self.device.memory_bytes)} each), host memory {format_bytes(self.host_memory_bytes)}/machine",
                f"  intra {self.intra_link}; inter {self.inter_link}; "
                f"host {self.host_link}{' (shared)' if self.host_link_shared else ''}; "
                f"host optimizer step {self.host_step}",
            ]
        )

    # -- (de)serialisation -----------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain dict in base units (the device in full), accepted by :meth:`from_dict`."""
        return {
            "name": self.name,
            "description": self.description,
            "num_nodes": self.num_nodes,
            "devices_per_node": self.devices_per_node,
            "device": self.device.to_dict(),
            "intra_link": self.intra_link.to_dict(),
            "inter_link": self.inter_link.to_dict(),
            "host_link": self.host_link.to_dict(),
            "host_link_shared": self.host_link_shared,
            "host_memory": self.host_memory_bytes,
            "host_optimizer": self.host_step.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, source: str | None = None) -> "Cluster":
        """Build from a mapping (a preset YAML or :meth:`to_dict`'s output).

        Keys: ``name, description, num_nodes, devices_per_node, device,
        device_memory, device_overrides, intra_link, inter_link, host_link,
        host_link_shared, host_memory, host_optimizer``; values may carry units.  Unknown keys
        raise :class:`ConfigError` listing the valid ones.
        """
        where = f"{source}: " if source else ""
        if not isinstance(d, Mapping):
            raise ConfigError(f"{where}a cluster must be a mapping, got {type(d).__name__}")
        unknown = sorted(set(d) - set(_YAML_KEYS))
        if unknown:
            raise ConfigError(f"{where}unknown cluster keys {unknown}; valid keys: {', '.join(_YAML_KEYS)}")
        missing = [k for k in ("devices_per_node", "device", "intra_link", "host_memory") if k not in d]
        if missing:
            raise ConfigError(f"{where}cluster is missing {missing}")
        if "name" not in d and source is None:
            raise ConfigError("cluster is missing ['name']")
        try:
            dev = d["device"]
            if isinstance(dev, DeviceSpec):
                device = dev
            elif isinstance(dev, Mapping):
                device = DeviceSpec.from_dict(dev, source=f"{where}device")
            elif isinstance(dev, str):
                device = load_device(dev)
            else:
                raise ConfigError(f"device must be a preset name ({', '.join(list_devices())}) or a mapping, got {dev!r}")
            overrides = d.get("device_overrides") or {}
            if overrides:
                if not isinstance(overrides, Mapping):
                    raise ConfigError("device_overrides must be a mapping of device fields")
                base = device.to_dict()
                if "memory" in overrides:
                    base.pop("memory_bytes")
                device = DeviceSpec.from_dict({**base, **overrides}, source=f"{where}device_overrides")
            if d.get("device_memory") is not None:
                device = device.with_memory(d["device_memory"])
            default_host = Link(device.host_link_bandwidth, _HOST_LINK_LATENCY)
            host_memory = d["host_memory"]
            if host_memory == "host":
                host_memory = host_memory_bytes()
            shared = d.get("host_link_shared", False)
            if not isinstance(shared, bool):
                raise ConfigError(f"host_link_shared must be true or false, got {shared!r}")
            return cls(
                name=str(d.get("name") or Path(source or "cluster").stem),
                num_nodes=d.get("num_nodes", 1),
                devices_per_node=d["devices_per_node"],
                device=device,
                intra_link=Link.from_dict(d["intra_link"], what="intra_link"),
                inter_link=Link.from_dict(d["inter_link"], what="inter_link") if "inter_link" in d else ETH_25G,
                host_link=Link.from_dict(d["host_link"], what="host_link") if "host_link" in d else default_host,
                host_link_shared=shared,
                host_memory_bytes=parse_bytes(host_memory, name="host_memory", allow_zero=False),
                description=str(d.get("description", "")),
                host_step=HostStep.from_dict(d["host_optimizer"]) if d.get("host_optimizer") is not None else HOST_STEP,
            )
        except ConfigError as e:
            if where and not str(e).startswith(where):
                raise ConfigError(f"{where}{e}") from None
            raise

    # -- constructors --------------------------------------------------------------------

    @classmethod
    def load(cls, name_or_path: str | os.PathLike) -> "Cluster":
        """A preset by name (``"a100-8-nvlink"``, ``"cpu-4"``) or a YAML file path.

        ``cpu-N`` (any N ≥ 1; ``cpu`` means ``cpu-1``) is N local processes on
        this host: see :meth:`for_gpus` with ``gpu_type="cpu"``.
        """
        s = os.fspath(name_or_path)
        if isinstance(name_or_path, os.PathLike) or "/" in s or os.sep in s or s.endswith((".yaml", ".yml")):
            path = Path(s)
            if not path.is_file():
                raise ConfigError(f"cluster file {s} does not exist")
        else:
            m = _CPU_RE.match(s.lower())
            if m:
                n = int(m.group(1) or 1)
                if n < 1:
                    raise ConfigError(f"cluster {s!r}: cpu-N needs N ≥ 1")
                return cls.for_gpus(n, "cpu")
            path = CLUSTER_DIR / f"{s.lower()}.yaml"
            if not path.is_file():
                raise ConfigError(f"unknown cluster {s!r}; available: {', '.join(list_clusters())}, cpu-N (any N ≥ 1)")
        data = read_yaml_mapping(path)
        data.setdefault("name", path.stem)
        return cls.from_dict(data, source=str(path))

    @classmethod
    def for_gpus(cls, n: int, gpu_type: str = "v100-16gb", memory: int | str | None = None) -> "Cluster":
        """One machine with ``n`` devices of ``gpu_type`` (a device preset name).

        Devices talk over NVLink for SXM data-centre parts (A100, H100) and
        over PCIe otherwise; the host link is the device's own
        ``host_link_bandwidth``, not shared; host memory is
        ``max(2 × n × device memory, 64 GiB)``.  ``memory`` overrides the
        device memory (bytes or ``"12GiB"``).

        ``gpu_type="cpu"`` gives ``cpu-n``: ``n`` local processes with the
        measured cpu device, device memory = host memory / n (unless
        ``memory``), gloo over loopback between them (α–β measured by
        :mod:`memflow.linkprobe`, cached), and a host link at the measured
        memcpy rate.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"number of devices must be an int ≥ 1, got {n!r}")
        if gpu_type == "cpu":
            device = load_device("cpu")
            host_mem = device.memory_bytes
            device = device.with_memory(memory if memory is not None else max(1, host_mem // n))
            measured = measured_gloo_link() if n > 1 else None  # (one process talks to no one)
            gloo = Link(*measured) if measured is not None else GLOO_LOOPBACK
            links = dict(intra_link=gloo, inter_link=gloo,
                         host_link=Link(device.host_link_bandwidth, 1e-6),  # a memcpy in the same memory
                         host_link_shared=True)  # all processes share the one memory bus
            name, what = f"cpu-{n}", f"{n} local process(es) on this host, gloo over loopback (measured)"
        else:
            device = load_device(gpu_type)
            if memory is not None:
                device = device.with_memory(memory)
            host_mem = max(2 * n * device.memory_bytes, 64 * GiB)
            links = dict(intra_link=_DEFAULT_INTRA.get(device.name, Link(device.host_link_bandwidth, 10e-6)),
                         inter_link=ETH_25G, host_link=Link(device.host_link_bandwidth, _HOST_LINK_LATENCY),
                         host_link_shared=False)
            name, what = f"{device.name}-x{n}", f"one machine with {n} × {device.name} (generated defaults)"
        return cls(name=name, num_nodes=1, devices_per_node=n, device=device, host_memory_bytes=host_mem,
                   description=what, **links)


def list_clusters() -> list[str]:
    """Names of the cluster presets in ``configs/clusters`` (sorted); ``cpu-N`` is also loadable."""
    return sorted(p.stem for p in CLUSTER_DIR.glob("*.yaml"))
