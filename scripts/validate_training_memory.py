"""Validate `dispatchprof train`'s memory per GPU against published and measured peaks.

Reads scripts/data/published_training_memory.csv (one row per configuration: source URL or
file:line, the quoted table line, the full configuration as in published_training.csv, the
memory in GiB and which reading it is), predicts every row with the public API
(`dispatchprof.train.profile_training`, shipped defaults) and prints per row the predicted memory
by component and its error, then the median |error| by source and over all rows.

Readings: ``max_reserved`` (torchtitan's logged memory: the CUDA caching allocator's reserved
peak) is compared with the predicted total, fragmentation margin included; ``max_allocated``
(torch.cuda.max_memory_allocated, the project's own lent-GPU runs) with the total less the margin.

Usage: PYTHONPATH=. python scripts/validate_training_memory.py [--only SOURCE]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

import torch

from dispatchprof.llm.models import build_model
from dispatchprof.sim.placement import placement_of
from dispatchprof.train import profile_training
from dispatchprof.train.count import count_model, time_model
from validate_training import layout_of, of_source, run_timed, split_of

DATA = Path(__file__).parent / "data" / "published_training_memory.csv"
READINGS = ("max_reserved", "max_allocated")
GIB = 2 ** 30


def predicted_gib(r: dict, counted: dict) -> tuple[float, dict[str, float]]:
    """(the predicted figure comparable with the row's reading, the components in GiB)."""
    if r["reading"] not in READINGS:
        raise ValueError(f"row {r['id']}: reading must be one of {READINGS}, got {r['reading']!r}")
    lay = layout_of(r)
    key = (r["model"], lay.micro_batch, lay.seq_len)
    if key not in counted:
        counted.clear()
        counted[key] = count_model(build_model(r["model"], torch.bfloat16), r["model"], key[1], key[2])
        print(f"counted {key}", file=sys.stderr, flush=True)
    dev = placement_of(r["device"]).devices[0]
    step = time_model(counted[key], dev, tp=lay.tp, fp8=lay.fp8, runtime=r["runtime"])
    mem = profile_training(r["model"], r["device"], lay, counted=step).memory
    total = mem.total if r["reading"] == "max_reserved" else mem.total - mem.margin
    return total / GIB, {name: v / GIB for name, v in mem.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="only the rows of this source")
    args = ap.parse_args()
    rows = list(csv.DictReader(DATA.open()))
    bad = [r["id"] for r in rows if r["split"] != split_of(r["id"])]
    if bad:
        print(f"rows whose split does not follow the rule: {bad}", file=sys.stderr)
        return 1
    rows = of_source(ap, rows, args.only)
    counted: dict = {}
    out = []
    print(f"{'id':<46} {'reading':<13} {'published':>9} {'predicted':>9} {'error':>7}  "
          f"{'params':>6} {'grads':>6} {'optim':>6} {'acts':>6} {'bufs':>6} {'margin':>6}")
    for r in sorted(rows, key=lambda r: (r["model"], int(r["micro_batch"]), int(r["seq_len"]))):
        pred, parts = predicted_gib(r, counted)
        err = pred / float(r["memory_gib"]) - 1
        out.append((r, err))
        print(f"{r['id']:<46} {r['reading']:<13} {float(r['memory_gib']):>9.1f} {pred:>9.1f} {err:>+7.1%}  "
              + " ".join(f"{v:>6.1f}" for v in parts.values()))
    print()
    for source in sorted({r["source"] for r, _ in out}):
        errs = [e for r, e in out if r["source"] == source]
        print(f"{source:<12} rows {len(errs):>3}  median |error| {statistics.median(map(abs, errs)):6.1%}  "
              f"median error {statistics.median(errs):+6.1%}")
    print(f"{'all':<12} rows {len(out):>3}  median |error| {statistics.median(abs(e) for _, e in out):6.1%}")
    return 0


if __name__ == "__main__":
    run_timed(main)
