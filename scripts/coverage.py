"""Run the coverage zoo under OpCounter: the unknown ops of each model and whether its counts on
fake and meta tensors equal those on real ones.

    python scripts/coverage.py                 # every model, every tensor kind
    python scripts/coverage.py --kinds fake --models llama resnet

A model's fake or meta row says "= real" when every category, the MACs and both byte totals of the
training step equal the real row's (same optimizer), else the fields that differ. Exit status 1
when any model has an unknown op or fails to run (a differing kind is reported, not failed:
docs/zoo.md lists the differences and their causes).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tabulate import tabulate  # noqa: E402

import zoo  # noqa: E402
from dispatchprof import OpCounter  # noqa: E402
from op_formulas import CATEGORIES  # noqa: E402

FIELDS = CATEGORIES + ("macs", "bytes_read", "bytes_written")


def run(name: str, kind: str, optimizer: str | None) -> tuple[int, list[str]]:
    """(ops counted, unknown ops) of one training step."""
    calls, unknown, _ = run_totals(name, kind, optimizer)
    return calls, unknown


def run_totals(name: str, kind: str, optimizer: str | None) -> tuple[int, list[str], dict[str, int]]:
    """(ops counted, unknown ops, the step's totals by `FIELDS`)."""
    model, inputs, loss_fn = zoo.build(name, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with OpCounter() as c:
            zoo.training_step(model, inputs, loss_fn, optimizer=optimizer)
    total = c.total()
    return total.calls, [f"{u.op} x{u.calls}" for u in c.unknown_ops()], {f: getattr(total, f) for f in FIELDS}


def versus_real(totals: dict[str, int], real: dict[str, int] | None) -> str:
    """'= real', the fields that differ, or '-' (no real row to compare with)."""
    if real is None:
        return "-"
    diff = [f"{f} {totals[f] - real[f]:+,}" for f in FIELDS if totals[f] != real[f]]
    return "= real" if not diff else "; ".join(diff)


def _optimizers(name: str, kind: str) -> tuple[str, ...]:
    """Every AdamW implementation on one model; torch has no fused AdamW for meta tensors."""
    if name != "llama":
        return ("adamw",)
    return ("adamw", "adamw-foreach") if kind == "meta" else ("adamw", "adamw-foreach", "adamw-fused")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=list(zoo.ALL_NAMES), choices=zoo.ALL_NAMES)
    p.add_argument("--kinds", nargs="+", default=list(zoo.KINDS), choices=zoo.KINDS)
    args = p.parse_args(argv)
    rows, bad = [], 0
    kinds = sorted(args.kinds, key=zoo.KINDS.index)          # real first: the others compare with it
    for name in args.models:
        real: dict[str, dict[str, int]] = {}
        for kind in kinds:
            for opt in _optimizers(name, kind):
                try:
                    calls, unknown, totals = run_totals(name, kind, opt)
                    if kind == "real":
                        real[opt] = totals
                    same = "" if kind == "real" else versus_real(totals, real.get(opt))
                    rows.append([name, kind, opt, calls, len(unknown), ", ".join(unknown) or "-", same])
                    bad += bool(unknown)
                except Exception as e:  # reported as a row: a failing model is a coverage result
                    rows.append([name, kind, opt, "-", "error", f"{type(e).__name__}: {str(e)[:80]}", ""])
                    bad += 1
    print(tabulate(rows, headers=["model", "tensors", "optimizer", "ops counted", "unknown", "unknown ops",
                                  "counts vs real"]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
