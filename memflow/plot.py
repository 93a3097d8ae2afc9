"""The memory plot of a simulated step: each device's curve, in the units that fit the figure."""
from __future__ import annotations

import io
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .fileio import atomic_write_bytes  # noqa: E402

__all__ = ["plot_memory", "byte_unit", "time_unit"]

_STYLES = ["-", "--", "-.", ":"]


def byte_unit(top: float) -> tuple[float, str]:
    """The divisor and name of the binary unit that shows ``top`` bytes as 1 to 1023."""
    for div, name in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if top >= div:
            return div, name
    return 1, "B"


def time_unit(top: float) -> tuple[float, str]:
    for div, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if top >= div:
            return div, name
    return 1e-9, "ns"


def plot_memory(sim, path: str | os.PathLike) -> None:
    """Write ``sim``'s (a detailed SimResult) per-device memory curves and capacity line as a PNG.
    Devices whose curves are the same (data-parallel replicas of a stage) are one line, labelled
    with all of them; the others differ in colour and line style."""
    curves = sim.memory_curve
    groups: list[tuple[list[int], np.ndarray, np.ndarray]] = []
    for d, (t, b) in enumerate(curves):
        for devs, t0, b0 in groups:
            if np.array_equal(t, t0) and np.array_equal(b, b0):
                devs.append(d)
                break
        else:
            groups.append(([d], t, b))
    top_curve = max([float(np.max(b)) for _, _, b in groups if len(b)] + [1.0])
    cap = float(max(sim.capacity_bytes)) if sim.capacity_bytes else 0.0
    cap_shown = 0 < cap <= 3 * top_curve  # far above the curves: named, not drawn (it would flatten them)
    top_b = max(top_curve, cap if cap_shown else 0.0)
    top_t = max([float(np.max(t)) for _, t, _ in groups if len(t)] + [sim.step_time_s, 1e-9])
    bdiv, bname = byte_unit(top_b)
    tdiv, tname = time_unit(top_t)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for i, (devs, t, b) in enumerate(groups):
        label = f"device {devs[0]}" if len(devs) == 1 else "devices " + ", ".join(map(str, devs))
        ax.step(t / tdiv, b / bdiv, where="post", label=label, color=f"C{i % 10}",
                linestyle=_STYLES[(i // 10 + i) % len(_STYLES)], linewidth=1.6)
    if cap_shown:
        ax.axhline(cap / bdiv, color="k", ls="--", lw=1, label="capacity")
    elif cap:
        cdiv, cname = byte_unit(cap)
        ax.plot([], [], " ", label=f"capacity {cap / cdiv:.3g} {cname} (off scale)")
    ax.set_xlabel(f"time ({tname})")
    ax.set_ylabel(f"device memory ({bname})")
    ax.set_ylim(bottom=0)
    ax.set_title(f"step {sim.step_time_s / tdiv:.3g} {tname}: {sim.binding}", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
