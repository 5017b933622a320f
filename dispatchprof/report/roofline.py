"""A roofline plot (PNG) of one or more simulations: one panel per simulated device (scenario),
ops or modules against that device's roofs.

x: arithmetic intensity (work / bytes), y: achieved FLOP/s (work / simulated time); the roofs
are min(peak, bandwidth * x) for the device's matrix and vector peaks of ``dtype``. A placement's
panel draws the roofs of its first device. Needs matplotlib (``pip install dispatchprof[plot]``).
"""

from __future__ import annotations

import io
import os
from collections import defaultdict
from typing import Iterable

from dispatchprof.results.files import write_atomic
from dispatchprof.sim.simulate import Simulation

LEVELS = ("ops", "modules")


def plot_roofline(sims: Simulation | Iterable[Simulation], path: str | os.PathLike, *, level: str = "ops",
                  dtype: str = "bf16") -> str:
    """Write the roofline PNG of ``sims`` (one panel each, side by side) to ``path``."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    sims = [sims] if isinstance(sims, Simulation) else list(sims)
    if not sims:
        raise ValueError("plot_roofline() needs at least one simulation")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("the roofline plot needs matplotlib: pip install 'dispatchprof[plot]'") from None
    fig, axes = plt.subplots(1, len(sims), figsize=(6.5 * len(sims), 4.5), squeeze=False)
    for ax, sim in zip(axes[0], sims):
        _panel(ax, sim, level, dtype)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return write_atomic(path, buf.getvalue())


def _panel(ax, sim: Simulation, level: str, dtype: str) -> None:
    device = sim.placement.devices[0]
    xs = [10 ** (k / 10) for k in range(-30, 41)]
    bw = device.memory_bandwidth_gb_per_s * 1e9
    for label, matrix, style in (("matrix", True, "-"), ("vector", False, "--")):
        peak = device.peak_flops(dtype, matrix)
        ax.plot(xs, [min(peak, bw * x) for x in xs], style, color="black", lw=1,
                label=f"{label} roof ({dtype}, {peak / 1e12:g} TFLOP/s)")
    for name, (x, y) in roofline_points(sim, level).items():
        ax.scatter([x], [y], s=18)
        ax.annotate(name, (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (work / byte)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title(f"{sim.name}: {level}")
    ax.legend(fontsize=7, loc="lower right")


def roofline_points(sim: Simulation, level: str) -> dict[str, tuple[float, float]]:
    """(intensity, achieved FLOP/s) per op name or module scope."""
    work: dict[str, float] = defaultdict(float)
    traffic: dict[str, float] = defaultdict(float)
    time: dict[str, float] = defaultdict(float)
    for t in sim.ops:
        r = sim.records[t.record]
        key = r.op if level == "ops" else (r.scope or "(root)")
        work[key] += t.work
        traffic[key] += t.traffic_bytes
        time[key] += t.time_s
    return {k: (work[k] / traffic[k], work[k] / time[k]) for k in work if work[k] and traffic[k] and time[k]}
