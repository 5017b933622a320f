"""A sweep's CSV and plot, and the Pareto front they mark.

The Pareto front of one device (decoders and forward passes apart, `front_group`): the rows that fit in its memory (or whose fit is unknown) and
that no other such row beats on both axes, speed (tokens/s, higher is better) and cost
(J/token, lower is better). A row that does not fit is drawn and written, marked, never on
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
    """Indices of the points (speed, cost) that no other point dominates: another point
    dominates when its speed is >= and its cost <=, one of them strictly."""
    front = []
    for i, (s, c) in enumerate(points):
        if not any((s2 >= s and c2 <= c) and (s2 > s or c2 < c) for j, (s2, c2) in enumerate(points) if j != i):
            front.append(i)
    return front


def mark_pareto(rows: Sequence[SweepRow]) -> list[SweepRow]:
    """The rows with ``pareto`` set per device (rows that do not fit never are)."""
    out = list(rows)
    for group in dict.fromkeys(map(front_group, rows)):
        idx = [i for i, r in enumerate(rows) if front_group(r) == group and r.fits is not False]
        for k in pareto_front([(rows[i].tokens_per_s, rows[i].energy_per_token_j) for i in idx]):
            out[idx[k]] = dataclasses.replace(rows[idx[k]], pareto=True)
    return out


def front_group(row: SweepRow) -> tuple[str, bool]:
    """Rows compared for one front: one device, and generated tokens (decoders) apart from
    processed tokens (forward passes of encoders), whose tokens/s mean different things."""
    return row.device, row.kind == "decoder"


def sweep_csv(rows: Sequence[SweepRow]) -> str:
    """One CSV row per combination, raw units, empty cells where a figure does not apply."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow(["" if v is None else v for v in dataclasses.astuple(r)])
    return out.getvalue()


def plot_sweep(rows: Sequence[SweepRow], path: str | os.PathLike, *, title: str = "") -> str:
    """Write the PNG: J/token against tokens/s, one colour per device, its Pareto front as a line,
    rows that do not fit in memory as hollow crosses."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("the sweep plot needs matplotlib: pip install 'dispatchprof[plot]'") from None
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for k, device in enumerate(dict.fromkeys(r.device for r in rows)):
        color = f"C{k % 10}"
        mine = [r for r in rows if r.device == device and r.tokens_per_s > 0 and r.energy_per_token_j > 0]
        fit = [r for r in mine if r.fits is not False]
        over = [r for r in mine if r.fits is False]
        ax.scatter([r.tokens_per_s for r in fit], [r.energy_per_token_j for r in fit], color=color, s=22,
                   label=device)
        if over:
            ax.scatter([r.tokens_per_s for r in over], [r.energy_per_token_j for r in over], color=color,
                       marker="x", s=30, label=f"{device}: does not fit in memory")
        for group in dict.fromkeys(map(front_group, fit)):
            front = sorted((r for r in fit if r.pareto and front_group(r) == group), key=lambda r: r.tokens_per_s)
            ax.plot([r.tokens_per_s for r in front], [r.energy_per_token_j for r in front], "-", color=color,
                    lw=1.5, alpha=0.8)
        for r in mine:
            ax.annotate(f"{r.model} b{r.batch} p{r.prompt_len}", (r.tokens_per_s, r.energy_per_token_j),
                        fontsize=6, xytext=(3, 3), textcoords="offset points", color=color)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tokens/s (higher is better)")
    ax.set_ylabel("energy per token, J (lower is better)")
    ax.set_title(title or "sweep: lines join each device's Pareto front")
    ax.legend(fontsize=7)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return write_atomic(path, buf.getvalue())
