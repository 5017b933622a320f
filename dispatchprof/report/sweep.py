"""A sweep's CSV and plot, and the Pareto front they mark.

The Pareto front of one model on one device (`front_group`): the rows that fit in its memory
(or whose fit is unknown) and that no other such row beats on both axes, latency (`latency`: the
mean time per output token, lower is better) and cost (J/token, lower is better). A larger batch
costs less per token but each token takes longer: the front is that trade-off. A row that does not fit is drawn and written, marked, never on
the front. The plot needs matplotlib.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
from typing import Sequence

from dispatchprof.results.files import write_atomic
from dispatchprof.results.sweep import COLUMNS, SweepRow


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points (latency, cost), both lower-is-better, that no other point
    dominates: another point dominates when it is <= on both axes and < on one."""
    front = []
    for i, (x, y) in enumerate(points):
        if not any(x2 <= x and y2 <= y and (x2 < x or y2 < y) for j, (x2, y2) in enumerate(points) if j != i):
            front.append(i)
    return front


def latency(row: SweepRow) -> float:
    """Seconds per output token: the mean TPOT; TTFT with one new token; the forward pass's
    time for an encoder."""
    if row.tpot_mean_s is not None:
        return row.tpot_mean_s
    return row.ttft_s if row.ttft_s is not None else row.time_s


def mark_pareto(rows: Sequence[SweepRow]) -> list[SweepRow]:
    """The rows with ``pareto`` set per (device, model) (rows that do not fit never are)."""
    out = list(rows)
    for group in dict.fromkeys(map(front_group, rows)):
        idx = [i for i, r in enumerate(rows) if front_group(r) == group and r.fits is not False]
        for k in pareto_front([(latency(rows[i]), rows[i].energy_per_token_j) for i in idx]):
            out[idx[k]] = dataclasses.replace(rows[idx[k]], pareto=True)
    return out


def front_group(row: SweepRow) -> tuple[str, str]:
    """Rows compared for one front: one model on one device (the knobs are batch, prompt length
    and new tokens; a smaller model would otherwise win every front outright)."""
    return row.device, row.model


def sweep_csv(rows: Sequence[SweepRow]) -> str:
    """One CSV row per combination, raw units, empty cells where a figure does not apply."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow(["" if v is None else v for v in dataclasses.astuple(r)])
    return out.getvalue()


def plot_sweep(rows: Sequence[SweepRow], path: str | os.PathLike, *, title: str = "") -> str:
    """Write the PNG: J/token against seconds per output token (`latency`); a colour per device, a marker per model, each
    (model, device) Pareto front as a line through its points (ringed in black), rows that do not
    fit in memory as crosses; labels give batch and prompt length."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("the sweep plot needs matplotlib: pip install 'dispatchprof[plot]'") from None
    colors = {d: f"C{k % 10}" for k, d in enumerate(dict.fromkeys(r.device for r in rows))}
    markers = {m: "os^Dvp"[k % 6] for k, m in enumerate(dict.fromkeys(r.model for r in rows))}
    fig, ax = plt.subplots(figsize=(9, 6))
    shown = [r for r in rows if latency(r) > 0 and r.energy_per_token_j > 0]
    for (device, model) in dict.fromkeys(map(front_group, shown)):
        mine = [r for r in shown if front_group(r) == (device, model)]
        color, marker = colors[device], markers[model]
        for r in mine:
            ax.scatter([latency(r)], [r.energy_per_token_j], color=color, s=40 if r.pareto else 22,
                       marker="x" if r.fits is False else marker, linewidths=0.8,
                       **({"edgecolors": "black"} if r.pareto else {}))
            ax.annotate(f"b{r.batch} p{r.prompt_len}", (latency(r), r.energy_per_token_j), fontsize=6,
                        xytext=(3, 3), textcoords="offset points", color=color)
        front = sorted((r for r in mine if r.pareto), key=latency)
        ax.plot([latency(r) for r in front], [r.energy_per_token_j for r in front], "-", color=color,
                lw=1.2, alpha=0.7)
    for device, color in colors.items():
        ax.scatter([], [], color=color, marker="s", label=device)
    for model, marker in markers.items():
        ax.scatter([], [], color="gray", marker=marker, label=model)
    if any(r.fits is False for r in shown):
        ax.scatter([], [], color="gray", marker="x", label="does not fit in memory")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("seconds per output token: mean TPOT (lower is better)")
    ax.set_ylabel("energy per token, J (lower is better)")
    ax.set_title(title or "sweep: lines join the Pareto front of each model on each device (ringed points)")
    ax.legend(fontsize=7)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return write_atomic(path, buf.getvalue())
