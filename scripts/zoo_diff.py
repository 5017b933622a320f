"""Where two tensor kinds' counts of one zoo model differ, op by op.

    python scripts/zoo_diff.py blip2 fake          # real against fake
    python scripts/zoo_diff.py lstm meta --phase backward

Prints, for each (phase, op) whose calls or totals differ, the calls on each kind and the
differing fields (the seven categories, MACs, bytes read and written). Used to explain the
"counts vs real" column of scripts/coverage.py (docs/zoo.md).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import zoo  # noqa: E402
from dispatchprof import OpCounter  # noqa: E402
from op_formulas import CATEGORIES  # noqa: E402

FIELDS = CATEGORIES + ("macs", "bytes_read", "bytes_written")


def per_op(name: str, kind: str) -> dict[tuple[str, str], collections.Counter]:
    """{(phase, op): Counter of calls and `FIELDS`} of one training step (no optimizer)."""
    model, inputs, loss_fn = zoo.build(name, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with OpCounter() as c:
            zoo.training_step(model, inputs, loss_fn)
    out: dict[tuple[str, str], collections.Counter] = collections.defaultdict(collections.Counter)
    for r in c.profile.records:
        row = out[(r.phase, r.op)]
        row["calls"] += 1
        for f in FIELDS:
            row[f] += getattr(r.cost, f)
    return out


def differences(a: dict, b: dict) -> list[tuple[str, str, str]]:
    """(phase, op, 'calls x -> y; field +d; ...') for every (phase, op) where b differs from a."""
    rows = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key, collections.Counter()), b.get(key, collections.Counter())
        diff = [f"{f} {y[f] - x[f]:+,}" for f in FIELDS if y[f] != x[f]]
        if diff or x["calls"] != y["calls"]:
            rows.append((key[0], key[1], f"calls {x['calls']} -> {y['calls']}; " + "; ".join(diff)))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", choices=zoo.ALL_NAMES)
    p.add_argument("kind", choices=[k for k in zoo.KINDS if k != "real"])
    p.add_argument("--phase", choices=("forward", "backward"), default=None)
    args = p.parse_args(argv)
    for phase, op, text in differences(per_op(args.model, "real"), per_op(args.model, args.kind)):
        if args.phase in (None, phase):
            print(f"{phase:9} {op:45} {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
