"""Signed TTFT residuals of the dense serving validation, from scripts/data/serving_predictions.csv.

    python scripts/ttft_residuals.py [--split fit|held-out|all] [CSV]

prints (fit rows by default; only they may choose anything):

1. the median signed TTFT error, (dispatchprof - measured) / measured, per engine and clients;
2. the same per engine and output length;
3. per engine and device, what two rows that differ only in output length say about the step
   that carries a prompt. In a closed loop of C clients with equal lengths, each client's cycle
   (TTFT + (OSL - 1) x TPOT) holds its OSL steps plus the steps it waits, of which C carry one
   prompt each: cycle = C x P + (OSL + W - C) x D. Two output lengths give the decode step D
   (the cycle's growth per output token) and, taking W = 2 waiting steps, the prompt-carrying
   step P; the table gives the medians of measured over predicted D and P, and of TTFT in units
   of each side's own P (how many such steps a request waits for its first token).
"""

from __future__ import annotations

import argparse
import collections
import csv
import os
import statistics

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = os.path.join(ROOT, "scripts", "data", "serving_predictions.csv")
WAITED = 2          # steps a request waits before its prompt's step ends, taken as known in (3)


def rows_of(path: str, split: str) -> list[dict]:
    """Closed-loop rows with both metrics predicted: one dict per row (TTFT and TPOT in ms)."""
    by_id: dict[str, dict] = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["metric"] not in ("ttft_mean", "tpot_mean") or not r["concurrency"] or not r["dispatchprof"]:
                continue
            if split != "all" and r["split"] != split:
                continue
            row = by_id.setdefault(r["id"], {k: r[k] for k in ("engine", "device", "model", "tp", "weights")})
            row.update(isl=int(r["isl"]), osl=int(r["osl"]), clients=int(float(r["concurrency"])))
            kind = r["metric"].split("_")[0]
            row[kind], row[kind + "_ours"] = float(r["measured"]), float(r["dispatchprof"])
    return [r for r in by_id.values() if "ttft" in r and "tpot" in r]


def signed(r: dict) -> float:
    return (r["ttft_ours"] - r["ttft"]) / r["ttft"]


def grid(rows: list[dict], column: str) -> str:
    """Median signed TTFT error per engine (rows) and ``column`` (columns), with row counts."""
    cells = collections.defaultdict(list)
    for r in rows:
        cells[r["engine"], r[column]].append(signed(r))
    engines = sorted({e for e, _ in cells})
    keys = sorted({k for _, k in cells})
    lines = [f"{'engine':8s}" + "".join(f"{k:>12}" for k in keys)]
    for e in engines:
        lines.append(f"{e:8s}" + "".join(
            f"{statistics.median(cells[e, k]):+7.0%} ({len(cells[e, k]):2d})" if (e, k) in cells else " " * 12
            for k in keys))
    return "\n".join(lines)


def step_split(a: dict, b: dict, ours: bool) -> tuple[float, float]:
    """(D, P) of two rows that differ in output length only (module docstring, 3)."""
    t, p = ("ttft_ours", "tpot_ours") if ours else ("ttft", "tpot")
    cycle_a, cycle_b = a[t] + (a["osl"] - 1) * a[p], b[t] + (b["osl"] - 1) * b[p]
    d = (cycle_b - cycle_a) / (b["osl"] - a["osl"])
    return d, d + (cycle_a - (a["osl"] + WAITED) * d) / a["clients"]


def steps_table(rows: list[dict]) -> str:
    """Medians of measured / predicted D and P, and TTFT / P on each side, per engine and device."""
    groups = collections.defaultdict(list)
    for r in rows:
        groups[tuple(r[k] for k in ("engine", "device", "model", "tp", "weights", "isl", "clients"))].append(r)
    cells = collections.defaultdict(list)
    for key, g in groups.items():
        g.sort(key=lambda r: r["osl"])
        a, b = g[0], g[-1]
        if a["osl"] == b["osl"]:
            continue
        (dm, pm), (do, po) = step_split(a, b, False), step_split(a, b, True)
        if min(dm, pm, do, po) <= 0:
            continue                    # the pair does not follow the closed-loop cycle (e.g. KV-bound)
        cells[key[:2]].append((dm / do, pm / po, a["ttft"] / pm, a["ttft_ours"] / po))
    lines = [f"{'engine':8s}{'device':10s}{'pairs':>6s}{'D meas/ours':>12s}{'P meas/ours':>12s}"
             f"{'TTFT/P meas':>12s}{'TTFT/P ours':>12s}"]
    for (engine, device), vals in sorted(cells.items()):
        med = [statistics.median(v[i] for v in vals) for i in range(4)]
        lines.append(f"{engine:8s}{device:10s}{len(vals):6d}" + "".join(f"{m:12.2f}" for m in med))
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv", nargs="?", default=DEFAULT)
    p.add_argument("--split", choices=("fit", "held-out", "all"), default="fit")
    args = p.parse_args()
    rows = rows_of(args.csv, args.split)
    print(f"{len(rows)} closed-loop rows ({args.split}); signed TTFT error (dispatchprof - measured) / measured\n")
    print("by clients\n" + grid(rows, "clients") + "\n")
    print("by output length\n" + grid(rows, "osl") + "\n")
    print("steps from rows that differ in output length only\n" + steps_table(rows))


if __name__ == "__main__":
    main()
