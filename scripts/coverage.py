"""Run the coverage zoo under OpCounter and print the unknown ops of each model.

    python scripts/coverage.py                 # every model, every tensor kind
    python scripts/coverage.py --kinds fake --models llama resnet

Exit status 1 when any model has an unknown op, or fails to run.
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


def run(name: str, kind: str, optimizer: str | None) -> tuple[int, list[str]]:
    model, inputs, loss_fn = zoo.build(name, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with OpCounter() as c:
            zoo.training_step(model, inputs, loss_fn, optimizer=optimizer)
    return c.total().calls, [f"{u.op} x{u.calls}" for u in c.unknown_ops()]


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
    for name in args.models:
        for kind in args.kinds:
            for opt in _optimizers(name, kind):
                try:
                    calls, unknown = run(name, kind, opt)
                    rows.append([name, kind, opt, calls, len(unknown), ", ".join(unknown) or "-"])
                    bad += bool(unknown)
                except Exception as e:  # reported as a row: a failing model is a coverage result
                    rows.append([name, kind, opt, "-", "error", f"{type(e).__name__}: {str(e)[:80]}"])
                    bad += 1
    print(tabulate(rows, headers=["model", "tensors", "optimizer", "ops counted", "unknown", "unknown ops"]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
