"""A sweep's CSV and plot, and the Pareto front they mark.

The Pareto front of one model on one device (`front_group`): the rows that fit in its memory
(or whose fit is unknown) and that no other such row beats on both axes, latency (`latency`: the
mean time per output token, lower is better) and cost (J/token, lower is better). A larger batch
costs less per token but each token takes longer: the front is that trade-off. A row that does not fit is drawn and written, marked, never on
the front. The plot needs matplotlib.

Energy a device's profile cannot source (dispatchprof.sim.energy_known; `mark_known_energy` sets
each row's flags from its devices): a row whose total energy is unknown (`SweepRow.energy_known`
False) has no J/token, so it is never on a front and not drawn (the plot names its device); its
CSV cells ``energy_j`` and ``energy_per_token_j`` are empty and its table cell reads
``<dynamic> + static UNKNOWN`` (only the static power unknown) or UNKNOWN (`energy_per_token_cell`).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
from typing import Mapping, Sequence

from dispatchprof.results.files import write_atomic
from dispatchprof.results.sweep import COLUMNS, SweepRow, row_values
from dispatchprof.sim.device import Device
from dispatchprof.sim.energy_known import KnownEnergy, known_energy, total_text


def mark_known_energy(rows: Sequence[SweepRow], devices: Mapping[str, Sequence[Device]]) -> list[SweepRow]:
    """The rows with ``dynamic_energy_known`` and ``static_energy_known`` set from the devices of
    their scenario (``devices``: scenario name -> its devices; a name not in it is left as it is),
    and ``dynamic_energy_per_token_j`` where the static power alone is unknown."""
    out = []
    for r in rows:
        if r.device in devices:
            known = known_energy(devices[r.device])
            dynamic = r.energy_per_token_j if known.dynamic and not known.static else None
            r = dataclasses.replace(r, dynamic_energy_known=known.dynamic, static_energy_known=known.static,
                                    dynamic_energy_per_token_j=dynamic)
        out.append(r)
    return out


def energy_per_token_cell(row: SweepRow) -> str:
    """The table's mJ/token cell: the figure (4 significant digits) when known; with only the static
    power unknown, the dynamic part and ``+ static UNKNOWN``; else UNKNOWN."""
    mj = row.energy_per_token_j * 1e3        # an unknown static part counts 0 here: this is the dynamic part
    return total_text(mj, mj, KnownEnergy(row.dynamic_energy_known, row.static_energy_known), lambda v: f"{v:.4g}")


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
    """The rows with ``pareto`` set per (device, model) (rows that do not fit, or whose energy is
    unknown, never are)."""
    out = list(rows)
    for group in dict.fromkeys(map(front_group, rows)):
        idx = [i for i, r in enumerate(rows) if front_group(r) == group and r.fits is not False and r.energy_known]
        for k in pareto_front([(latency(rows[i]), rows[i].energy_per_token_j) for i in idx]):
            out[idx[k]] = dataclasses.replace(rows[idx[k]], pareto=True)
    return out


def front_group(row: SweepRow) -> tuple[str, str]:
    """Rows compared for one front: one model on one device (the knobs are batch, prompt length
    and new tokens; a smaller model would otherwise win every front outright)."""
    return row.device, row.model


def sweep_csv(rows: Sequence[SweepRow]) -> str:
    """One CSV row per combination, raw units, empty cells where a figure does not apply or is
    not known (`row_values`)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow(["" if v is None else v for v in row_values(r).values()])
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
    shown = [r for r in rows if latency(r) > 0 and r.energy_known and r.energy_per_token_j > 0]
    unknown = sorted({r.device for r in rows if not r.energy_known})
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
    ax.set_title((title or "sweep: lines join the Pareto front of each model on each device (ringed points)")
                 + (f"\nnot drawn, J/token UNKNOWN (not published): {', '.join(unknown)}" if unknown else ""))
    ax.legend(fontsize=7)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return write_atomic(path, buf.getvalue())
